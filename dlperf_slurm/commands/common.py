"""What the command handlers share: the folders a command uses (:func:`settle`), loading the matrix a command names
with its cell selection, the note on dropped cells, the campaign folder. Only :mod:`dlperf_slurm.commands` and the
parser's handler runner import this module."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from dlperf_slurm.errors import UserError
from dlperf_slurm.words import plural


#: the commands whose ``--out`` is the summaries' folder
SUMMARY_COMMANDS = ("collect", "compare")


def settle(args: argparse.Namespace) -> None:
    """``args.logs`` (and ``args.out`` of :data:`SUMMARY_COMMANDS`) as every command uses them, decided once by
    :func:`dlperf_slurm.matrix.sitefile.root`: the option, the environment, the site files' ``[paths]``, the
    working folder. The site files are read only when neither an option nor the environment decides."""
    from dlperf_slurm.matrix.sitefile import ROOT_ENV, Site, read_site, root

    if getattr(args, "command", "") == "site":  # site show / site init read (or write) the site files themselves
        return
    site: Site | None = None
    for kind, attr in (("logs", "logs"), ("summaries", "out")):
        if not hasattr(args, attr) or (kind == "summaries" and getattr(args, "command", "") not in SUMMARY_COMMANDS):
            continue
        given = getattr(args, attr)
        if site is None and not given and not os.environ.get(ROOT_ENV[kind]):
            site = read_site(False if getattr(args, "no_site", False) else getattr(args, "site", None))
        path, why = root(kind, given, site or Site())
        setattr(args, attr, str(path))
        args.decided = {**getattr(args, "decided", {}), kind: why}


def site_arg(args: argparse.Namespace):
    """The site files as the loaders take them: False for ``--no-site``, else ``--site`` (None: the default)."""
    return False if args.no_site else args.site


def load_matrix(args: argparse.Namespace):
    """The matrix the command names, its cells (and dropped cells) cut to ``-k`` / ``--exclude-cells``."""
    from dlperf_slurm.matrix import loader

    m = loader.load(args.matrix, site=site_arg(args), system=args.system)
    return select_cells(m, args)


def select_cells(m, args: argparse.Namespace):
    """The matrix with only the cells the command line selects (the same matrix when it selects none); one line
    on stderr says how many."""
    from dlperf_slurm.matrix.select import View, from_args

    chosen = from_args(args)
    if not chosen:
        return m
    every = [*m.cells, *(d.cell for d in m.dropped)]
    keep = {c.id for c in chosen.choose(every, View.of_cell,
                                        f"of {args.matrix}")}
    cells = [c for c in m.cells if c.id in keep]
    if not cells:
        raise UserError(f"{chosen.describe()}: selects only cells the matrix drops ({m.dropped[0].reason}; "
                        f"`dlperf-slurm plan {args.matrix}` lists them)")
    return dataclasses.replace(m, cells=cells, dropped=[d for d in m.dropped if d.cell.id in keep])


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


def campaign_cells(man, args: argparse.Namespace) -> set[str] | None:
    """The ids of the campaign's cells the command line selects (``-k``, ``--exclude-cells``); None for all."""
    from dlperf_slurm.matrix.select import View, from_args

    chosen = from_args(args)
    if not chosen:
        return None
    name = man.meta("name") or man.dir.name
    keep = chosen.choose(list(man.cells().values()), View.of_cell,
                         f"of campaign {name}")
    return {c.id for c in keep}
