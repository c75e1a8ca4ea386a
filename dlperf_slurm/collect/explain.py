"""``collect --explain RUN``: where one run's figures and status come from, so a user who doubts a number can check
it against the log in a minute: the first and last timed step lines of the window (with their line numbers), the
window, the rule that gave each figure (which throughput flavour, its formula with the log's own numbers), the log's
verdict and the row of the decision table (:mod:`dlperf_slurm.outcome.decision`) that gave the status, and for a run
with
no figure the lines that say why (the error line, the lines that look like progress).

The log is read once more, line by line, by the same suite parser ``collect`` uses; every step the parser times
(:data:`dlperf_slurm.parsing.lines.TRACE`) is kept with the number of the line it was read from.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dlperf_slurm.collect.runparse import RunSpec
from dlperf_slurm.errors import UserError
from dlperf_slurm.words import plural


def find_run(collections: Sequence[Any], what: str) -> RunSpec:
    """The run ``what`` names among the gathered runs: its key (``<cell id>.r<repeat>``, as the summaries' ``run``
    column shows it) or its log's path."""
    runs = [s for c in collections for s in c.runs]
    for s in runs:
        if s.key == what:
            return s
    if os.path.exists(what):
        for s in runs:
            try:
                if os.path.samefile(s.log, what):
                    return s
            except OSError:
                continue
    where = ", ".join(c.where for c in collections)
    near = [s.key for s in runs if what in s.key or s.key in what][:5] or [s.key for s in runs[:3]]
    raise UserError(f"--explain {what}: no run of {where} has that key or log (runs are named as the summaries' "
                    f"run column: {', '.join(near)}{', ...' if len(runs) > len(near) else ''})")


class _Trace(list):
    """:data:`dlperf_slurm.parsing.lines.TRACE` for one parse: each step timed, with the line being read when it
    was (``Window.add``), and every record the suite's handler read (``records``: line number, line, rank)."""

    def __init__(self) -> None:
        super().__init__()
        self.at: tuple[int, str] = (0, "")
        self.records: list[tuple[int, str, int | None]] = []

    def append(self, item: Any) -> None:  # (step, time, speed) from Window.add
        super().append((*self.at, *item))

    def consumed(self, rank: int | None) -> None:  # from the Scanner: the handler read a record
        self.records.append((*self.at, rank))

    def step_lines(self) -> tuple[list[tuple], str]:
        """The steps with the lines they came from, and a note when no line is a step's own. A suite that times
        its steps as it reads them has each step at its own line; one that gathers them first (over ranks, or
        epochs) times them all at the end: its steps map to the records rank 0 read, in order, when there are as
        many, else to no single line."""
        steps = list(self)
        if len({t[0] for t in steps}) >= 0.8 * len(steps):
            return steps, ""
        mine = [r for r in self.records if r[2] in (None, 0)]
        if len(mine) == len(steps):
            return [(r[0], r[1], *t[2:]) for r, t in zip(mine, steps)], ""
        first, last = (self.records[0], self.records[-1]) if self.records else ((0, ""), (0, ""))
        return [], (f"this suite's parser gathers its {plural(len(self.records), 'step record')} (over ranks or "
                    f"epochs) before timing {plural(len(steps), 'step')}, so no one line is a step's own; its records "
                    f"run from line {first[0]} to line {last[0]}:\n      {first[1].strip()[:300]}\n      "
                    f"{last[1].strip()[:300]}")


def _numbered(path: str, trace: _Trace) -> Iterator[str]:
    from dlperf_slurm.parsing.lines import text_lines

    for n, line in enumerate(text_lines(path), 1):
        trace.at = (n, line)
        yield line


def traced(spec: RunSpec) -> tuple[Any, dict[str, Any], _Trace]:
    """The run's row, decided as ``collect`` decides it, its timed window (start, end, steps, seconds; empty
    when none), and every step its suite's parser timed (:class:`_Trace`)."""
    from dlperf_slurm.collect import runparse
    from dlperf_slurm.outcome import evidence
    from dlperf_slurm.parsing import lines as window  # its TRACE

    trace = _Trace()
    size = os.path.getsize(spec.log) if os.path.isfile(spec.log) else None
    if size is None:
        from dlperf_slurm.model.result import RunResult
        from dlperf_slurm.model.status import Status

        res = RunResult(status=Status.LAUNCH_FAILED, reason="no log")
    else:
        window.TRACE = trace
        try:
            res = evidence.read_log(spec.cell, spec.log, warmup_steps=spec.warmup_steps,
                                   measure_steps=spec.measure_steps, options=spec.options,
                                   lines=_numbered(spec.log, trace))
        finally:
            window.TRACE = None
    fresh = copy.deepcopy(res)
    row = runparse.row_of(spec, res, size)
    row.extra["rule"] = res.extra.get("rule")
    if not row.extra["rule"] and spec.state:  # the manifest's decision: the table over the same files, again
        runparse.row_of(dataclasses.replace(spec, state=None, log_status=None), fresh, size)
        row.extra["table_now"] = (fresh.extra.get("rule"), str(fresh.status))
    return row, dict(res.window or {}), trace


def _step_line(trace: Sequence[tuple], step: int | None, after: int = 0) -> tuple | None:
    """The first traced step ``step`` read at or after line ``after``."""
    if step is None:
        return None
    return next((t for t in trace if t[2] == step and t[0] >= after and t[3] is not None), None)


def _quote(t: tuple | None, what: str, step: int | None) -> str:
    if t is None:
        return (f"  {what}: step {step}: no line of the log times it (the window's start comes from a later line's "
                "own interval, or the program's own summary)")
    n, line, s, clock, _speed = t
    when = f"clock {clock:.6g} s" if clock is not None else "untimed"
    return f"  {what}: line {n} (step {s}, {when}):\n      {line.strip()[:300]}"


def explain(collections: Sequence[Any], what: str) -> str:
    """The text ``collect --explain`` prints for the run ``what`` names (:func:`find_run`)."""
    from dlperf_slurm import suites

    spec = find_run(collections, what)
    row, win, tr = traced(spec)
    trace, gathered = tr.step_lines()
    try:
        suite = suites.get(spec.cell.suite)
        unit, published = suite.sample_unit, suite.published
    except KeyError:
        unit, published = "samples/s", "time"
    x = row.extra or {}
    out = [f"run {spec.key}: suite {spec.cell.suite}, cell {spec.cell.id}",
           f"log {spec.log}" + (f" ({plural(row.log_bytes, 'byte', grouped=True)})" if row.log_bytes is not None
                                 else " (none)"),
           (f"window: skip {plural(spec.warmup_steps, 'step')}, time the next {spec.measure_steps} (steps "
            f"{spec.warmup_steps} -> {spec.warmup_steps + spec.measure_steps}); the parser timed "
            f"{plural(len(tr), 'step')}, the last step "
            f"{max((t[2] for t in tr), default='none')}"
            + (f", from {plural(len(tr.records), 'record')} its handler read" if tr.records else ""))]
    if row.window_start is not None and row.window_end is not None:
        first = _step_line(trace, row.window_start)
        last = _step_line(trace, row.window_end, first[0] if first else 0)
        out += ["timed steps:", *([f"  {gathered}"] if gathered else [
            _quote(first, "first (window start)", row.window_start),
            _quote(last, "last (window end)", row.window_end)])]
        out += _formulas(row, win, tr, unit, published)
        out.append(f"published figure ({published} flavour): "
                   + (f"{row.throughput:.2f} {unit}" if row.throughput is not None else "none"))
    elif trace:  # no timed window: the steps the log does hold
        out += ["no timed window; the step lines the parser read:", _quote(trace[0], "first", trace[0][2]),
                _quote(trace[-1], "last", trace[-1][2])]
    elif gathered:
        out += [f"no timed window; {gathered}"]
    out += _status_lines(row, x)
    if row.reason:
        out.append(f"reason: {row.reason}")
    if not len(tr) and row.log_bytes is not None:
        out.append("no step line: the parser read no training step from this log")
    return "\n".join(out)


def _formulas(row: Any, win: Mapping[str, Any], tr: Any, unit: str, published: str) -> list[str]:
    """Each figure's formula with the log's numbers: the time flavour, the latency, the speed flavour."""
    out: list[str] = []
    seconds = win.get("seconds")
    steps = row.window_steps
    if row.throughput_time is not None and steps:
        per_step = row.throughput_time * (seconds or 0) / steps if seconds else None
        out.append(f"throughput, time flavour{' (published)' if published == 'time' else ''}: samples per step "
                   f"x steps / seconds = {per_step:g} x {steps} / {seconds:.6g} s = {row.throughput_time:.2f} "
                   f"{unit}" if per_step else f"throughput, time flavour: {row.throughput_time:.2f} {unit}")
    if row.latency_ms is not None and steps and seconds:
        out.append(f"latency: 1000 x {seconds:.6g} s / {plural(steps, 'step')} = {row.latency_ms:.2f} ms per step")
    speeds = [t for t in tr if t[4] is not None and row.window_start < t[2] <= row.window_end]
    if row.throughput_speed is not None:
        raw = sum(t[4] for t in speeds) / len(speeds) if speeds else None
        scale = f" x {row.throughput_speed / raw:g} (the suite's scale to samples/s)" \
            if raw and abs(row.throughput_speed / raw - 1) > 1e-9 else ""
        out.append(f"throughput, speed flavour{' (published)' if published == 'speed' else ''}: mean of the "
                   f"{len(speeds)} per-step figures the log prints in steps ({row.window_start}, "
                   f"{row.window_end}]{scale} = {row.throughput_speed:.2f} {unit}")
    return out


def _status_lines(row: Any, x: Mapping[str, Any]) -> list[str]:
    """The log's verdict, and the row of the decision table that gave the status."""
    from dlperf_slurm.outcome import decision

    out: list[str] = []
    log_status = x.get("log_status")
    rule = x.get("rule")
    out.append(f"the log's verdict (its parser, method.md's order): {log_status}")
    how = decision.RULES.get(rule or 0, "the manifest's record, decided with the log when the run ended")
    out.append(f"status: {row.status}, by the decision table's row {rule or '-'} ({how}); "
               f"exit marker: {'rc ' + str(row.exit_code) if row.exit_code is not None else 'none'}"
               + (f"; scheduler: {row.scheduler_state}" if row.scheduler_state else ""))
    if x.get("table_now"):
        again, status = x["table_now"]
        out.append(f"  (the manifest recorded it when the run ended; the table over the log and the exit marker "
                   f"alone, now: row {again} ({decision.RULES.get(again, '?')}) -> {status})")
    return out
