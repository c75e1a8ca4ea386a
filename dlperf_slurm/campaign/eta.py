"""The time a campaign has left, for ``submit --wait`` and ``collect --watch``: one estimate, one wording.

The estimate is the rate runs ended since the watch began, applied to the runs still to end:
``remaining x (now - start) / (runs ended since start)``. The rate counts what the scheduler actually ran at once
(an array's throttle, a QOS's limits, a queue in front), so no concurrency is guessed. Until a run has ended since
the watch began, the time left is unknown (said so)."""

from __future__ import annotations

import time
from dataclasses import dataclass


def time_left(start: float, ended_at_start: int, now: float, ended: int, remaining: int) -> float | None:
    """Seconds until ``remaining`` runs end, at the rate runs ended between ``start`` (when ``ended_at_start`` had
    ended) and ``now`` (``ended``); None when none ended since ``start`` (or no time passed); 0 when none remains."""
    if remaining <= 0:
        return 0.0
    gained = ended - ended_at_start
    if gained <= 0 or now <= start:
        return None
    return remaining * (now - start) / gained


def time_left_text(seconds: float | None) -> str:
    """``time left: unknown`` / ``time left: ~40 s`` / ``~12 min`` / ``~2 h 05 min``."""
    if seconds is None:
        return "time left: unknown"
    s = round(seconds)
    if s < 90:
        return f"time left: ~{s} s"
    if s < 90 * 60:
        return f"time left: ~{round(s / 60)} min"
    h, m = divmod(round(s / 60), 60)
    return f"time left: ~{h} h {m:02d} min"


@dataclass
class Clock:
    """A watch's clock: the first :meth:`text` is its start (with the runs ended by then)."""

    start: float | None = None
    ended_at_start: int = 0

    def text(self, ended: int, remaining: int, now: float | None = None) -> str:
        now = time.time() if now is None else now
        if self.start is None:
            self.start, self.ended_at_start = now, ended
        return time_left_text(time_left(self.start, self.ended_at_start, now, ended, remaining))
