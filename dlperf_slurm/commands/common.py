"""What the command handlers share: loading the matrix a command names, the note on dropped cells, the campaign
folder. Only :mod:`dlperf_slurm.commands` imports this module."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlperf_slurm.errors import UserError
from dlperf_slurm.words import plural


def load_matrix(args: argparse.Namespace):
    from dlperf_slurm.matrix import loader

    return loader.load(args.matrix, site=False if args.no_site else args.site, system=args.system)


def note_dropped(m, matrix_arg: str) -> None:
    """The cells the matrix dropped (a value its suite cannot run): ``plan`` lists them; ``render`` and ``submit``
    make the others, so one line on stderr says how many and why, and changes nothing they do. A matrix key that
    the named system sets too (the matrix's wins) is said first, one line each."""
    for line in m.overridden:
        print(f"dlperf-slurm: {line}", file=sys.stderr)
    if not m.dropped:
        return
    reasons = list(dict.fromkeys(d.reason for d in m.dropped))
    why = reasons[0] if len(reasons) == 1 else f"{reasons[0]}; {plural(len(reasons) - 1, 'more reason')}"
    print(f"dlperf-slurm: {len(m.dropped)} of {plural(len(m.cells) + len(m.dropped), 'cell')} dropped ({why}): "
          f"`dlperf-slurm plan {matrix_arg}` lists them", file=sys.stderr)


def make_folder(path: Path, umask: str | None = None) -> None:
    """The campaign folder (``--out``, ``--logs``), made under the site's umask (``[provenance] umask``), or one
    line saying why it cannot be made."""
    from dlperf_slurm.disk import no_more_open_than

    try:
        with no_more_open_than([path], umask):
            pass
    except OSError as err:
        raise UserError(f"{path}: cannot create the campaign folder: {err.strerror or err}") from None
