"""``search``: the largest value of one axis that runs without running out of memory, per cell — DLPerf's
"bsz=max" columns, W&D's OOM rows and InsightFace's max num_classes, found by a program instead of by hand.

For every cell of the matrix (the searched axis set aside), probes — one short run each (``--probe-steps``) —
double the value from ``start`` until one runs out of memory (or ``limit`` is reached), then bisect between the
last OK and the first OOM down to ``step``: at most ``floor(log2(limit / start)) + 1`` doublings and
``ceil(log2(max(limit / 2, start) / step))`` bisection probes per cell (:func:`bound`); a boundary B takes about
``2 log2(B) - log2(start)``. Probes of every cell go out together, round by round, through the normal submit path
into the campaign ``<name>.search`` (its manifest is the search's memory: a second ``search`` reuses every
finished probe and goes on where the first stopped). A probe that fails for another reason than OOM stops that
cell's search with the reason. The result is kept in ``<name>.search/search.json``; unless ``--no-run``, the
largest OK value of each cell is then submitted with the matrix's normal repeats into the campaign itself, and
``collect`` shows it ("max 96 (batch_size, 9 probes)").

This module is the search alone (and the reader of its result, for ``collect``); the ``search`` command
(:mod:`dlperf_slurm.commands.search`) hands it a ``probe`` that goes through ``submit`` and waits.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from dlperf_slurm.disk import atomic_write
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.cell import Cell, Matrix, Measure
from dlperf_slurm.model.status import Status
from dlperf_slurm.words import plural

RESULT = "search.json"
SUFFIX = ".search"  # the probes' campaign: <campaign><SUFFIX>


@dataclass(kw_only=True)
class Search:
    """One cell's search: its probes so far (value -> status) and what they imply."""

    key: str  # the cell's id with the searched axis set to "max"
    axis: str
    start: int
    limit: int
    step: int
    probes: dict[int, str] = field(default_factory=dict)  # value -> Status of its probe, in probe order
    stopped: str = ""  # why the search ended early (a probe failed for another reason than OOM)
    found_id: str = ""  # the id of the cell at the largest OK value (the one run with the normal repeats)

    @property
    def ok(self) -> int | None:
        vals = [v for v, s in self.probes.items() if s == Status.OK]
        return max(vals) if vals else None

    @property
    def oom(self) -> int | None:
        vals = [v for v, s in self.probes.items() if s == Status.OOM]
        return min(vals) if vals else None

    def next_value(self) -> int | None:
        """The next value to probe; None when the search is over."""
        if self.stopped:
            return None
        ok, oom = self.ok, self.oom
        if oom is None:  # doubling
            v = self.start if ok is None else ok * 2
            return v if v <= self.limit and v not in self.probes else None
        low = ok or 0
        if oom - low <= self.step:
            return None
        mid = low + (oom - low) // 2 // self.step * self.step
        mid = max(mid, low + self.step)
        return mid if mid < oom and mid not in self.probes else None

    @property
    def result(self) -> str:
        ok, oom = self.ok, self.oom
        if self.stopped:
            return f"stopped: {self.stopped}"
        if ok is None:
            return f"OOM at {oom}" if oom is not None else "not searched"
        return f"max {ok}" if oom is not None else f"max >= {ok} (limit {self.limit})"

    def as_dict(self) -> dict[str, Any]:
        return {"cell": self.key, "axis": self.axis, "max": self.ok, "first_oom": self.oom, "result": self.result,
                "probes": [{"value": v, "status": s} for v, s in self.probes.items()], "stopped": self.stopped,
                "found_cell": self.found_id}


def bound(start: int, limit: int, step: int) -> int:
    """The most probes one cell's search can take: the doublings up to the limit, then the bisection of the
    widest gap they can leave (half the limit, or start when the first probe runs out of memory) down to step."""
    doubling = math.floor(math.log2(max(limit / start, 1))) + 1
    return doubling + math.ceil(math.log2(max(limit / 2, start) / step))


def axis_value(cell: Cell, axis: str) -> Any:
    return cell.batch_size if axis == "batch_size" else cell.param(axis)


def with_value(cell: Cell, axis: str, value: int, defaults: dict[str, Any]) -> Cell:
    """``cell`` with the searched axis at ``value`` (a suite axis at its default is left out of the id)."""
    if axis == "batch_size":
        return dataclasses.replace(cell, batch_size=int(value))
    params = {k: v for k, v in cell.params if k != axis}
    if value != defaults.get(axis):
        params[axis] = int(value)
    return dataclasses.replace(cell, params=tuple(sorted(params.items())))


def not_numeric(suite: Any, axis: str, value: Any) -> str:
    """Why a suite axis cannot be searched (its values are words or true/false, not counts), or ''."""
    def is_int(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    allowed = tuple(suite.axes.get(axis) or ())
    samples = [x for x in (*allowed, suite.axis_defaults.get(axis), value) if x is not None]
    bad = [x for x in samples if not is_int(x)]
    if not bad:
        return ""
    return f"one of {', '.join(map(repr, allowed))}" if allowed else f"not a whole number ({bad[0]!r})"


def base_cells(matrix: Matrix, axis: str) -> list[tuple[Cell, str]]:
    """The matrix's cells with the searched axis set aside (one search each, in matrix order), with their keys
    (the id with the axis at "max")."""
    out: dict[str, tuple[Cell, str]] = {}
    for c in matrix.cells:
        if axis == "batch_size":
            base = dataclasses.replace(c, batch_size=1)
            key = base.id.replace(".b1.", ".bmax.", 1)
        elif axis in matrix.suite_of(c).axes:
            why = not_numeric(matrix.suite_of(c), axis, c.param(axis))
            if why:
                raise UserError(f"--axis {axis}: {c.suite}'s {axis} is {why}; search finds the largest value of a "
                                "numeric axis (batch_size, or one such as num_classes)")
            base = dataclasses.replace(c, params=tuple((k, v) for k, v in c.params if k != axis))
            key = f"{base.id}.{axis}-max"
        else:
            raise UserError(f"--axis {axis}: not an axis of {c.suite} (its axes: batch_size"
                            f"{''.join(', ' + a for a in matrix.suite_of(c).axes)})")
        out.setdefault(key, (base, key))
    return list(out.values())


def run_search(matrix: Matrix, axis: str, campaign_dir: Path, probe: Callable[[list[Cell], Measure], dict[str, str]],
               start: int, limit: int, step: int, probe_steps: tuple[int, int], out=print) -> list[Search]:
    """Search every cell; ``probe(cells, measure)`` runs one probe of each cell and returns cell id -> status
    (it is the normal submit path, and reuses a probe already finished)."""
    if not (1 <= step <= start <= limit):
        raise UserError(f"search: need 1 <= step <= start <= limit (got step {step}, start {start}, limit {limit})")
    measure = Measure(repeats=1, warmup_steps=probe_steps[0], measure_steps=probe_steps[1], hang_timeout=0)
    searches: list[tuple[Cell, Search, dict[str, Any]]] = []
    for base, key in base_cells(matrix, axis):
        searches.append((base, Search(key=key, axis=axis, start=start, limit=limit, step=step),
                         dict(matrix.suite_of(base).axis_defaults)))
    rounds = 0
    while True:
        todo = [(base, s, v, d) for base, s, d in searches if (v := s.next_value()) is not None]
        if not todo:
            break
        rounds += 1
        cells = [with_value(base, axis, v, d) for base, _s, v, d in todo]
        statuses = probe(cells, measure)
        for (_base, s, v, _d), cell in zip(todo, cells):
            st = statuses.get(cell.id, Status.UNSUBMITTED)
            s.probes[v] = st
            out(f"search: {s.key}: {axis} = {v}: {st}")
            if st not in (Status.OK, Status.OOM):
                s.stopped = f"the probe at {axis} = {v} ended {st}, not OK or OOM"
    for base, s, d in searches:
        s.found_id = with_value(base, axis, s.ok, d).id if s.ok is not None else ""
    result = [s for _b, s, _d in searches]
    atomic_write(campaign_dir / RESULT, json.dumps({"axis": axis, "start": start, "limit": limit, "step": step,
                                                   "probe_steps": list(probe_steps), "rounds": rounds,
                                                   "cells": [s.as_dict() for s in result]}, indent=1))
    return result


def found_cells(matrix: Matrix, axis: str, searches: Sequence[Search]) -> list[Cell]:
    """The cells to run with the normal repeats: each searched cell at its largest OK value."""
    by_key = {s.key: s for s in searches}
    out = []
    for base, key in base_cells(matrix, axis):
        s = by_key.get(key)
        if s is not None and s.ok is not None:
            out.append(with_value(base, axis, s.ok, dict(matrix.suite_of(base).axis_defaults)))
    return out


def read_results(campaign_dir: str | Path) -> dict[str, str]:
    """cell id (at its found value) -> what the tables say of it ("max 96 (batch_size, 9 probes)"), from the
    probes' campaign beside ``campaign_dir``."""
    p = Path(str(campaign_dir) + SUFFIX) / RESULT
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError):
        return {}
    return {c["found_cell"]: f"{c['result']} ({doc['axis']}, {plural(len(c['probes']), 'probe')})"
            for c in doc.get("cells", []) if c.get("found_cell")}
