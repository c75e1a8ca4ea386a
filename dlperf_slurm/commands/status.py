"""``status``: per cell and per run, the campaign's statuses (asking its schedulers first, unless told not to):
every run when the report fits the terminal's height (24 lines when it is no terminal), else the cells (past a
screenful of them, those with a failure), the failed runs (the first 20) and one line saying ``--runs`` shows each
(:func:`dlperf_slurm.campaign.monitor.status_report`); exits 1 when every run failed or, with ``--fail-on``, a run
has one of its statuses.

A campaign this user can only read (a colleague's, a read-only mount) or whose disk is full is shown as its
manifest recorded it: the scheduler is not asked and nothing is written, which one line says."""

from __future__ import annotations

import argparse
import sys

from dlperf_slurm.commands.common import campaign_cells


def cmd_status(args: argparse.Namespace) -> int:
    """Exits 1 when every run of the campaign failed, or with ``--fail-on`` a run has one of its statuses
    (:mod:`dlperf_slurm.outcome.exitstatus`)."""
    import sqlite3

    from dlperf_slurm import disk, schedulers
    from dlperf_slurm.campaign import monitor
    from dlperf_slurm.campaign.folders import find_campaign, read_only_note
    from dlperf_slurm.campaign.manifest import Manifest
    from dlperf_slurm.outcome import exitstatus

    fail_on = exitstatus.parse_fail_on(getattr(args, "fail_on", None))
    cdir = find_campaign(args.logs, args.campaign)
    m = Manifest(cdir)  # read-only where this user cannot write it or its disk is full
    try:
        cells = campaign_cells(m, args)
        used = monitor.used_schedulers(m)
        exs = schedulers.for_campaign(cdir, used)
        if m.read_only and not args.no_refresh:
            print(read_only_note(cdir, m.read_only_why), file=sys.stderr)
        elif not args.no_refresh:
            try:
                monitor.refresh(m, exs)
            except sqlite3.OperationalError as err:  # the disk filled meanwhile: shown as recorded, said once
                if disk.damaged(err) or not any(w in str(err).lower() for w in ("full", "disk i/o")):
                    raise
                print(read_only_note(cdir, f"its disk is full ({err})"), file=sys.stderr)
        notes = []
        for name in sorted(used):
            notes += exs[name].notes() if name in exs else [
                f"{name}: no client on this machine; statuses from the manifest and exit markers"]
        runs = True if getattr(args, "runs", False) else False if args.cells else None  # None: when they fit
        print(monitor.status_report(m, show_runs=runs, notes=notes, wide=args.wide, only=cells))
        statuses = [status for cell, status in m.statuses() if cells is None or cell in cells]
    finally:
        m.close()
    return exitstatus.exit_status("status", statuses, fail_on)
