"""``plan``: the cells of a matrix, the cells it dropped and the GPU-hours it asks for (:func:`tables.plan_text`,
fitting 100 columns unless ``--wide``)."""

from __future__ import annotations

import argparse

from dlperf_slurm.commands.common import load_matrix


def cmd_plan(args: argparse.Namespace) -> int:
    from dlperf_slurm.tables import plan_text

    print(plan_text(load_matrix(args), wide=args.wide))
    return 0
