"""Keeping the manifest in step with the schedulers: :func:`refresh` (what ``status``, ``--wait``, ``submit``,
``cancel`` and ``collect`` call first) and :func:`reconcile` (submissions an interrupted ``submit`` left open).

:func:`refresh` asks each scheduler about every run it holds, in one batched query, and

1. settles the controller with the runs: a task the controller has queued again (pending) though its exit marker
   shows its run ended (a ghost of a controller restarted from an older state) is cancelled; a job held by a hold
   this tool placed is released (an interrupted release, or a restarted controller that lost it);
2. decides each run's status with :func:`dlperf_slurm.outcome.decision.decide`; when the run has ended its log is read
once
   by the suite's parser, so the manifest keeps the measurement verdict (NONFINITE, INCOMPLETE, ...) and
   ``status``, ``collect`` and ``--retry-failed`` see the same status. Final statuses are never queried again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Iterable

from dlperf_slurm.campaign.manifest import Manifest, suite_options
from dlperf_slurm.campaign.records import Decision, ManifestRun
from dlperf_slurm.disk import log_identity
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.cell import DEFAULT_MEASURE_STEPS, DEFAULT_WARMUP_STEPS, Cell
from dlperf_slurm.model.result import JobInfo
from dlperf_slurm.model.status import ACTIVE, Status
from dlperf_slurm.outcome import decision, evidence
from dlperf_slurm.parsing import accuracy
from dlperf_slurm.schedulers.base import Scheduler
from dlperf_slurm.words import plural

HELD_BY_US = "JobHeldUser"


def _warn(msg: str) -> None:
    print(f"dlperf-slurm: warning: {msg}", file=sys.stderr)


def used_schedulers(m: Manifest) -> set[str]:
    """The backends a campaign's runs went to."""
    return m.executors()


class _Context:
    """What deciding a run needs from the manifest besides its row: the cells, the window and options."""

    def __init__(self, m: Manifest):
        self.m = m
        self._cells: dict[str, Cell] | None = None
        measure = m.meta("measure") or {}
        self.warmup = int(measure.get("warmup_steps", DEFAULT_WARMUP_STEPS))
        self.measure = int(measure.get("measure_steps", DEFAULT_MEASURE_STEPS))
        self.options = suite_options(m)
        self.held_tokens = m.held_tokens()
        # an accuracy campaign's target: read against the evaluations a suite's program printed (as collect does)
        from dlperf_slurm.matrix.measure import target_of  # lazily: it imports the matrix's axes

        self.target, self.epochs = target_of(measure)

    def cell(self, cell_id: str) -> Cell:
        if self._cells is None:
            self._cells = self.m.cells()
        return self._cells[cell_id]


def run_evidence(ctx: _Context, row: ManifestRun, info: JobInfo | None, asked: bool,
             read_log: bool) -> decision.Evidence:
    m = ctx.m
    log = m.abspath(row.log)
    marker = evidence.read_marker(m.abspath(row.marker))
    ev = decision.Evidence(job=info, asked=asked, marker=marker, has_log=log.exists(),
                          cancel_requested=bool(row.cancel_requested_at), time_limit_s=row.time_limit_s)
    if read_log:
        ev.log_id = log_identity(log)  # before reading: a log that changes meanwhile is read again next time
        if ev.has_log:
            cell = ctx.cell(row.cell_id)
            warm = ctx.warmup if row.warmup_steps is None else row.warmup_steps  # the window it ran with
            meas = ctx.measure if row.measure_steps is None else row.measure_steps
            ev.log = evidence.read_log(cell, log, warmup_steps=warm, measure_steps=meas,
                                      options=ctx.options.get(cell.suite, {}))
            if ctx.target is not None:
                accuracy.apply_target(ev.log.extra, ctx.target, ctx.epochs or None)
            ev.started_at = evidence.log_start(log)
            ev.damage = evidence.changed_after_end(log, m.abspath(row.marker),
                                                  row.log_status == Status.OK and row.log_id != ev.log_id)
        if row.slurm_out:
            ev.banner = evidence.read_banner([row.slurm_out])
    return ev


def decide_row(ctx: _Context, row: ManifestRun, info: JobInfo | None, asked: bool
               ) -> tuple[decision.Outcome | None, decision.Evidence]:
    """The one decision for a manifest row: first without the log; once the run has ended, with it."""
    ev = run_evidence(ctx, row, info, asked, read_log=False)
    first = decision.decide_run(ev)
    if first is None or first.status in ACTIVE:
        return first, ev
    ev = run_evidence(ctx, row, info, asked, read_log=True)
    return decision.decide_run(ev, ctx.m.abspath(row.log)), ev


def refresh(m: Manifest, schedulers: dict[str, Scheduler], keys: Iterable[str] | None = None, out=None) -> int:
    """Update every active run's status, and that of every ended run whose log changed since its verdict was
    read (see the module docstring). Returns the number of runs changed."""
    rows = m.runs(statuses=ACTIVE) + m.changed_logs()
    if keys is not None:
        wanted = set(keys)
        rows = [r for r in rows if r.key in wanted]
    if not rows:
        return 0
    ctx = _Context(m)
    by_backend: dict[str, list[ManifestRun]] = {}
    for r in rows:
        by_backend.setdefault(r.executor or "slurm", []).append(r)
    updates = []
    now = time.time()
    for name, group in by_backend.items():
        backend = schedulers.get(name)
        infos = None
        if backend is not None:
            since = min((r.submitted_at or now) for r in group)
            try:
                infos = backend.query([r.job_id for r in group if r.job_id], since)
            except UserError as err:
                _warn(f"could not ask the scheduler ({err}); using exit markers only")
        asked = infos is not None
        infos = infos or {}
        if backend is not None and asked:
            _settle(ctx, backend, group, infos, out)
        for r in group:
            info = infos.get(r.job_id) if r.job_id else None
            decided, ev = decide_row(ctx, r, info, asked and bool(r.job_id))
            if decided is None:
                continue
            ended = None
            if decided.status not in ACTIVE:
                ended = (ev.marker or {}).get("end") or now
            log_status = ev.log.status if ev.log is not None else None
            nodes = info.nodes if info and info.nodes else r.nodes
            energy = info.energy_j if info else None
            if (decided.status, decided.reason, nodes) != (r.status, r.reason, r.nodes) or log_status \
                    or ev.log_id or (energy is not None and energy != r.slurm_energy_j):
                updates.append(Decision(key=r.key, status=decided.status, reason=decided.reason,
                                        exit_code=decided.exit_code, log_status=log_status, nodes=nodes, ended_at=ended,
                                        sched_state=info.state if info else r.sched_state, log_id=ev.log_id,
                                        slurm_energy_j=energy))
    if updates:
        m.settle(updates, now)
    return len(updates)


def refresh_statuses(campaign_dir: Path, out=None) -> None:
    """Ask the scheduler about the campaign's active runs (as ``status`` does) before collecting; a failure to
    ask is a warning, never an error: the logs and exit markers still decide."""
    try:
        from dlperf_slurm import schedulers

        m = Manifest(campaign_dir)
        try:
            if not m.has_runs(statuses=ACTIVE) and not m.changed_logs():
                return  # every run has ended: nothing to ask (and no scheduler client to start)
            refresh(m, schedulers.for_campaign(campaign_dir, used_schedulers(m)))
        finally:
            m.close()
    except sqlite3.DatabaseError:
        raise  # the manifest itself is damaged or cannot be written: the CLI's one line says which and what to do
    except Exception as err:  # noqa: BLE001
        print(f"dlperf-slurm: warning: statuses not refreshed ({type(err).__name__}: {err})", file=out or sys.stderr)


def _settle(ctx: _Context, backend: Scheduler, rows: list[ManifestRun], infos: dict[str, JobInfo], out) -> None:
    """Cancel ghost tasks (the controller queues them again, their exit marker says the run ended) and release
    holds this tool placed, in one call each."""
    ended: dict[str, JobInfo] = {}
    held: dict[str, JobInfo] = {}
    for r in rows:
        info = infos.get(r.job_id) if r.job_id else None
        if info is None or info.status not in (Status.PENDING, Status.REQUEUED):
            continue  # a RUNNING task with a marker is finishing (or a ghost its script's guard ends at once)
        if evidence.read_marker(ctx.m.abspath(r.marker)) is not None:
            ended[info.job_id] = info
        elif info.status == Status.PENDING and HELD_BY_US in info.reason and r.submission in ctx.held_tokens:
            held[info.job_id] = info
    if not ended and not held:
        return
    try:
        done = backend.settle(ended, held)
    except UserError as err:
        _warn(f"could not settle the scheduler's state ({err})")
        return
    say = out or (lambda s: print(f"dlperf-slurm: {s}", file=sys.stderr))
    if done.cancelled_ghosts:
        say(f"cancelled {len(done.cancelled_ghosts)} ghost task(s) whose runs had already ended (a restarted "
            f"controller had queued them again): {', '.join(done.cancelled_ghosts[:5])}"
            + (" ..." if len(done.cancelled_ghosts) > 5 else ""))
    if done.released:
        say(f"released {len(done.released)} run(s) held by this tool's submission hold")
        ctx.m.mark_released({r.submission for r in rows if r.job_id in held and r.submission})  # held: one of ours


# ================================================================================================ reconcile


def record_ids(m: Manifest, backend: Scheduler, token: str, keys: list[str], job_ids: list[str]) -> None:
    """Record a submission's job ids (the journal's last step)."""
    first = job_ids[0] if job_ids else None
    m.record_ids(token=token, executor=backend.name,
                 ids=[(key, jid, *backend.array_parts(jid)) for key, jid in zip(keys, job_ids)],
                 job_id=(backend.array_parts(first)[0] or first) if first else None)


def reconcile(m: Manifest, schedulers: dict[str, Scheduler], out=print) -> int:
    """Settle submissions an interrupted ``submit`` left as SUBMITTING: adopt the jobs the scheduler (or the run's
    own log) shows were submitted, put the rest back for resubmission. Returns the runs put back.

    The journal's order makes this exact: (1) commit SUBMITTING, (2) move old log/marker aside, (3) write scripts,
    (4) submit, (5) commit job ids. A log at the run's path after step 2 can only come from a job of this
    submission; a log there before step 2 is the old one, and step 2 is finished here."""
    released = 0
    for sub in m.submissions(state=Status.SUBMITTING):
        keys = json.loads(sub["runs"])
        backend = schedulers.get(sub["executor"])
        rows = {r.key: r for r in m.runs(keys=keys)}
        found = backend.find(sub["name"], sub["token"], sub["created_at"]) if backend is not None else None
        dropped = 0
        if found and backend is not None:
            scripts = {i: m.abspath(rows[k].script) for i, k in enumerate(keys) if k in rows}
            kept = backend.adopt(found, sub["token"], scripts) or {}
            dropped, found = len(found) - len(kept), kept
        found = found or {}
        if dropped:
            out(f"  interrupted submission {sub['token']}: {dropped} task(s) could not be completed; cancelled "
                "before they started, to be submitted again")
        have = [(k, found[i]) for i, k in enumerate(keys) if i in found]
        if have and backend is not None:  # found only through a backend
            record_ids(m, backend, sub["token"], [k for k, _ in have], [j for _, j in have])
            out(f"  reconciled interrupted submission {sub['token']}: {len(have)} of {plural(len(keys), 'run')} had "
                f"been submitted ({backend.group_label([j for _, j in have])})")
        adopted, back = [], []
        for i, k in enumerate(keys):
            r = rows.get(k)
            if i in found or r is None or r.submission != sub["token"] or r.status != Status.SUBMITTING:
                continue
            log, marker = m.abspath(r.log), m.abspath(r.marker)
            pending_moves = unfinished_moves(m, k, sub["created_at"])
            if pending_moves:  # interrupted before step 2 ended: these files are the old attempt's
                for src, dst in pending_moves:
                    os.replace(src, dst)
                back.append(k)
            elif log.exists() or marker.exists():  # the script started: submitted, never submit it twice
                adopted.append((k, (evidence.read_marker(marker) or {}).get("job")))
            else:
                back.append(k)
        m.close_submission(sub["token"], adopted=adopted, back=back, submitted_at=sub["created_at"],
                           state="SUBMITTED" if have or adopted else "ABANDONED")
        if adopted:
            out(f"  interrupted submission {sub['token']}: {plural(len(adopted), 'run')} found by their logs")
        if back:
            out(f"  interrupted submission {sub['token']}: {plural(len(back), 'run')} never reached the scheduler; "
                "they will be submitted")
        released += len(back)
    return released


def unfinished_moves(m: Manifest, key: str, since: float) -> list[tuple[Path, Path]]:
    moved = m.last_moves(key, since)
    if moved is None:
        return []
    moves = []
    for _kind, rel in moved.items():
        dst = m.abspath(rel)
        src = dst.with_name(dst.name.rsplit(".", 1)[0])
        if src.exists() and not dst.exists():
            moves.append((src, dst))
    return moves
