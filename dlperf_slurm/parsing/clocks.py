"""Timestamps as logs print them, turned into seconds since the first stamp read (only differences are used)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from dlperf_slurm.parsing.lines import to_float

# -------------------------------------------------------------------------------------------- timestamps

_EPOCH = datetime(1970, 1, 1)


class IsoClock:
    """``2020-09-15 14:29:13.473765`` (naive, as dllogger prints it) to seconds since the first stamp the parser
    read: small numbers keep every microsecond of a difference (absolute epoch seconds would lose ~0.2 us).
    Only differences are used, so the time zone does not matter. None when malformed."""

    def __init__(self) -> None:
        self.base: datetime | None = None
        self._minute: str | None = None  # "YYYY-MM-DD HH:MM" of the last stamp, and its offset from base
        self._minute_offset = 0.0

    def seconds(self, text: str) -> float | None:
        # Stamps of one minute share their first 16 characters: only the seconds are read again (fast path).
        if len(text) > 17 and text[16] == ":" and text[:16] == self._minute:
            sec = text[17:]
            if sec[:2].isdigit() and (len(sec) == 2 or (sec[2] == "." and sec[3:].isdigit())):
                return self._minute_offset + float(sec)
        try:
            d = datetime.fromisoformat(text)
        except ValueError:
            return None
        if d.tzinfo is not None:
            d = d.replace(tzinfo=None) - d.utcoffset()  # type: ignore[operator]
        if self.base is None:
            self.base = d
        minute = d.replace(second=0, microsecond=0)
        if d.tzinfo is None and len(text) > 17 and text[16] == ":":
            self._minute = text[:16]
            self._minute_offset = (minute - self.base).total_seconds()
        return (d - self.base).total_seconds()


class EpochClock:
    """Unix timestamps written as text (dllogger's ``"timestamp": "1570716921.842053"``) to seconds since the
    first one read, without the float rounding of large epoch values."""

    def __init__(self) -> None:
        self.base: int | None = None

    def seconds(self, value: Any) -> float | None:
        if isinstance(value, str):
            whole, _dot, frac = value.strip().partition(".")
            if not whole.lstrip("-").isdigit() or (frac and not frac.isdigit()):
                return to_float(value) if self.base is None else None
            w = int(whole)
            if self.base is None:
                self.base = w
            return (w - self.base) + (float("0." + frac) if frac else 0.0)
        v = to_float(value)
        if v is None or not math.isfinite(v):
            return None
        if self.base is None:
            self.base = int(v)
        return v - self.base


class GlogClock:
    """absl/glog timestamps (``I0826 15:12:50.113950``) carry no year: count seconds in a leap year and add a
    year whenever the clock jumps back by more than half a year (a run across New Year). Seconds are counted
    from the first stamp read."""

    _YEAR = 366 * 86400.0

    def __init__(self) -> None:
        self.offset = 0.0
        self.last: float | None = None
        self.base: float | None = None

    def seconds(self, mmdd: str, hms: str) -> float | None:
        try:
            month, day = int(mmdd[:2]), int(mmdd[2:4])
            h, m, s = hms.split(":")
            whole, _, frac = s.partition(".")
            t = (datetime(2000, month, day, int(h), int(m), int(whole)) - _EPOCH).total_seconds()
        except (ValueError, IndexError):
            return None
        if self.base is None:
            self.base = t
        t = t - self.base + self.offset
        if self.last is not None and t < self.last - self._YEAR / 2:
            self.offset += self._YEAR
            t += self._YEAR
        self.last = t
        return t + (float("0." + frac) if frac.isdigit() else 0.0)
