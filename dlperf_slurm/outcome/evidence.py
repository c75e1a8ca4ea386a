"""What a run's files say besides its log's verdict, for :func:`dlperf_slurm.outcome.decision.decide`: a kill banner
or a
cgroup OOM line in the scheduler's own output file (:func:`read_banner`), and when the job script started, from
its log's provenance line (:func:`log_start`); whether the log changed after the run ended (:func:`changed_after_end`);
and the log's verdict read by its suite's parser (:func:`read_log`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from dlperf_slurm import disk
from dlperf_slurm.disk import open_log
from dlperf_slurm.model.cell import Cell
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing import head
from dlperf_slurm.words import plural

#: a log written this long after its exit marker (both stamped by the same file server) was changed after the run
WRITTEN_AFTER_S = 2.0


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


def changed_after_end(log: str | Path, marker: str | Path | None, read_ok_before: bool = False) -> str:
    """Why the log of an ended run is not what the run wrote ('' when nothing says so): written to after the job
    script's exit marker (the script writes the marker last; both files' times come from the file server that
    holds them), or read OK before and changed since (``read_ok_before``: the manifest's verdict of an earlier
    identity of this log). A run whose log was truncated or emptied afterwards ran; its log no longer shows it."""
    try:
        log_st = os.stat(log)
    except OSError:
        return ""
    size = f"now {plural(log_st.st_size, 'byte', grouped=True)}"
    if marker:
        try:
            late = log_st.st_mtime - os.stat(marker).st_mtime
        except OSError:
            late = 0.0
        if late > WRITTEN_AFTER_S:
            return f"the log was written {late:,.0f} s after its run ended (its exit marker); {size}"
    return f"the log read OK before and has changed since; {size}" if read_ok_before else ""


def read_log(cell: Cell, log: str | Path, *, warmup_steps: int, measure_steps: int,
             options: Mapping[str, Any] | None = None, lines: Iterable[str] | None = None) -> RunResult:
    """The log's verdict and figures, read by the cell's suite parser (from ``lines`` when given: ``collect
    --explain``'s). Never raises for a bad log: a parser exception is a PARSE_ERROR result, no log LAUNCH_FAILED."""
    from dlperf_slurm import parsing, suites

    problem, data = head.read_head(log)  # a small log is read once, here
    if problem:
        return RunResult(status=Status.LOG_MISSING, reason=problem)
    try:
        suite = suites.get(cell.suite)
        ctx = ParseContext(nodes=cell.nodes, gpus_per_node=cell.gpus_per_node, batch_size=cell.batch_size,
                           warmup_steps=warmup_steps, measure_steps=measure_steps,
                           precision=cell.precision, options={**suite.options, **(options or {})},
                           program_batch=cell.program_batch)
        res = suite.parse(parsing.read_lines(log, data) if lines is None else lines, ctx)
    except FileNotFoundError:
        return RunResult(status=Status.LAUNCH_FAILED, reason="no log")
    except Exception as err:  # noqa: BLE001 - one bad log must never stop status or collect
        return RunResult(status=Status.PARSE_ERROR, reason=f"parser failed: {type(err).__name__}: {err}"[:300])
    if res.status == Status.LAUNCH_FAILED:  # no step its suite knows: what the log holds, which suites read it
        from dlperf_slurm.suites import recognise

        try:
            res.extra["unread"] = recognise.unread(log, cell.suite)
        except OSError:
            pass
    return res


def read_marker(path: str | Path | None) -> dict[str, Any] | None:
    """The exit marker the job script wrote at its end, or None (absent, partial, not ours)."""
    if not path:
        return None
    try:
        with disk.open_log(path) as f:  # not a plain open: a FIFO in its place would block for ever
            data = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "rc" in data else None
