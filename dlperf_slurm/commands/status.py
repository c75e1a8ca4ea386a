"""``status``: per cell and per run, the campaign's statuses (asking its schedulers first, unless told not to);
exits 1 when every run failed or, with ``--fail-on``, a run has one of its statuses."""

from __future__ import annotations

import argparse


def cmd_status(args: argparse.Namespace) -> int:
    """Exits 1 when every run of the campaign failed, or with ``--fail-on`` a run has one of its statuses
    (:mod:`dlperf_slurm.runsgate`)."""
    from dlperf_slurm import monitor, runsgate, schedulers
    from dlperf_slurm.manifest import Manifest, find_campaign

    fail_on = runsgate.parse_fail_on(getattr(args, "fail_on", None))
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
        statuses = [r.status for r in m.runs()]
    finally:
        m.close()
    return runsgate.exit_status("status", statuses, fail_on)
