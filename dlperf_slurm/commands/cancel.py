"""``cancel``: cancel a campaign's queued and running runs."""

from __future__ import annotations

import argparse

from dlperf_slurm.errors import UserError


def cmd_cancel(args: argparse.Namespace) -> int:
    from dlperf_slurm.campaign import monitor
    from dlperf_slurm.campaign.folders import campaigns, find_campaign
    from dlperf_slurm.campaign.manifest import Manifest
    from dlperf_slurm.commands.common import campaign_cells

    if not args.campaign:  # cancelling is not undone: "the latest campaign" must be the only one
        names = [c.name for c in campaigns(args.logs)]
        if len(names) > 1:
            raise UserError(f"cancel which campaign? {args.logs}/ holds {len(names)}: {', '.join(names)}; "
                            "name one (dlperf-slurm cancel NAME)")
    cdir = find_campaign(args.logs, args.campaign)
    man = Manifest(cdir)
    try:
        cells = campaign_cells(man, args)
    finally:
        man.close()
    monitor.cancel(cdir, pending_only=args.pending, cells=cells)
    return 0
