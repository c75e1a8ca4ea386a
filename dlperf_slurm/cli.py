"""Command line: ``python -m dlperf_slurm {plan,render,submit,status,cancel,collect}``.

Each subcommand's work lives in its stage module, imported only when that subcommand runs, so
``--help`` and ``plan`` never import pandas or torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

from dlperf_slurm import __version__
from dlperf_slurm.errors import UserError

DEFAULT_LOGS = "logs"


def _add_matrix_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("matrix", help="benchmark matrix (TOML), e.g. matrices/bert.toml")
    p.add_argument("--site", metavar="FILE", help="site defaults for [slurm]/[environment] "
                   "(default: $DLPERF_SLURM_SITE or ~/.config/dlperf_slurm/site.toml)")
    p.add_argument("--no-site", action="store_true", help="ignore any site file")


def _load_matrix(args: argparse.Namespace):
    from dlperf_slurm import matrix

    return matrix.load(args.matrix, site=False if args.no_site else args.site)


# ------------------------------------------------------------------------------------------------ plan


def cmd_plan(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    m = _load_matrix(args)
    rows = [[c.id, c.shape, c.batch_size, c.global_batch, c.precision, int(c.xla), c.launcher,
             ", ".join(f"{k}={v}" for k, v in (*c.params, *c.env)) or "-", m.measure.repeats] for c in m.cells]
    print(f"campaign {m.name}: suite {m.suite.name} ({m.suite.description})")
    print(tabulate(rows, headers=["cell", "shape", "batch/dev", "global", "precision", "xla", "launcher", "variant",
                                  "repeats"], tablefmt="github"))
    print(f"\n{len(m.cells)} cells x {m.measure.repeats} repeats = {m.runs} runs; "
          f"window: skip {m.measure.warmup_steps} steps, measure {m.measure.measure_steps}")
    print(f"asks for {m.gpu_hours:.1f} GPU-hours at most (time limit {m.slurm.time} per run)")
    if m.dropped:
        print(f"\ndropped {len(m.dropped)} cells:")
        for d in m.dropped:
            print(f"  {d.cell.id}: {d.reason}")
    return 0


# ---------------------------------------------------------------------------------------------- render


def cmd_render(args: argparse.Namespace) -> int:
    from dlperf_slurm import matrix, render

    m = _load_matrix(args)
    out = Path(args.out) if args.out else Path(args.logs) / m.name
    paths = render.write_scripts(m, matrix.runs(m, out), args.templates)
    print(f"wrote {len(paths)} scripts under {out}/ ({len(m.cells)} cells x {m.measure.repeats} repeats)")
    return 0


# -------------------------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlperf-slurm",
        description="DLPerf-style deep-learning training benchmarks on Slurm: plan, render, submit, collect.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--logs", default=DEFAULT_LOGS, metavar="DIR", help="root of campaign folders (default: logs)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("plan", help="show the cells of a matrix, dropped cells and the GPU-hours asked")
    _add_matrix_args(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("render", help="write every run's sbatch script without submitting")
    _add_matrix_args(p)
    p.add_argument("--out", metavar="DIR", help="campaign folder to write into (default: LOGS/<campaign>)")
    p.add_argument("--templates", metavar="DIR", help="your template folder: overrides built-in templates by name")
    p.set_defaults(func=cmd_render)

    for register in _EXTRA_COMMANDS:
        register(sub)
    return parser


# Stage modules add their subcommands here: a function (subparsers) -> None per stage.
_EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


# ---------------------------------------------------------------- submit / status / cancel (issue 4)
# The job life cycle lives in dlperf_slurm/campaign.py (manifest), executors.py (submitit, local runner)
# and scheduler.py (squeue/sacct/scancel); submitit is imported only when a Slurm submission happens.
def _lifecycle_commands(sub: argparse._SubParsersAction) -> None:
    from dlperf_slurm.campaign import add_commands

    add_commands(sub)


_EXTRA_COMMANDS.append(_lifecycle_commands)
# ---------------------------------------------------------------- end of submit / status / cancel


# ---------------------------------------------------------------- collect (issue 5)
# Parsing, statistics and summaries live in dlperf_slurm/collect.py (runs -> rows -> cells), logparse.py and
# each suite's parse(), stats.py and report.py; pandas/tabulate/matplotlib are imported only when collect runs.
def _collect_commands(sub: argparse._SubParsersAction) -> None:
    from dlperf_slurm.collect import add_commands

    add_commands(sub)


_EXTRA_COMMANDS.append(_collect_commands)
# ---------------------------------------------------------------- end of collect


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"dlperf-slurm: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dlperf-slurm: interrupted", file=sys.stderr)
        return 130
