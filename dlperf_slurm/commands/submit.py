"""``submit``: submit a campaign (only what is missing), to Slurm or locally; ``--wait`` until it ends.

The work lives in the stage modules (submit.py, monitor.py, tracking.py, manifest.py, schedulers/), imported
inside the handler, so ``--help`` imports none of them, nor submitit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlperf_slurm.commands.common import make_folder, note_dropped
from dlperf_slurm.errors import UserError


def cmd_submit(args: argparse.Namespace) -> int:
    import re

    from dlperf_slurm import matrix as matrix_mod
    from dlperf_slurm import monitor, schedulers
    from dlperf_slurm.manifest import MANIFEST, Manifest
    from dlperf_slurm.model import FAILURES
    from dlperf_slurm.submit import plural, submit

    m = matrix_mod.load(args.matrix, site=False if args.no_site else args.site, system=args.system)
    note_dropped(m, args.matrix)
    if args.campaign:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", args.campaign):
            raise UserError(f"--campaign {args.campaign!r}: use letters, digits, '_', '.', '-'")
        m.name = args.campaign
    cdir = (Path(args.logs) / m.name).resolve()
    if args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    backend = schedulers.choose(args.executor, cdir, jobs=args.jobs)
    if args.executor == "auto" and backend.auto_note() and not args.dry_run:
        print(f"dlperf-slurm: {backend.auto_note()}", file=sys.stderr)
    top = None
    if args.top_up:
        from dlperf_slurm.topup import TopUp

        from dlperf_slurm.axes import MAX_REPEATS

        if not 0 < args.ci_target < 1 or not 2 <= args.max_repeats <= MAX_REPEATS:
            raise UserError(f"--ci-target must be between 0 and 1 and --max-repeats between 2 and "
                            f"{MAX_REPEATS:,} (a matrix's bound on repeats)")
        top = TopUp(args.ci_target, args.max_repeats)
    if not args.dry_run:
        from dlperf_slurm.render import check_template_dir

        check_template_dir(args.templates)  # before the campaign folder is made
        make_folder(cdir, m.provenance.umask)
    report = submit(m, cdir, backend, retry_failed=args.retry_failed, force=args.force, dry_run=args.dry_run,
                    template_dir=args.templates, top_up=top)
    if args.dry_run:
        return 0
    print(f"submitted {report.submitted} runs with {plural(report.calls, backend.call_word)}; "
          f"manifest: {cdir / MANIFEST}")
    while args.wait and report.waiting:  # a submit limit left runs unsubmitted: the rest as room frees
        monitor.wait_for_room(lambda: backend.submit_room(m))
        report = submit(m, cdir, backend, retry_failed=args.retry_failed, template_dir=args.templates)
        print(f"submitted {report.submitted} more runs; {report.waiting} wait")
    if not args.wait:
        return 0
    man = Manifest(cdir)
    try:
        final = monitor.wait(man, schedulers.for_campaign(cdir, monitor.used_schedulers(man), default=backend))
        print(monitor.status_report(man, show_runs=False, notes=backend.notes()))
    finally:
        man.close()
    return 0 if not sum(v for k, v in final.items() if k in FAILURES) else 1
