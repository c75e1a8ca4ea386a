"""``doctor``: rebuild a damaged or deleted manifest from the campaign's files and the scheduler."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal


def _active_jobs(prefix: str) -> list[str]:
    """squeue's queued or running jobs whose name starts with ``prefix`` ([] without Slurm)."""
    import shutil
    import subprocess

    if not shutil.which("squeue"):
        return []
    try:
        p = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [i for i, _, name in (line.partition(" ") for line in p.stdout.splitlines()) if name.startswith(prefix)]


def cmd_doctor(args: argparse.Namespace) -> int:
    from dlperf_slurm.campaign import doctor
    from dlperf_slurm.errors import UserError
    from dlperf_slurm.matrix import loader as matrix_mod

    cdir = Path(args.campaign) if Path(args.campaign).is_dir() and "/" in args.campaign else \
        Path(args.logs) / args.campaign
    if not cdir.is_dir():
        raise UserError(f"{cdir}: no such campaign folder")
    site: str | None | Literal[False] = False if args.no_site else args.site
    return doctor.rebuild(cdir.resolve(), lambda p: matrix_mod.load(p, site=site), _active_jobs)
