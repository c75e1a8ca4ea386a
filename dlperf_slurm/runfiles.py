"""What a run's files say besides its log's verdict, for :func:`dlperf_slurm.outcome.decide`: a kill banner or a
cgroup OOM line in the scheduler's own output file (:func:`read_banner`), and when the job script started, from
its log's provenance line (:func:`log_start`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from dlperf_slurm.model import Status
from dlperf_slurm.storage import open_log


def read_banner(paths: Sequence[str | Path]) -> tuple[Status, str] | None:
    """A verdict the scheduler's own output files state: a ``slurmstepd`` kill banner or a cgroup OOM kill."""
    from dlperf_slurm import parsing

    for p in paths:
        try:
            for line in parsing.read_lines(p):
                st = parsing.slurm_kill(line) if "***" in line else None
                if st:
                    return Status(st), line.strip()[:300]
                if "oom-kill" in line or "oom_kill" in line or "Exceeded job memory limit" in line:
                    return Status.OOM, line.strip()[:300]
        except OSError:
            continue
    return None


def job_event(path: str | Path) -> dict[str, Any] | None:
    """The provenance (``job``) event near the top of a run's log (None: no such event, or no readable log)."""
    from dlperf_slurm import events

    try:
        with open_log(path) as f:
            head = f.read(65536).decode(errors="replace")
    except OSError:
        return None
    for line in head.splitlines():
        ev = events.parse_event(line) if events.PREFIX in line else None
        if ev is not None and ev.get(events.EVENT) == events.EV_JOB:
            return ev
    return None


def log_start(path: str | Path) -> float | None:
    """When the job script started, from the provenance (``job``) event near the top of its log."""
    ev = job_event(path)
    if ev is not None:
        from dlperf_slurm import events

        try:
            return float(ev[events.TIME])
        except (KeyError, TypeError, ValueError):
            return None
    return None
