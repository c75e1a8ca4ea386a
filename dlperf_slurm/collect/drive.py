"""``collect``: every run's log -> numbers a user can publish (method.md, to the letter).

1. Gather the runs (:mod:`dlperf_slurm.collect.gather`): from a campaign's manifest, from a matrix, or from a
   DLPerf-style tree without any manifest (``DIR/<N>n<G>g/<model>_b<bsz>_<prec>_<repeat>.log``).
2. Parse each log once, streaming, with its suite's parser; fold in the scheduler state and the exit marker
   (:mod:`dlperf_slurm.collect.runparse`), in parallel processes; a parser failure is a PARSE_ERROR run, never a crash.
3. Per cell: statistics over the OK runs only, flags, speedup and efficiency against the 1x1 cell of the same
   suite, precision, XLA, batch per device, variant and launcher, else the only 1x1 cell that differs from it in
   launcher alone (:func:`dlperf_slurm.collect.cells.cells_of`).

The results are typed rows (:class:`~dlperf_slurm.model.rows.RunRow`, :class:`~dlperf_slurm.model.rows.CellRow`);
:mod:`dlperf_slurm.report.writers`'s writers turn them into markdown, CSV, JSON and SVG plots.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dlperf_slurm import disk
from dlperf_slurm.campaign import manifest, records
from dlperf_slurm.collect import parsecache
from dlperf_slurm.collect.cells import cells_of
from dlperf_slurm.collect.gather import Collection, keeps_what_it_makes
from dlperf_slurm.collect.runparse import parse_all
from dlperf_slurm.matrix.search import read_results
from dlperf_slurm.model.rows import CellRow, RunRow
from dlperf_slurm.model.status import FINAL

# ============================================================================================== driver


@dataclass(kw_only=True)
class Result:
    name: str
    collections: list[Collection]
    runs: list[RunRow]
    cells: list[CellRow]
    seconds: float
    bytes: int
    reread: int | None = None  # logs parsed this time (the others came from the parse cache); None: no cache
    workers: int = 1  # processes that read logs (0: none was read)
    #: what the summary writers wrote last time, while ``report.write_all`` writes (None: write everything)
    output_state: parsecache.OutputState | None = None
    with_plots: bool = True  # whether the writers make plots (the HTML report inlines them): write_all's ``plots``
    #: per cell id, its stored campaigns and this one (htmlreport.Point lists) for the HTML report's trend plots
    trend: dict[str, list[Any]] | None = None


@keeps_what_it_makes
def collect(collections: Sequence[Collection], jobs: int | None = None, name: str | None = None,
            cache: parsecache.Caches | None = None) -> Result:
    """Parse every run of ``collections`` (with ``cache``: only the logs it does not hold as they are now, adding
    them to it) and compute the cells."""
    t0 = time.perf_counter()
    specs = [s for c in collections for s in c.runs]
    fresh: dict[str, parsecache.Entry | None] = {}
    rows, workers = parse_all(specs, jobs, known=cache.known() if cache is not None else None, fresh=fresh)
    if cache is not None:
        cache.save(fresh)
    repeats: dict[Any, int] = {}
    for c in collections:
        if c.repeats:
            for s in c.runs:
                repeats[(s.campaign, s.cell.id)] = int(c.repeats)
    cells = cells_of(rows, repeats=repeats)
    _mark_searched(collections, cells)
    total = sum(r.log_bytes or 0 for r in rows)
    return Result(name=name or "+".join(c.name for c in collections), collections=list(collections), runs=rows,
                  cells=cells, seconds=time.perf_counter() - t0, bytes=total,
                  reread=len(fresh) if cache is not None else None, workers=workers)


def _mark_searched(collections: Sequence[Collection], cells: Sequence[CellRow]) -> None:
    """Cells a ``search`` found (the largest value that fits) say so."""
    found = {(c.name, cid): text for c in collections if c.source == "manifest"
             for cid, text in read_results(c.where).items()}
    for cell in cells:
        cell.searched = found.get((cell.campaign, cell.cell_id), "")


def keep_verdicts(campaign_dir: str | os.PathLike, rows: Sequence[RunRow]) -> int:
    """Record in the manifest the log verdicts this collect read for ended runs it had none for, with the
    status decided with them, so ``status`` and ``submit --retry-failed`` see what ``collect`` saw."""
    m = manifest.Manifest(campaign_dir)
    try:
        known = {r.key: r for r in m.runs(verdict_missing=True)}
        updates = [records.Decision(key=r.run, status=r.status, reason=r.reason or "", exit_code=r.exit_code,
                                     log_status=str((r.extra or {}).get("log_status") or ""),
                                     log_id=disk.log_identity(r.log))
                   for r in rows if r.run in known and known[r.run].status in FINAL and r.status in FINAL]
        if updates:  # the exit code too: the next collect, which takes the recorded decision, shows the same row
            m.set_verdicts(updates)
        return len(updates)
    finally:
        m.close()
