"""``plan``: the cells of a matrix, the cells it dropped and the GPU-hours it asks for
(:func:`~dlperf_slurm.matrix.plan.plan_text`, fitting 100 columns and, past a screenful, summarised unless
``--wide``; ``--out FILE`` writes the whole plan there too); on a machine with a Slurm client, also the cells this
cluster could never start (their partition's size or MaxTime, the QOS's GPU limits:
:mod:`dlperf_slurm.schedulers.slurmlimits`)."""

from __future__ import annotations

import argparse
from typing import Any

from dlperf_slurm.commands.common import load_matrix
from dlperf_slurm.errors import UserError
from dlperf_slurm.words import plural


def cmd_plan(args: argparse.Namespace) -> int:
    from dlperf_slurm.matrix.plan import plan_text

    m = load_matrix(args)
    out = getattr(args, "out", None)
    print(plan_text(m, wide=args.wide))
    for line in cluster_lines(m, args.logs, wide=args.wide):
        print(line)
    if out:  # the whole plan, every cell and column: a file has no screen to fit
        from pathlib import Path

        from dlperf_slurm.disk import atomic_write

        try:
            atomic_write(Path(out), plan_text(m, wide=True) + "\n")
        except OSError as err:
            raise UserError(f"--out {out}: cannot write it ({err.strerror or err})") from err
        print(f"wrote the whole plan ({plural(len(m.cells), 'cell', grouped=True)}, every column) to {out}")
    return 0


#: cells named by plan's cluster lines (the rest counted) unless --wide
CLUSTER_CELLS_SHOWN = 10


def cluster_lines(m, logs: str, wide: bool = False) -> list[str]:
    """What the Slurm cluster on this machine's PATH says of the matrix: a line each for a partition or account the
    site leaves out that it needs (or the default partition the jobs go to), then one line a cell that can never
    start (the first :data:`CLUSTER_CELLS_SHOWN`), each fitting the terminal unless ``wide``; [] without a client,
    or when its controller does not answer."""
    import textwrap
    from pathlib import Path

    from dlperf_slurm.errors import ControllerUnreachable, UserError
    from dlperf_slurm.matrix import loader as matrix_mod
    from dlperf_slurm.schedulers.slurm import SlurmScheduler
    from dlperf_slurm.termtext import TERMINAL_WIDTH

    def fit(lines: list[str], indent: str = "  ") -> list[str]:
        return lines if wide else [w for line in lines
                                   for w in textwrap.wrap(line, TERMINAL_WIDTH, subsequent_indent=indent)]

    if not SlurmScheduler.available():
        return []
    cdir = Path(logs) / m.name
    backend = SlurmScheduler(cdir)
    try:
        backend.preflight(m)
    except ControllerUnreachable as err:
        return fit([f"cluster: {err}"])
    except UserError as err:  # e.g. no GPU GRES: what the site leaves out is said too
        return fit([f"cluster: {line}" for line in backend.site_lines(m)] + [f"cluster: {err}"])
    site = fit([f"cluster: {line}" for line in backend.site_lines(m)])
    first: dict[str, Any] = {}
    for run in matrix_mod.runs(m, cdir):
        first.setdefault(run.cell.id, run)
    said = [f"  {cell}: {why}" for cell, run in first.items() if (why := backend.skip_reason(m, run))]
    if not said:
        return site
    head = [f"cluster: {len(said)} of {plural(len(first), 'cell')} cannot start on this cluster (submit skips them):"]
    if wide:
        return site + head + said
    more = len(said) - CLUSTER_CELLS_SHOWN
    return site + head + fit(said[:CLUSTER_CELLS_SHOWN], "    ") + (
        [f"  ... and {more} more (--wide: every cell)"] if more > 0 else [])
