"""``submit``: what to submit, grouped, through a journal that makes every step recoverable.

Submitting never duplicates a run. For every group the journal (1) records the runs as SUBMITTING under the
group's token (carried in its job name), (2) moves an earlier attempt's log and marker aside (never deleted),
(3) writes the scripts, each with its scheduler's preamble, (4) submits, (5) records the job ids. The next
``submit`` (or ``status``) reconciles whatever an interruption left between those steps
(:func:`dlperf_slurm.campaign.tracking.reconcile`) before it submits anything.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Sequence

from dlperf_slurm import disk
from dlperf_slurm.campaign.folders import MANIFEST, campaign_lock
from dlperf_slurm.campaign.manifest import Manifest
from dlperf_slurm.campaign.tracking import reconcile, record_ids, refresh, used_schedulers
from dlperf_slurm.disk import atomic_write, no_more_open_than
from dlperf_slurm.errors import ControllerUnreachable, SchedulerError, SubmitAborted, UserError
from dlperf_slurm.matrix import loader as matrix_mod
from dlperf_slurm.model.cell import Matrix, Run
from dlperf_slurm.model.status import FAILURES, Status
from dlperf_slurm.schedulers import for_campaign
from dlperf_slurm.schedulers.base import Group, Scheduler, array_spec, new_token
from dlperf_slurm.submit.render import Renderer, check_template_dir, run_resources
from dlperf_slurm.words import plural

#: what ``--retry-failed`` resubmits: every final failure, the log's verdicts (NONFINITE, INCOMPLETE, ...) included,
#: but UNRECOGNISED (the program finished; its log is read with another suite, or by a parser that knows its format)
#: and NOT_CONVERGED (an accuracy run that trained to its end is a result; it stays out of the medians)
RETRYABLE = frozenset(FAILURES) - {Status.UNRECOGNISED, Status.NOT_CONVERGED}


@dataclass
class SubmitReport:
    submitted: int = 0
    groups: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    kept: dict[str, int] = field(default_factory=dict)  # why runs were not submitted: status -> count
    calls: int = 0
    waiting: int = 0  # runs left unsubmitted for now: the scheduler's submit limit (``limit`` says which)
    limit: str = ""


# ================================================================================================ planning


def plan(matrix: Matrix, runs: Sequence[Run], backend: Scheduler, excludes: dict[str, tuple[str, ...]] | None = None
         ) -> tuple[list[Group], list[tuple[Run, str]]]:
    """Runs -> groups (same resources, chunked to the backend's largest group) and the runs it must skip.
    ``excludes``: run key -> the nodes it must not run on (see :func:`blamed_nodes`).

    Within a group the order is repeat-major (r0 of every cell, then r1, ...) so a throttled array spreads any
    drift of the machine over all cells instead of running one cell's repeats back to back."""
    skipped = [(r, why) for r in runs if (why := backend.skip_reason(matrix, r))]
    skip_keys = {r.key for r, _ in skipped}
    excl = excludes or {}
    by_resources: dict[tuple, list[Run]] = {}
    for r in runs:
        if r.key not in skip_keys:
            by_resources.setdefault(run_resources(matrix, r, exclude=excl.get(r.key, ())).key(), []).append(r)
    groups = []
    limit = max(1, backend.max_group_size())
    order = {cell: i for i, cell in enumerate(matrix.cells)}
    for members in by_resources.values():
        members.sort(key=lambda r: (r.repeat, order[r.cell]))
        for i in range(0, len(members), limit):
            chunk = members[i:i + limit]
            token = new_token()
            name = backend.group_name(matrix.name, token)
            n = len(chunk)
            throttle = matrix.slurm.array_throttle
            array = array_spec(n, throttle)
            res = run_resources(matrix, chunk[0], job_name=name, output=backend.output_pattern(token, n), array=array,
                                exclude=excl.get(chunk[0].key, ()))
            groups.append(Group(token=token, name=name, runs=chunk, resources=res, throttle=throttle,
                                outputs=[backend.output_path(token, j, n) for j in range(n)]))
    return groups, skipped


def to_submit(runs: Sequence[Run], statuses: dict[str, str], retry_failed: bool, force: bool,
              report: SubmitReport) -> list[Run]:
    """The runs to submit: never submitted, failed (with ``retry_failed``), or finished (with ``force``); the
    others are counted in ``report.kept`` by status. Pending, running and SUBMITTING runs are never chosen."""
    todo = []
    for r in runs:
        st = statuses.get(r.key, Status.UNSUBMITTED)
        if st == Status.UNSUBMITTED or (st in RETRYABLE and (retry_failed or force)) or (
                st in (Status.OK, Status.UNRECOGNISED) and force):
            todo.append(r)
        else:
            report.kept[st] = report.kept.get(st, 0) + 1
    return todo


def blamed_nodes(runs: Sequence[Run], statuses: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """For each UNHEALTHY run: the nodes its last attempt's health gate blamed (its exit marker), which its retry
    excludes (``--exclude``)."""
    from dlperf_slurm.outcome import evidence
    from dlperf_slurm.probes import health

    out = {}
    for r in runs:
        if statuses.get(r.key) == Status.UNHEALTHY:
            verdict = (evidence.read_marker(r.marker) or {}).get("health") or {}
            nodes = health.safe_nodes(verdict.get("blamed") or ()) if isinstance(verdict, dict) else []
            if nodes:
                out[r.key] = tuple(nodes)
    return out


# ================================================================================================ the journal


class Journal:
    """Records each submission around the backend's submit (the order in the module docstring)."""

    def __init__(self, m: Manifest, matrix: Matrix, backend: Scheduler, template_dir: str | None, out):
        self.m, self.matrix, self.backend, self.out = m, matrix, backend, out
        self.renderer = Renderer(matrix, template_dir)
        self.submitted: list[tuple[Group, list[str]]] = []

    def before(self, group: Group) -> None:
        now = time.time()
        keys = [r.key for r in group.runs]
        rows = {r.key: r for r in self.m.runs(keys=keys)}
        moves: list[tuple[Path, Path]] = []
        recorded = []
        for run, out in zip(group.runs, group.outputs):
            moved: dict[str, str] = {}
            for kind, path in (("log", run.log), ("marker", run.marker)):
                if path.exists():
                    target = aside(path, rows[run.key].attempt)
                    moved[kind] = self.m.rel(target)
                    moves.append((path, target))
            recorded.append((run.key, out, moved))
        self.m.record_submission(token=group.token, name=group.name, executor=self.backend.name,
                                 options=self.backend.describe(group), held=self.backend.holds(group.resources),
                                 runs=recorded, now=now,
                                 window=(self.matrix.measure.warmup_steps, self.matrix.measure.measure_steps))
        # evidence first (moved aside, never deleted), then the scripts: only then may a job start
        for src, dst in moves:
            os.replace(src, dst)
        for folder in sorted({r.campaign_dir for r in group.runs}):
            self.renderer.install(folder)  # the job code the scripts name, before any of them
        preamble = self.backend.preamble(dataclasses.replace(group.resources, array=""))  # the group's, once
        for run, out in zip(group.runs, group.outputs):
            text = self.renderer.render(run, preamble)
            if run.script.exists() and run.script.read_text() != text:  # a changed script: keep the old one too
                os.replace(run.script, aside(run.script, rows[run.key].attempt))
            atomic_write(run.script, text, executable=True)
            disk.reserve_room(run.marker, out)  # should the disk be full when it starts, it can say so

    def after(self, group: Group, job_ids: list[str]) -> None:
        record_ids(self.m, self.backend, group.token, [r.key for r in group.runs], job_ids)
        self.submitted.append((group, job_ids))
        self.out(f"  submitted {plural(group.size, 'run')} as {self.backend.group_label(job_ids)} "
                 f"({self.backend.describe(group)})")
        self._release(group, job_ids)

    def _release(self, group: Group, job_ids: list[str]) -> None:
        """Release the hold the backend submitted the group with, and record that it was released."""
        if group.token not in self.m.held_tokens():
            return
        try:
            self.backend.release(job_ids[:1])
        except SchedulerError as err:  # recorded as not released: the next status/submit releases it
            print(f"dlperf-slurm: warning: {err}; the group stays held until the next `status` or `submit` "
                  "releases it", flush=True)
            return
        self.m.mark_released([group.token])

    def failed(self, group: Group, error: Exception) -> tuple[int, int]:
        """Record a submission that raised: ``(runs the scheduler has after all, runs it may have)``; the others
        are UNSUBMITTED with the cause."""
        now = time.time()
        keys = [r.key for r in group.runs]
        # an error after the scheduler accepted the group (e.g. while submitit moved its pickles) loses no job
        try:  # a job submitted a moment ago is in the queue (pending, held): an empty answer means none
            found = self.backend.find(group.name, group.token, now - 60) or {}
        except Exception:  # noqa: BLE001 - the scheduler cannot be asked: the next submit reconciles
            return 0, group.size  # left SUBMITTING: the next submit asks before sending any of them again
        if found:
            found = self.backend.adopt(found, group.token, {i: r.script for i, r in enumerate(group.runs)}) or {}
        if found:
            have = [(keys[i], j) for i, j in sorted(found.items()) if i < len(keys)]
            record_ids(self.m, self.backend, group.token, [k for k, _ in have], [j for _, j in have])
            self.submitted.append((group, [j for _, j in have]))
            return len(have), 0
        self.m.refuse_submission(group.token, keys, str(error), now)
        return 0, 0


def aside(path: Path, attempt: int) -> Path:
    """``x.log`` -> ``x.log.<attempt>`` (or the next free number): old evidence is kept, never deleted."""
    n = max(1, attempt)
    while True:
        target = path.with_name(f"{path.name}.{n}")
        if not target.exists():
            return target
        n += 1


# ================================================================================================ submit


def submit(matrix: Matrix, campaign_dir: str | os.PathLike, backend: Scheduler, *, retry_failed: bool = False,
           force: bool = False, dry_run: bool = False, template_dir: str | None = None,
           top_up: Callable[[Path, dict[str, int]], dict[str, int]] | None = None,
           confirm: Callable[[list[Run]], None] | None = None, cells: Collection[str] | None = None,
           out=print) -> SubmitReport:
    """Submit what is missing (and failed runs with ``retry_failed``, everything finished with ``force``; with
    ``top_up``, more repeats of the cells whose median is not yet tight enough: called with the campaign's folder
    and its repeats per cell, it answers the cells to raise and their new repeats; ``commands/submit`` plans them
    with :mod:`dlperf_slurm.collect.topup`, so submitting never reads back what ran).
    ``confirm``: called, before anything is written, with the runs that would be submitted (as the manifest holds
    them now); it refuses by raising. ``cells``: only these cells' runs (``-k``); the manifest records the whole
    matrix, and the other cells' runs once a submit asks for them.

    Never submits a run that is SUBMITTING, PENDING, RUNNING or OK (unless forced)."""
    cdir = Path(campaign_dir).resolve()
    check_template_dir(template_dir)  # before anything is written, and for --dry-run too
    more = _recorded_repeats(cdir)
    if top_up is not None:  # it collects the campaign (its parse cache): under the campaign's umask too
        with no_more_open_than([cdir] if cdir.is_dir() else [], matrix.provenance.umask):
            more.update(top_up(cdir, more))
    runs = matrix_mod.runs(matrix, cdir, more)  # distinct keys and files: matrix.load refuses cells that share them
    if cells is not None:
        runs = [r for r in runs if r.cell.id in cells]
    if confirm is not None:
        confirm(to_submit(runs, _recorded_statuses(cdir), retry_failed, force, SubmitReport()))
    if not dry_run:  # every file of the campaign: the site's umask, and never more open than its folder
        with no_more_open_than([cdir], matrix.provenance.umask):
            return _submit(matrix, cdir, backend, runs, retry_failed=retry_failed, force=force,
                           template_dir=template_dir, out=out)
    return _submit(matrix, cdir, backend, runs, retry_failed=retry_failed, force=force, dry_run=True,
                   template_dir=template_dir, out=out)


def _submit(matrix: Matrix, cdir: Path, backend: Scheduler, runs: list[Run], *, retry_failed: bool = False,
            force: bool = False, dry_run: bool = False, template_dir: str | None = None, out=print) -> SubmitReport:
    if dry_run:
        return _dry_run(matrix, cdir, runs, backend, retry_failed, force, out)
    backend.preflight(matrix)
    report = SubmitReport()
    with campaign_lock(cdir):
        m = Manifest(cdir, create=True)
        try:
            m.sync(matrix, runs)
            backends = for_campaign(cdir, used_schedulers(m), default=backend)
            reconcile(m, backends, out)
            refresh(m, backends, out=out)
            rows = {r.key: r for r in m.runs()}
            statuses = {k: r.status for k, r in rows.items()}
            todo = to_submit(runs, statuses, retry_failed, force, report)
            excludes = blamed_nodes(todo, statuses)
            groups, skipped = plan(matrix, todo, backend, excludes)
            groups, waiting = fit_room(matrix, groups, backend, excludes, report)
            report.skipped = [(r.key, why) for r, why in skipped]
            if skipped:
                m.set_reasons({r.key: f"skipped by the {backend.name} executor: {why}" for r, why in skipped
                               if rows[r.key].status == Status.UNSUBMITTED}, time.time())
            if waiting:
                m.set_reasons({r.key: f"not submitted yet: {report.limit}" for r in waiting
                               if rows[r.key].status == Status.UNSUBMITTED}, time.time())
            _summarize(matrix, runs, report, sum(g.size for g in groups), len(groups), backend, out)
            journal = Journal(m, matrix, backend, template_dir, out)
            try:
                for i, group in enumerate(groups):
                    journal.before(group)
                    try:
                        ids = backend.submit(group)
                    except Exception as err:  # noqa: BLE001 - recorded, then re-raised with context
                        have, unknown = journal.failed(group, err)
                        cause = err if isinstance(err, UserError) else SchedulerError(f"{type(err).__name__}: {err}")
                        raise SubmitAborted(cause, sum(g.size for g in groups[:i]) + have,
                                            sum(g.size for g in groups[i:]) - have - unknown, unknown) from err
                    if len(ids) != group.size:
                        raise RuntimeError(f"{backend.name} returned {len(ids)} job ids for "
                                           f"{plural(group.size, 'run')}")
                    journal.after(group, ids)
            finally:
                report.submitted = sum(g.size for g, _ in journal.submitted)
                report.groups = len(journal.submitted)
                report.calls = backend.calls.get(backend.submit_command, 0)
        finally:
            m.close()
    return report


def fit_room(matrix: Matrix, groups: list[Group], backend: Scheduler, excludes: dict[str, tuple[str, ...]],
             report: SubmitReport) -> tuple[list[Group], list[Run]]:
    """The groups cut to what this user may submit now (a QOS's MaxSubmitJobsPerUser, read from the cluster):
    the first runs in plan order (repeat-major), planned again; the rest wait, unsubmitted, for a later
    ``submit`` (``--wait`` submits them as room frees). Recorded in ``report`` (``waiting``, ``limit``)."""
    total = sum(g.size for g in groups)
    room = backend.submit_room(matrix) if groups else None
    if room is None or total <= room[0]:
        return groups, []
    order = {cell: i for i, cell in enumerate(matrix.cells)}
    runs = sorted((r for g in groups for r in g.runs), key=lambda r: (r.repeat, order[r.cell]))
    keep, wait = runs[:room[0]], runs[room[0]:]
    report.waiting, report.limit = len(wait), room[1]
    fitted, _ = plan(matrix, keep, backend, excludes) if keep else ([], [])
    return fitted, wait


def _recorded_statuses(cdir: Path) -> dict[str, str]:
    """run key -> its status as the campaign's manifest holds it ({} before the first submit)."""
    if not (cdir / MANIFEST).exists():
        return {}
    m = Manifest(cdir)
    try:
        return {r.key: r.status for r in m.runs()}
    finally:
        m.close()


def _recorded_repeats(cdir: Path) -> dict[str, int]:
    """cell id -> the repeats the campaign's manifest holds (an earlier top-up's included)."""
    if not (cdir / MANIFEST).exists():
        return {}
    m = Manifest(cdir)
    try:
        return m.repeats()
    finally:
        m.close()


def _summarize(matrix: Matrix, runs, report: SubmitReport, n: int, ngroups: int, backend: Scheduler, out) -> None:
    kept = ", ".join(f"{v} {k}" for k, v in sorted(report.kept.items()))
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.cell.id] = counts.get(r.cell.id, 0) + 1
    per_cell = sorted(set(counts.values())) or [matrix.measure.repeats]
    # a top-up gives cells more repeats than the matrix
    repeats = (f" x {plural(per_cell[0], 'repeat')}" if len(per_cell) == 1
               else f", {per_cell[0]} to {plural(per_cell[-1], 'repeat')} each")
    n_cells = len(counts) or len(matrix.cells)  # the cells asked for (-k: those selected)
    out(f"campaign {matrix.name}: {plural(len(runs), 'run')} ({plural(n_cells, 'cell')}{repeats}); "
        + (f"submitting {n} as {plural(ngroups, *backend.group_word)}" if n else "nothing to submit")
        + (f"; not resubmitted: {kept}" if kept else ""))
    failed = sum(v for k, v in report.kept.items() if k in RETRYABLE)
    if failed:
        out(f"  {plural(failed, 'failed run is', 'failed runs are')} kept as they are: --retry-failed resubmits them")
    unread = report.kept.get(Status.UNRECOGNISED, 0)
    if unread:
        out(f"  {plural(unread, 'UNRECOGNISED run is', 'UNRECOGNISED runs are')} kept: their programs finished, their "
            "suite does not read their logs (collect's reasons name the suites that do); --force reruns them")
    cells: dict[tuple[str, str], list[str]] = {}  # one line a cell and reason, not a run
    for key, why in report.skipped:
        cell, dot, rep = key.rpartition(".")
        cells.setdefault((cell if dot and rep[:1] == "r" and rep[1:].isdigit() else key, why), []).append(key)
    for (cell, why), keys in cells.items():
        out(f"  skipped {cell}" + (f" ({plural(len(keys), 'run')})" if len(keys) > 1 else "") + f": {why}")
    if report.waiting:
        out(f"  {plural(report.waiting, 'run waits', 'runs wait')}, unsubmitted: {report.limit}; `submit` again as "
            "runs end (`submit --wait` does, as room frees)")


def _dry_run(matrix: Matrix, cdir: Path, runs, backend: Scheduler, retry_failed: bool, force: bool,
             out) -> SubmitReport:
    report = SubmitReport()
    try:  # what the cluster would refuse outright, said before anything is submitted (nothing, when it cannot say)
        backend.preflight(matrix)
    except ControllerUnreachable as err:
        out(f"dry run: submitting would stop here: {err}")
    except UserError as err:
        for line in backend.site_lines(matrix):
            out(f"dry run: {line}")
        out(f"dry run: submitting would stop here: {err}")
    else:
        for line in backend.site_lines(matrix):  # a partition or account the site leaves out (or where jobs go)
            out(f"dry run: {line}")
    statuses = _recorded_statuses(cdir)
    todo = to_submit(runs, statuses, retry_failed, force, report)
    excludes = blamed_nodes(todo, statuses)
    groups, skipped = plan(matrix, todo, backend, excludes)
    groups, _waiting = fit_room(matrix, groups, backend, excludes, report)
    report.skipped = [(r.key, why) for r, why in skipped]
    _summarize(matrix, runs, report, sum(g.size for g in groups), len(groups), backend, out)
    out(f"dry run: nothing is written or submitted. {plural(len(groups), *backend.call_word)} would be made"
        + (":" if groups else " (nothing to submit)."))
    for i, g in enumerate(groups, 1):
        out(f"[{i}] {backend.describe(g)}")
        for line in _cell_lines(g.runs):
            out(f"      {line}")
    report.groups = len(groups)
    return report


def _cell_lines(runs: Sequence[Run]) -> list[str]:
    """A group's runs, one line a cell (in the group's order): ``CELL: N runs would be submitted: FIRST SCRIPT ...
    the last one's name``."""
    cells: dict[str, list[Run]] = {}
    for run in runs:
        cells.setdefault(run.cell.id, []).append(run)
    return [f"{cell}: {plural(len(rs), 'run')} would be submitted: {rs[0].script}"
            + (f" ... {rs[-1].script.name}" if len(rs) > 1 else "") for cell, rs in cells.items()]
