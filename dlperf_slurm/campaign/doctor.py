"""``doctor``: a campaign's manifest rebuilt from what the campaign folder and the scheduler still hold, when it
is damaged or deleted.

What it is rebuilt from:

- the matrix copy the manifest kept beside itself (``matrix.toml``): the cells and every run's paths;
- each run's files: its exit marker (the job id, the end) and its log (the job id of its provenance line); a
  run with either was submitted and is decided again (``status``'s own decision, :mod:`dlperf_slurm.campaign.tracking`),
  asking the scheduler by job id (sacct/squeue) and reading the log;
- the local runner's queue files (``.local/<token>.json``): every local run by its job id, queued and running
  ones included;
- the scheduler by job name (``dlperf.<campaign>.*``): jobs of the campaign still queued or running whose runs
  have no file yet cannot be matched to their runs; they are named, and ``doctor`` exits 1 until they ended
  (a ``submit`` meanwhile would run those runs twice).

The damaged file is kept beside the new one (``manifest.sqlite.damaged-<time>``); nothing else is touched.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Callable

from dlperf_slurm import events
from dlperf_slurm.campaign import folders, manifest, schema
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.cell import Matrix
from dlperf_slurm.model.status import Status
from dlperf_slurm.outcome import evidence
from dlperf_slurm.words import plural


def _job_from_log(log: Path) -> str | None:
    ev = evidence.job_event(log)
    if ev is None:
        return None
    local = (ev.get("env") or {}).get("DLPERF_LOCAL_JOB")
    array, task = ev.get(events.ARRAY_JOB_ID), ev.get(events.ARRAY_TASK_ID)
    if local:
        return str(local)
    if array not in (None, "") and task not in (None, ""):
        return f"{array}_{task}"
    jid = ev.get(events.JOB_ID)
    return str(jid) if jid not in (None, "") else None


def _local_jobs(cdir: Path) -> dict[str, str]:
    """run key -> its job id in the local runner's queue files (``.local/<token>.json``, the latest submission of
    the run): a queued or running local run has no file of its own yet, and its log names no job id."""
    from dlperf_slurm.schedulers import local

    queues = []
    for q in (cdir / local.LOCAL_DIR).glob("*.json"):
        try:
            queues.append(json.loads(q.read_text()))
        except (OSError, ValueError):
            continue
    out = {}
    for state in sorted((s for s in queues if isinstance(s, dict)), key=lambda s: s.get("created") or 0):
        for i, task in enumerate(state.get("tasks") or []):
            if isinstance(task, dict) and task.get("run") and state.get("token"):
                out[task["run"]] = local.local_job_id(state["token"], i)
    return out


def _executor(job_id: str | None) -> str | None:
    if not job_id:
        return None
    return "local" if job_id.startswith("local-") else "slurm" if re.match(r"^\d+(_\d+)?$", job_id) else None


def _keep_damaged(path: Path) -> Path:
    """A damaged manifest (and its journal files) moved aside, never deleted: the path it is kept at."""
    keep = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    os.replace(path, keep)
    for side in ("-wal", "-shm", "-journal"):
        if Path(f"{path}{side}").exists():
            os.replace(f"{path}{side}", f"{keep}{side}")
    return keep


def _found_by_files(cdir: Path, m: manifest.Manifest) -> list[tuple]:
    """The runs the campaign's files show were started (a log, an exit marker, the local runner's record), as
    :meth:`~dlperf_slurm.campaign.manifest.Manifest.mark_found` takes them: their job, executor and attempts."""
    now = time.time()
    found = []
    local_jobs = _local_jobs(cdir)
    for r in m.runs():
        log, marker = m.abspath(r.log), m.abspath(r.marker)
        mk = evidence.read_marker(marker)
        jid = _job_from_log(log) or local_jobs.get(r.key) or (str(mk.get("job")) if mk and mk.get("job") else None)
        if mk is None and not log.exists() and r.key not in local_jobs:
            continue
        attempts = 1 + len(list(log.parent.glob(f"{log.name}.*")))
        when = min((p.stat().st_mtime for p in (log, marker) if p.exists()), default=now)
        found.append((Status.RUNNING, "rebuilt by doctor from the run's files", jid, _executor(jid) or "slurm",
                      attempts, when, now, r.key))
    return found


def rebuild(cdir: Path, load_matrix: Callable[[Path], Matrix], active_jobs: Callable[[str], list[str]],
            out: Callable[[str], None] = print) -> int:
    """Rebuild ``cdir``'s manifest (see the module docstring). ``load_matrix``: the matrix copy -> Matrix;
    ``active_jobs``: a job-name prefix -> the scheduler's queued or running job ids of it. Returns the exit
    status: 0 when every run is accounted for, 1 when jobs of the campaign are still with the scheduler."""
    from dlperf_slurm import schedulers
    from dlperf_slurm.campaign import tracking
    from dlperf_slurm.matrix import loader as matrix_mod

    path = cdir / folders.MANIFEST
    problem = schema.integrity_problem(path)
    if not problem:
        out(f"{path}: sound (integrity check ok); nothing to do")
        return 0
    copy = cdir / manifest.MATRIX_COPY
    if not copy.exists():
        raise UserError(f"{cdir}: no {manifest.MATRIX_COPY} (the matrix copy submit keeps): nothing to rebuild the "
                        "manifest from; submit the campaign's matrix again with --campaign "
                        f"{cdir.name} (runs with logs are kept)")
    if problem != "missing":
        out(f"{path}: damaged ({problem}); kept as {_keep_damaged(path).name}")
    mx = load_matrix(copy)
    runs = matrix_mod.runs(mx, cdir)
    m = manifest.Manifest(cdir, create=True)
    try:
        m.sync(mx, runs)
        found = _found_by_files(cdir, m)
        m.mark_found(found)
        used = tracking.used_schedulers(m)
        tracking.refresh(m, schedulers.for_campaign(cdir, used))
        counts: dict[str, int] = {}
        for r in m.runs():
            counts[r.status] = counts.get(r.status, 0) + 1
        out(f"{path}: rebuilt: {plural(len(runs), 'run')}, {len(found)} found by their files; "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        active = active_jobs(f"dlperf.{m.meta('name') or cdir.name}.")
        if active:
            out(f"  {len(active)} job(s) of this campaign are still queued or running ({', '.join(active[:5])}"
                + (" ..." if len(active) > 5 else "") + "): their runs cannot be told apart until they write "
                "their logs; run `doctor` again once they ended (a `submit` now would run them twice)")
            return 1
        return 0
    finally:
        m.close()
