"""``search``: the largest value of one axis per cell (the search itself is :mod:`dlperf_slurm.matrix.search`), then
that value with the matrix's normal repeats."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dlperf_slurm.commands.common import load_matrix, note_dropped
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix.search import RESULT, SUFFIX, Search, found_cells, run_search
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.status import Status
from dlperf_slurm.termtext import TERMINAL_WIDTH, fit_table
from dlperf_slurm.words import plural


def fit_line(line: str, wide: bool = False) -> str:
    """A progress line cut to 100 columns (ending in "…") unless ``wide``."""
    return line if wide or len(line) <= TERMINAL_WIDTH else line[:TERMINAL_WIDTH - 1] + "…"


def results_table(found: list[Search], wide: bool = False) -> str:
    """One row per searched cell: its result, the probes it took and each probe's value and status; fitting 100
    columns unless ``wide`` (the probes' list, then the result, cut)."""
    rows = [[s.key, s.result, str(len(s.probes)), ", ".join(f"{v} {st}" for v, st in s.probes.items())]
            for s in found]
    return fit_table(["cell", "result", "probes", "values probed"], rows, wide=wide, cut=("values", "result"))[0]


def cmd_search(args) -> int:
    """``python -m dlperf_slurm search MATRIX --axis batch_size ...``"""
    from dlperf_slurm import schedulers
    from dlperf_slurm.campaign import monitor
    from dlperf_slurm.campaign.manifest import Manifest
    from dlperf_slurm.submit.journal import submit

    m = load_matrix(args)
    note_dropped(m, args.matrix)
    cdir = (Path(args.logs) / m.name).resolve()
    pdir = Path(str(cdir) + SUFFIX)
    try:
        warm, meas = (int(x) for x in args.probe_steps.split(","))
    except ValueError:
        raise UserError(f"--probe-steps {args.probe_steps!r}: expected WARMUP,MEASURE such as 2,3") from None
    backend = schedulers.choose(args.executor, pdir, jobs=args.jobs)
    if args.executor == "auto" and backend.name == "local":  # nothing runs here by surprise (as submit)
        from dlperf_slurm.submit.guard import local_refusal

        if why := local_refusal(m):
            raise UserError(why)

    def probe(cells: list[Cell], measure: Measure) -> dict[str, str]:
        pm = dataclasses.replace(m, name=m.name + SUFFIX, cells=cells, dropped=[], measure=measure)
        submit(pm, pdir, backend, template_dir=args.templates, out=lambda s: None)
        man = Manifest(pdir)
        try:
            monitor.wait(man, schedulers.for_campaign(pdir, monitor.used_schedulers(man), default=backend),
                         out=lambda s: None)
            st = {r.key: r.status for r in man.runs()}
        finally:
            man.close()
        return {c.id: Status(st.get(f"{c.id}.r0", Status.UNSUBMITTED)) for c in cells}

    found = run_search(m, args.axis, pdir, probe, args.start, args.limit, args.step, (warm, meas),
                       out=lambda line: print(fit_line(line, args.wide)))
    print(results_table(found, args.wide))
    print(f"written: {pdir / RESULT}")
    cells = found_cells(m, args.axis, found)
    if args.no_run or not cells:
        return 0 if all(s.ok is not None for s in found) else 1
    main = dataclasses.replace(m, cells=cells, dropped=[])
    if (cdir / "manifest.sqlite").exists():  # one campaign, one matrix (as submit): the found cells are this one's
        from dlperf_slurm.commands.submit import same_matrix

        site = False if args.no_site else args.site
        if why := same_matrix(main, cdir, site, Path(args.logs), offer=False):
            raise UserError(why + "give the matrix another name for the search's campaign (name = ...), or "
                            "--no-run to keep the probes alone")
    main_backend = schedulers.choose(args.executor, cdir, jobs=args.jobs)
    report = submit(main, cdir, main_backend, template_dir=args.templates)
    print(f"submitted {plural(report.submitted, 'run')} of the {plural(len(cells), 'cell')} at their largest value "
          f"({plural(m.measure.repeats, 'repeat')} each) into {cdir}")
    if args.wait:
        man = Manifest(cdir)
        try:
            monitor.wait(man, schedulers.for_campaign(cdir, monitor.used_schedulers(man), default=main_backend))
        finally:
            man.close()
    return 0 if all(s.ok is not None for s in found) else 1
