"""``cancel``: cancel a campaign's queued and running runs."""

from __future__ import annotations

import argparse

from dlperf_slurm.errors import UserError


def cmd_cancel(args: argparse.Namespace) -> int:
    from dlperf_slurm.campaign import monitor
    from dlperf_slurm.campaign.folders import campaigns, find_campaign

    if not args.campaign:  # cancelling is not undone: "the latest campaign" must be the only one
        names = [c.name for c in campaigns(args.logs)]
        if len(names) > 1:
            raise UserError(f"cancel which campaign? {args.logs}/ holds {len(names)}: {', '.join(names)}; "
                            "name one (dlperf-slurm cancel NAME)")
    monitor.cancel(find_campaign(args.logs, args.campaign), pending_only=args.pending)
    return 0
