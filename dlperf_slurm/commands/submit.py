"""``submit``: submit a campaign (only what is missing), to Slurm or locally; ``--wait`` until it ends.

Before anything is written or started (:mod:`dlperf_slurm.submit.guard`, :mod:`dlperf_slurm.campaign.revisions`): the
campaign
name holds this matrix (else one line, offering a new name or ``--new-revision``), the folder can be written,
``--executor auto`` without sbatch runs here only what suits this machine, and a large submission has ``--yes``.

The work lives in the stage packages (submit/, campaign/, schedulers/; collect/ for ``--top-up``), imported
inside the handler, so ``--help`` imports none of them, nor submitit."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf_slurm.commands.common import make_folder, note_dropped, select_cells
from dlperf_slurm.errors import UserError
from dlperf_slurm.words import plural

if TYPE_CHECKING:
    from dlperf_slurm.collect.topup import TopUp


def cmd_submit(args: argparse.Namespace) -> int:

    from dlperf_slurm import schedulers
    from dlperf_slurm.campaign import monitor
    from dlperf_slurm.campaign.folders import MANIFEST
    from dlperf_slurm.submit import guard
    from dlperf_slurm.submit.journal import submit
    from dlperf_slurm.words import plural

    site: Any = False if args.no_site else args.site
    m, cdir = _campaign(args, site)
    asked = select_cells(m, args)  # -k: the cells to submit now; the campaign is the whole matrix
    cells = {c.id for c in asked.cells} if asked is not m else None
    backend = schedulers.choose(args.executor, cdir, jobs=args.jobs)
    if args.executor == "auto" and backend.name == "local" and (why := guard.local_refusal(asked)):
        raise UserError(why)
    if not args.dry_run and (why := guard.write_refusal(cdir)):
        raise UserError(why)
    if args.executor == "auto" and backend.auto_note() and not args.dry_run:
        print(f"dlperf-slurm: {backend.auto_note()}", file=sys.stderr)
    top = _top_up_asked(args)
    confirm = None
    if not args.dry_run:
        from dlperf_slurm.submit.render import check_template_dir

        check_template_dir(args.templates)  # before the campaign folder is made
        bounds = guard.limits(site)

        def confirm(todo) -> None:  # asks for --yes above the site's size; then the folder, nothing before
            guard.confirm_size(m, todo, bounds, args.yes)
            make_folder(cdir, m.provenance.umask)

    report = submit(m, cdir, backend, retry_failed=args.retry_failed, force=args.force, dry_run=args.dry_run,
                    template_dir=args.templates, top_up=None if top is None else functools.partial(_top_up, top=top),
                    confirm=confirm, cells=cells)
    if args.dry_run:
        return 0
    print(f"submitted {plural(report.submitted, 'run')} with {plural(report.calls, *backend.call_word)}; "
          f"manifest: {cdir / MANIFEST}")
    while args.wait and report.waiting:  # a submit limit left runs unsubmitted: the rest as room frees
        monitor.wait_for_room(lambda: backend.submit_room(m))
        report = submit(m, cdir, backend, retry_failed=args.retry_failed, template_dir=args.templates, cells=cells)
        print(f"submitted {report.submitted} more runs; {report.waiting} wait")
    return _wait(cdir, backend) if args.wait else 0


def _campaign(args: argparse.Namespace, site: Any) -> tuple[Any, Path]:
    """The matrix to submit and its campaign's folder: ``--campaign`` or ``--new-revision``'s name; a campaign
    that holds another matrix is refused (one campaign, one matrix)."""
    import re

    from dlperf_slurm.campaign.folders import MANIFEST
    from dlperf_slurm.matrix import loader as matrix_mod

    m = matrix_mod.load(args.matrix, site=site, system=args.system)
    note_dropped(m, args.matrix)
    if args.campaign:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", args.campaign):
            raise UserError(f"--campaign {args.campaign!r}: use letters, digits, '_', '.', '-'")
        m.name = args.campaign
    if args.new_revision:
        m.name = revision(Path(args.logs), m.name, m, site)
    cdir = (Path(args.logs) / m.name).resolve()
    if args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    if (cdir / MANIFEST).exists():
        why = same_matrix(m, cdir, site, Path(args.logs))
        if why:
            raise UserError(why)
    return m, cdir


def _top_up_asked(args: argparse.Namespace) -> TopUp | None:
    """``--top-up``'s bounds, checked (None without it)."""
    if not args.top_up:
        return None
    from dlperf_slurm.collect.topup import TopUp
    from dlperf_slurm.matrix.axes import MAX_REPEATS

    if not 0 < args.ci_target < 1 or not 2 <= args.max_repeats <= MAX_REPEATS:
        raise UserError(f"--ci-target must be between 0 and 1 and --max-repeats between 2 and "
                        f"{MAX_REPEATS:,} (a matrix's bound on repeats)")
    return TopUp(args.ci_target, args.max_repeats)


def _wait(cdir: Path, backend: Any) -> int:
    """``--wait``: until nothing is active; the status table; exit 1 when a run failed."""
    from dlperf_slurm import schedulers
    from dlperf_slurm.campaign import monitor
    from dlperf_slurm.campaign.manifest import Manifest
    from dlperf_slurm.model.status import FAILURES

    man = Manifest(cdir)
    try:
        final = monitor.wait(man, schedulers.for_campaign(cdir, monitor.used_schedulers(man), default=backend))
        print(monitor.status_report(man, show_runs=False, notes=backend.notes()))
    finally:
        man.close()
    return 0 if not sum(v for k, v in final.items() if k in FAILURES) else 1


def recorded(cdir: Path, site: Any) -> tuple[dict[str, Any] | None, str]:
    """The identity a campaign's manifest recorded (:func:`dlperf_slurm.campaign.revisions.identity`; a campaign from
    before that record: its copy of the matrix loaded again with ``site`` and the system it recorded; None when
    that copy is gone or loads no more) and the text of its copy of the matrix."""
    from dlperf_slurm.campaign import revisions
    from dlperf_slurm.campaign.manifest import MATRIX_COPY, Manifest
    from dlperf_slurm.matrix import loader as matrix_mod

    man = Manifest(cdir)
    try:
        ident, system = man.meta(revisions.META), man.meta("system")
    finally:
        man.close()
    try:
        text = (cdir / MATRIX_COPY).read_text()
    except OSError:
        text = ""
    if isinstance(ident, dict) or not text:
        return (ident if isinstance(ident, dict) else None), text
    try:
        return revisions.identity(matrix_mod.load(cdir / MATRIX_COPY, site=site, system=system)), text
    except (UserError, OSError, ValueError):
        return None, text


def same_matrix(m, cdir: Path, site: Any, logs: Path, offer: bool = True) -> str:
    """'' when the campaign at ``cdir`` was submitted with this matrix, else the one line that refuses it."""
    import re

    from dlperf_slurm.campaign import revisions

    old, text = recorded(cdir, site)
    if not offer:
        return revisions.refusal(m, cdir, old, text, "")
    nxt = revision(logs, re.sub(r"\.r\d+$", "", cdir.name), m, site)
    held = (logs / nxt / "manifest.sqlite").exists()
    return revisions.refusal(m, cdir, old, text, "submit under a new name (--campaign NAME) or as a new "
                                  f"revision of the campaign (--new-revision: {nxt}"
                                  + (", which holds this matrix)" if held else ")"))


def revision(logs: Path, name: str, m, site: Any) -> str:
    """``--new-revision``: the name to submit under: ``name`` while no campaign has it; the latest revision
    (``name``, ``name.r2``, ``name.r3``, ...) when it holds this matrix; else the next revision."""
    from dlperf_slurm.campaign.folders import MANIFEST

    def called(n: int) -> str:
        return name if n == 1 else f"{name}.r{n}"

    taken = [n for n in range(1, 1000) if (logs / called(n) / MANIFEST).exists()]
    if not taken:
        return name
    latest = (logs / called(taken[-1])).resolve()
    return latest.name if not same_matrix(m, latest, site, logs, offer=False) else called(taken[-1] + 1)


def _top_up(cdir: Path, now: dict[str, int], top: TopUp, out=print) -> dict[str, int]:
    """The cells of ``cdir`` to raise for ``--top-up`` and their new repeats (``now``: the repeats per cell today)."""
    from dlperf_slurm.campaign.folders import MANIFEST
    from dlperf_slurm.collect import topup

    if not (cdir / MANIFEST).exists():
        raise UserError(f"--top-up: {cdir} has no campaign yet; submit it first, top up once its runs have ended")
    todo = topup.plan(topup.campaign_cells(cdir), now, top)
    for cell_id, (n, why) in todo.items():
        out(f"top-up: {cell_id}: {now.get(cell_id, 0)} -> {plural(n, 'repeat')} ({why})")
    if not todo:
        out(f"top-up: every cell with an OK run has its median's 95% interval within {top.target:.1%} "
            f"(or {plural(top.cap, 'repeat')} already): nothing to add")
    return {cell_id: n for cell_id, (n, _why) in todo.items()}
