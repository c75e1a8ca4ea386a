"""``status``: per cell and per run, the campaign's statuses (asking its schedulers first, unless told not to)."""

from __future__ import annotations

import argparse


def cmd_status(args: argparse.Namespace) -> int:
    from dlperf_slurm import monitor, schedulers
    from dlperf_slurm.manifest import Manifest, find_campaign

    cdir = find_campaign(args.logs, args.campaign)
    m = Manifest(cdir)
    try:
        used = monitor.used_schedulers(m)
        exs = schedulers.for_campaign(cdir, used)
        if not args.no_refresh:
            monitor.refresh(m, exs)
        notes = []
        for name in sorted(used):
            notes += exs[name].notes() if name in exs else [
                f"{name}: no client on this machine; statuses from the manifest and exit markers"]
        print(monitor.status_report(m, show_runs=not args.cells, notes=notes, wide=args.wide))
    finally:
        m.close()
    return 0
