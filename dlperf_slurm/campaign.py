"""A campaign: its folder, its manifest, and the submit / status / cancel life cycle.

``logs/<campaign>/manifest.sqlite`` records every run (cell, repeat, script, log, marker, executor, job id,
array task, status, reason, timestamps) and every submission. SQLite gives atomic transactions (a submit
killed with SIGKILL leaves a consistent manifest), readers while jobs run, and safe concurrent writers;
``submit`` and ``cancel`` also hold ``logs/<campaign>/.lock`` so two of them never interleave.

Submitting never duplicates a run: every group is recorded as SUBMITTING (with a token in its job name)
*before* sbatch is called; the next ``submit`` reconciles such rows by asking the scheduler for that job
name (and by the run's own log/marker) before it submits anything again.

Read API for other stages (``collect``): :func:`load_campaign` and :func:`load_manifest`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from dlperf_slurm.errors import UserError
from dlperf_slurm.files import atomic_write
from dlperf_slurm.logparse import oom_text
from dlperf_slurm.scheduler import Backoff, JobInfo
from dlperf_slurm.suites import Status

MANIFEST = "manifest.sqlite"
LOCK = ".lock"
MATRIX_COPY = "matrix.toml"
SCHEMA_VERSION = 1
SUBMITTING = "SUBMITTING"
UNSUBMITTED = Status.UNSUBMITTED
ACTIVE = set(Status.ACTIVE)
FAILURES = set(Status.FINAL_FAILURES)
FINAL = FAILURES | {Status.OK}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cells (id TEXT PRIMARY KEY, ord INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    key TEXT PRIMARY KEY, cell_id TEXT NOT NULL, repeat INTEGER NOT NULL, ord INTEGER NOT NULL,
    script TEXT NOT NULL, log TEXT NOT NULL, marker TEXT NOT NULL,
    status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
    executor TEXT, submission TEXT, job_id TEXT, array_job_id TEXT, array_task INTEGER,
    attempt INTEGER NOT NULL DEFAULT 0, exit_code INTEGER, sched_state TEXT, nodes TEXT,
    created_at REAL NOT NULL, submitted_at REAL, ended_at REAL, updated_at REAL NOT NULL,
    cancel_requested_at REAL, time_limit_s REAL
);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status);
CREATE TABLE IF NOT EXISTS submissions (
    token TEXT PRIMARY KEY, name TEXT NOT NULL, executor TEXT NOT NULL, state TEXT NOT NULL,
    runs TEXT NOT NULL, job_id TEXT, options TEXT, error TEXT, created_at REAL NOT NULL, done_at REAL
);
CREATE TABLE IF NOT EXISTS attempts (
    run_key TEXT NOT NULL, attempt INTEGER NOT NULL, job_id TEXT, executor TEXT, status TEXT, reason TEXT,
    submitted_at REAL, ended_at REAL, moved TEXT NOT NULL, recorded_at REAL NOT NULL
);
"""

_NETWORK_FS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "glusterfs", "panfs", "fuse")

# ================================================================================================ manifest


def _fs_type(path: Path) -> str:
    """Filesystem type of ``path`` from /proc/mounts (longest matching mount point); '' if unknown."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return ""
    best, kind = "", ""
    p = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3 and (p == parts[1] or p.startswith(parts[1].rstrip("/") + "/")) and len(parts[1]) >= len(best):
            best, kind = parts[1], parts[2]
    return kind


def journal_mode(directory: Path) -> str:
    """WAL on local disks (readers never block); the rollback journal on network filesystems, where
    SQLite's WAL shared memory does not work across hosts. ``DLPERF_SLURM_SQLITE_JOURNAL`` overrides."""
    forced = os.environ.get("DLPERF_SLURM_SQLITE_JOURNAL")
    if forced:
        return forced.upper()
    kind = _fs_type(directory)
    return "DELETE" if kind.startswith(_NETWORK_FS) else "WAL"


class Manifest:
    """The campaign's SQLite manifest. Every write is one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, campaign_dir: str | os.PathLike, create: bool = False):
        self.dir = Path(campaign_dir).resolve()
        self.path = self.dir / MANIFEST
        if not self.path.exists() and not create:
            raise UserError(f"{self.dir}: no campaign here (no {MANIFEST}); submit a matrix first")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA busy_timeout = 60000")
        if create:
            self.db.execute(f"PRAGMA journal_mode = {journal_mode(self.dir)}")
            self.db.execute("PRAGMA synchronous = FULL")
            self.db.executescript(_SCHEMA)
            if self.meta("schema_version") is None:
                self.set_meta(schema_version=SCHEMA_VERSION)
        version = self.meta("schema_version")
        if version is not None and int(version) > SCHEMA_VERSION:
            raise UserError(f"{self.path}: manifest schema {version} is newer than this dlperf_slurm understands")

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        else:
            self.db.execute("COMMIT")

    # -- meta
    def meta(self, key: str) -> Any:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return None if row is None else json.loads(row[0])

    def set_meta(self, **values: Any) -> None:
        with self.write() as db:
            for k, v in values.items():
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (k, json.dumps(v)))

    # -- rows
    def runs(self, where: str = "", args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self.db.execute(f"SELECT * FROM runs {('WHERE ' + where) if where else ''} ORDER BY ord", args).fetchall()

    def abspath(self, rel: str) -> Path:
        return self.dir / rel

    def rel(self, path: Path) -> str:
        try:
            return str(Path(path).resolve().relative_to(self.dir))
        except ValueError:
            return str(path)

    # -- sync with a matrix
    def sync(self, matrix, runs) -> int:
        """Record the matrix (copy, cells, measure window) and add rows for runs not yet in the manifest."""
        now = time.time()
        try:
            text = Path(matrix.path).read_text()
        except OSError:
            text = ""
        previous = self.meta("matrix_sha")
        sha = hashlib.sha256(text.encode()).hexdigest()
        if text and previous != sha:
            copy = self.dir / MATRIX_COPY
            if copy.exists() and previous:
                copy.replace(self.dir / f"{MATRIX_COPY}.{time.strftime('%Y%m%d-%H%M%S')}")
            atomic_write(copy, text)
        existing = {r["key"] for r in self.db.execute("SELECT key FROM runs")}
        known_cells = {r["id"] for r in self.db.execute("SELECT id FROM cells")}
        limit_s = matrix.slurm.minutes * 60
        added = 0
        with self.write() as db:
            meta = {"name": matrix.name, "suite": matrix.suite.name, "matrix_path": str(Path(matrix.path).resolve()),
                    "matrix_sha": sha, "measure": {"repeats": matrix.measure.repeats,
                                                   "warmup_steps": matrix.measure.warmup_steps,
                                                   "measure_steps": matrix.measure.measure_steps},
                    "options": matrix.options, "time_limit": matrix.slurm.time,
                    "dropped": [{"cell": d.cell.as_dict(), "reason": d.reason} for d in matrix.dropped]}
            if self.meta("created_at") is None:
                meta["created_at"] = now
            for k, v in meta.items():
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (k, json.dumps(v, default=str)))
            base = db.execute("SELECT COALESCE(MAX(ord), -1) + 1 FROM cells").fetchone()[0]
            for i, cell in enumerate(matrix.cells):
                if cell.id not in known_cells:
                    db.execute("INSERT INTO cells(id, ord, data) VALUES (?, ?, ?)",
                               (cell.id, base + i, json.dumps(cell.as_dict(), default=str)))
            base = db.execute("SELECT COALESCE(MAX(ord), -1) + 1 FROM runs").fetchone()[0]
            for i, r in enumerate(runs):
                if r.key in existing:
                    db.execute("UPDATE runs SET time_limit_s = ? WHERE key = ?", (limit_s, r.key))
                    continue
                db.execute("INSERT INTO runs(key, cell_id, repeat, ord, script, log, marker, status, created_at, "
                           "updated_at, time_limit_s) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                           (r.key, r.cell.id, r.repeat, base + i, self.rel(r.script), self.rel(r.log),
                            self.rel(r.marker), UNSUBMITTED, now, now, limit_s))
                added += 1
        return added


# ================================================================================================ read API


@dataclass
class RunRecord:
    """One run as the manifest knows it (paths are absolute)."""

    key: str
    cell_id: str
    repeat: int
    cell: dict[str, Any]  # Cell.as_dict()
    status: str  # a dlperf_slurm.suites.Status value, or SUBMITTING
    reason: str
    executor: str | None
    job_id: str | None  # '123_4' (array task), '123', or 'local-<token>_<i>'
    array_job_id: str | None
    array_task: int | None
    attempt: int  # how many times it was submitted
    exit_code: int | None
    nodes: str | None
    script: Path
    log: Path
    marker: Path
    submitted_at: float | None
    ended_at: float | None
    updated_at: float
    previous: list[dict[str, Any]] = field(default_factory=list)  # earlier attempts, oldest first


@dataclass
class CampaignInfo:
    name: str
    dir: Path
    suite: str
    measure: dict[str, int]  # repeats, warmup_steps, measure_steps
    options: dict[str, Any]
    matrix_path: str
    matrix_copy: Path
    time_limit: str
    created_at: float | None
    cells: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    runs: list[RunRecord]


def load_campaign(campaign_dir: str | os.PathLike) -> CampaignInfo:
    """Everything the manifest holds, read-only (no scheduler query: run ``status`` to refresh)."""
    m = Manifest(campaign_dir)
    try:
        cells = {r["id"]: json.loads(r["data"]) for r in m.db.execute("SELECT id, data FROM cells ORDER BY ord")}
        history: dict[str, list[dict[str, Any]]] = {}
        for a in m.db.execute("SELECT * FROM attempts ORDER BY recorded_at"):
            d = dict(a)
            d["moved"] = {k: str(m.abspath(v)) for k, v in json.loads(a["moved"]).items()}
            history.setdefault(a["run_key"], []).append(d)
        runs = [RunRecord(r["key"], r["cell_id"], r["repeat"], cells.get(r["cell_id"], {}), r["status"], r["reason"],
                          r["executor"], r["job_id"], r["array_job_id"], r["array_task"], r["attempt"], r["exit_code"],
                          r["nodes"], m.abspath(r["script"]), m.abspath(r["log"]), m.abspath(r["marker"]),
                          r["submitted_at"], r["ended_at"], r["updated_at"], history.get(r["key"], []))
                for r in m.runs()]
        return CampaignInfo(m.meta("name") or m.dir.name, m.dir, m.meta("suite") or "", m.meta("measure") or {},
                            m.meta("options") or {}, m.meta("matrix_path") or "", m.dir / MATRIX_COPY,
                            m.meta("time_limit") or "", m.meta("created_at"), list(cells.values()),
                            m.meta("dropped") or [], runs)
    finally:
        m.close()


def load_manifest(campaign_dir: str | os.PathLike) -> list[RunRecord]:
    """Every run of the campaign, in matrix order (cell by cell, repeat by repeat)."""
    return load_campaign(campaign_dir).runs


# ================================================================================================ lock


@contextlib.contextmanager
def campaign_lock(campaign_dir: Path, wait_s: float = 30.0) -> Iterator[None]:
    """Exclusive lock on the campaign for submit/cancel; a second one waits, then says who holds it."""
    campaign_dir.mkdir(parents=True, exist_ok=True)
    path = campaign_dir / LOCK
    f = open(path, "a+")
    deadline = time.time() + wait_s
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.time() > deadline:
                f.seek(0)
                holder = f.read().strip() or "another process"
                f.close()
                raise UserError(f"{campaign_dir}: the campaign is busy ({holder} holds {path}); try again later")
            time.sleep(0.2)
    try:
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} ({' '.join(sys.argv[:3])})\n")
        f.flush()
        yield
    finally:
        f.truncate(0)
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


# ================================================================================================ statuses

_PROVENANCE = re.compile(r':::DLPERF (\{.*"event": "job".*\})')


def _oom_line(tail: str) -> str | None:
    """The first line of a log tail that reports an out-of-memory failure (the collector's test), or None."""
    return next((line.strip()[:200] for line in tail.splitlines() if oom_text(line)), None)


def read_marker(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) and "rc" in data else None
    except (OSError, ValueError):
        return None


def log_tail(path: Path, size: int = 65536) -> str:
    """The end of a log, without the provenance line (it quotes the command and the environment)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(line for line in text.splitlines() if not _PROVENANCE.search(line))


def log_start(path: Path) -> float | None:
    """Start time of the run from the provenance line near the top of its log."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536).decode(errors="replace")
    except OSError:
        return None
    m = _PROVENANCE.search(head)
    if m:
        try:
            return float(json.loads(m.group(1)).get("time"))
        except (ValueError, TypeError):
            return None
    return None


def _exit_code(info: JobInfo | None, marker: dict | None) -> int | None:
    if marker is not None:
        return int(marker.get("rc", 0))
    if info and info.exit_code:
        try:
            return int(info.exit_code.split(":")[0])
        except ValueError:
            return None
    return None


def resolve(info: JobInfo | None, known: bool, marker: dict | None, log: Path,
            cancel_requested: bool, time_limit_s: float | None) -> tuple[str | None, str]:
    """A run's status from the scheduler's answer and the job's own exit marker (method.md).

    ``known``: the scheduler was asked and answered (so ``info is None`` means it no longer knows the job).
    Returns (None, '') when nothing can be concluded yet."""
    st = info.status if info else None
    if info is not None and st is None:
        return None, f"unknown Slurm state {info.state}"
    if st in ACTIVE:
        return st, info.reason if st != Status.RUNNING else ""
    rc = _exit_code(info, marker)
    sig = (marker or {}).get("signal") or ""
    tail = log_tail(log) if (st in (Status.FAILED, None)) else ""
    if st is not None:  # the scheduler has a final state
        if st == Status.OK:
            if rc not in (None, 0):
                return Status.FAILED, f"exit code {rc} (Slurm said COMPLETED)"
            return Status.OK, ""
        if st == Status.FAILED:
            oom = _oom_line(tail)
            if oom:
                return Status.OOM, f"out of memory ({oom}), exit code {rc}"
            if not log.exists():
                return Status.LAUNCH_FAILED, "the job script never started (no log)" + (
                    f"; {info.reason}" if info.reason else "")
            return Status.FAILED, f"exit code {rc}" if rc is not None else (info.reason or "non-zero exit")
        reason = info.reason
        if st == Status.CANCELLED and cancel_requested:
            reason = "cancelled by `dlperf-slurm cancel`" + (f" ({reason})" if reason else "")
        if sig and sig not in reason:
            reason = f"{reason}; script got SIG{sig}" if reason else f"script got SIG{sig}"
        return st, reason
    # the scheduler does not know the job (purged, no sacct) or could not be asked: the marker decides
    if marker is not None:
        if rc == 0 and not sig:
            return Status.OK, ""
        if sig:
            if cancel_requested:
                return Status.CANCELLED, f"cancelled by `dlperf-slurm cancel` (SIG{sig})"
            start, end = log_start(log), marker.get("end")
            if time_limit_s and start and end and float(end) - start >= time_limit_s - 60:
                return Status.TIMEOUT, (f"killed by SIG{sig} after {float(end) - start:.0f} s, at the time limit "
                                        "(inferred from the exit marker: no scheduler record)")
            return Status.CANCELLED, (f"killed by SIG{sig} (no scheduler record: scancel, preemption "
                                      "or node shutdown)")
        oom = _oom_line(tail)
        if oom:
            return Status.OOM, f"out of memory ({oom}), exit code {rc}"
        return Status.FAILED, f"exit code {rc}"
    if not known:
        return None, ""
    if cancel_requested:
        return Status.CANCELLED, "cancelled by `dlperf-slurm cancel` (no scheduler record left)"
    if log.exists():
        return Status.FAILED, ("the job left the queue without an exit marker (killed hard: out of memory, "
                               "node failure or SIGKILL?) and the scheduler keeps no record")
    return Status.LAUNCH_FAILED, "the job left the queue without ever starting (no log, no scheduler record)"


def refresh(m: Manifest, executors: dict[str, Any], keys: Iterable[str] | None = None) -> int:
    """Update every active run's status: one batched query per executor, plus exit markers.

    Final statuses are sticky (never queried again). Returns the number of runs whose status changed."""
    rows = [r for r in m.runs() if r["status"] in ACTIVE]
    if keys is not None:
        wanted = set(keys)
        rows = [r for r in rows if r["key"] in wanted]
    by_ex: dict[str, list[sqlite3.Row]] = {}
    for r in rows:
        by_ex.setdefault(r["executor"] or "slurm", []).append(r)
    updates = []
    now = time.time()
    for name, group in by_ex.items():
        ex = executors.get(name)
        infos = None
        if ex is not None:
            since = min((r["submitted_at"] or now) for r in group)
            try:
                infos = ex.query([r["job_id"] for r in group if r["job_id"]], since)
            except UserError as err:
                print(f"dlperf-slurm: warning: could not ask the scheduler ({err}); using exit markers only",
                      file=sys.stderr)
                infos = None
        known = infos is not None
        infos = infos or {}
        for r in group:
            info = infos.get(r["job_id"]) if r["job_id"] else None
            marker = read_marker(m.abspath(r["marker"]))
            status, reason = resolve(info, known and bool(r["job_id"]), marker, m.abspath(r["log"]), bool(r["cancel_requested_at"]),
                                     r["time_limit_s"])
            if status is None:
                continue
            rc = _exit_code(info, marker)
            ended = (marker or {}).get("end") if status not in ACTIVE else None
            if status not in ACTIVE and ended is None:
                ended = now
            if (status, reason) != (r["status"], r["reason"]) or (info and info.nodes and info.nodes != r["nodes"]):
                updates.append((status, reason, rc, info.state if info else r["sched_state"],
                                (info.nodes if info and info.nodes else r["nodes"]), ended, now, r["key"]))
    if updates:
        with m.write() as db:
            db.executemany("UPDATE runs SET status=?, reason=?, exit_code=?, sched_state=?, nodes=?, "
                           "ended_at=COALESCE(?, ended_at), updated_at=? WHERE key=?", updates)
    return len(updates)


# ================================================================================================ submit


class _Journal:
    """Records each submission around the executor's sbatch (see executors.Executor.submit)."""

    def __init__(self, m: Manifest, matrix, template_dir: str | None, out):
        from dlperf_slurm import render

        self.m, self.matrix, self.out = m, matrix, out
        self.renderer = render.Renderer(matrix, template_dir)
        self.submitted: list[tuple[Any, list[str]]] = []

    def before_submit(self, executor, group) -> None:
        now = time.time()
        keys = [r.key for r in group.runs]
        rows = {r["key"]: r for r in self.m.runs(f"key IN ({','.join('?' * len(keys))})", keys)}
        moves: list[tuple[Path, Path]] = []
        with self.m.write() as db:
            for run in group.runs:
                row = rows[run.key]
                moved: dict[str, str] = {}
                for kind, path in (("log", run.log), ("marker", run.marker)):
                    if path.exists():
                        target = _aside(path, row["attempt"])
                        moved[kind] = self.m.rel(target)
                        moves.append((path, target))
                if row["attempt"] or moved:
                    db.execute("INSERT INTO attempts(run_key, attempt, job_id, executor, status, reason, submitted_at, "
                               "ended_at, moved, recorded_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                               (run.key, row["attempt"], row["job_id"], row["executor"], row["status"], row["reason"],
                                row["submitted_at"], row["ended_at"], json.dumps(moved), now))
                db.execute("UPDATE runs SET status=?, reason='', executor=?, submission=?, job_id=NULL, "
                           "array_job_id=NULL, array_task=NULL, attempt=attempt+1, exit_code=NULL, sched_state=NULL, "
                           "nodes=NULL, submitted_at=NULL, ended_at=NULL, cancel_requested_at=NULL, updated_at=? "
                           "WHERE key=?", (SUBMITTING, executor.name, group.token, now, run.key))
            db.execute("INSERT INTO submissions(token, name, executor, state, runs, options, created_at) "
                       "VALUES (?,?,?,?,?,?,?)", (group.token, group.name, executor.name, SUBMITTING, json.dumps(keys),
                                                  json.dumps(group.directives), now))
        # evidence first (moved aside, never deleted), then the scripts: only then may a job start
        for src, dst in moves:
            os.replace(src, dst)
        for run in group.runs:
            text = self.renderer.render(run)
            if run.script.exists() and run.script.read_text() != text:  # a changed script: keep the old one too
                os.replace(run.script, _aside(run.script, rows[run.key]["attempt"]))
            atomic_write(run.script, text, executable=True)

    def after_submit(self, executor, group, job_ids: list[str]) -> None:
        _record_ids(self.m, group.token, [r.key for r in group.runs], job_ids, executor.name)
        self.submitted.append((group, job_ids))
        first = job_ids[0] if job_ids else "?"
        self.out(f"  submitted {group.size} runs as {_array_label(first, group.size)} ({executor.describe(group)})")

    def submit_failed(self, executor, group, error: Exception) -> None:
        now = time.time()
        keys = [r.key for r in group.runs]
        # an error after sbatch succeeded (e.g. while submitit moved its pickles) must not lose the jobs
        try:  # a job submitted a moment ago is in squeue (pending, held): an empty answer means none
            found = executor.find(group.name, group.token, now - 60) or {}
        except Exception:  # noqa: BLE001 - the scheduler cannot be asked: the next submit reconciles
            return
        if found:
            executor.adopt(found, group.runs)
            have = [(keys[i], j) for i, j in sorted(found.items()) if i < len(keys)]
            _record_ids(self.m, group.token, [k for k, _ in have], [j for _, j in have], executor.name)
            self.submitted.append((group, [j for _, j in have]))
            return
        with self.m.write() as db:
            db.execute("UPDATE submissions SET state='FAILED', error=?, done_at=? WHERE token=?",
                       (str(error), now, group.token))
            db.execute(f"UPDATE runs SET status=?, reason=?, submission=NULL, updated_at=? "
                       f"WHERE key IN ({','.join('?' * len(keys))})",
                       (UNSUBMITTED, f"submission refused: {error}", now, *keys))


def _array_label(first_id: str, size: int) -> str:
    if first_id.startswith("local-"):
        return f"local runner {first_id.split('_')[0]}"
    base = first_id.split("_")[0]
    return f"job {base}" if size == 1 else f"array {base}_[0-{size - 1}]"


def _aside(path: Path, attempt: int) -> Path:
    """``x.log`` -> ``x.log.<attempt>`` (or the next free number): old evidence is kept, never deleted."""
    n = max(1, attempt)
    while True:
        target = path.with_name(f"{path.name}.{n}")
        if not target.exists():
            return target
        n += 1


def _record_ids(m: Manifest, token: str, keys: list[str], job_ids: list[str], executor: str) -> None:
    now = time.time()
    with m.write() as db:
        for key, jid in zip(keys, job_ids):
            base, _, task = jid.partition("_") if not jid.startswith("local-") else (jid.rsplit("_", 1)[0], "_",
                                                                                    jid.rsplit("_", 1)[1])
            db.execute("UPDATE runs SET job_id=?, array_job_id=?, array_task=?, status=?, reason='', executor=?, "
                       "submitted_at=?, updated_at=? WHERE key=? AND submission=?",
                       (jid, base if task else None, int(task) if task else None, Status.PENDING, executor, now, now,
                        key, token))
        db.execute("UPDATE submissions SET state='SUBMITTED', job_id=?, done_at=? WHERE token=?",
                   (job_ids[0].rsplit("_", 1)[0] if job_ids else None, now, token))


def reconcile(m: Manifest, executors: dict[str, Any], out=print) -> int:
    """Settle submissions an interrupted ``submit`` left as SUBMITTING: adopt the jobs the scheduler (or
    the run's own log) shows were submitted, release the rest for resubmission. Returns runs released.

    The journal's order makes this exact: (1) commit SUBMITTING, (2) move old log/marker aside,
    (3) write scripts, (4) sbatch, (5) commit job ids. A log at the run's path after step 2 can only come
    from a job of this submission; a log there before step 2 is the old one, and step 2 is finished here."""
    released = 0
    for sub in m.db.execute("SELECT * FROM submissions WHERE state = ?", (SUBMITTING,)).fetchall():
        keys = json.loads(sub["runs"])
        ex = executors.get(sub["executor"])
        found = ex.find(sub["name"], sub["token"], sub["created_at"]) if ex is not None else None
        found = found or {}
        rows = {r["key"]: r for r in m.runs(f"key IN ({','.join('?' * len(keys))})", keys)}
        have = [(k, found[i]) for i, k in enumerate(keys) if i in found]
        if have and ex is not None:
            class _R:  # the group's runs as the executor needs them: script paths by index
                def __init__(self, row):
                    self.script = m.abspath(row["script"])
            ex.adopt(found, [_R(rows[k]) for k in keys])
        if have:
            _record_ids(m, sub["token"], [k for k, _ in have], [j for _, j in have], sub["executor"])
            out(f"  reconciled interrupted submission {sub['token']}: {len(have)} of {len(keys)} runs had been "
                f"submitted ({_array_label(have[0][1], len(keys))})")
        adopted, back = [], []
        for i, k in enumerate(keys):
            r = rows.get(k)
            if i in found or r is None or r["submission"] != sub["token"] or r["status"] != SUBMITTING:
                continue
            log, marker = m.abspath(r["log"]), m.abspath(r["marker"])
            pending_moves = _unfinished_moves(m, k, sub["created_at"])
            if pending_moves:  # interrupted before step 2 ended: these files are the old attempt's
                for src, dst in pending_moves:
                    os.replace(src, dst)
                back.append(k)
            elif log.exists() or marker.exists():  # the script started: submitted, never submit it twice
                adopted.append((k, (read_marker(marker) or {}).get("job")))
            else:
                back.append(k)
        now = time.time()
        with m.write() as db:
            for k, jid in adopted:
                db.execute("UPDATE runs SET status=?, reason=?, job_id=?, submitted_at=?, updated_at=? WHERE key=?",
                           (Status.RUNNING, "adopted after an interrupted submit (found by its log)", jid,
                            sub["created_at"], now, k))
            for k in back:
                db.execute("UPDATE runs SET status=?, reason='', submission=NULL, attempt=MAX(attempt-1, 0), "
                           "updated_at=? WHERE key=?", (UNSUBMITTED, now, k))
            db.execute("UPDATE submissions SET state=?, done_at=? WHERE token=?",
                       ("SUBMITTED" if have or adopted else "ABANDONED", now, sub["token"]))
        if adopted:
            out(f"  interrupted submission {sub['token']}: {len(adopted)} runs found by their logs")
        if back:
            out(f"  interrupted submission {sub['token']}: {len(back)} runs never reached the scheduler; "
                "they will be submitted")
        released += len(back)
    return released


def _unfinished_moves(m: Manifest, key: str, since: float) -> list[tuple[Path, Path]]:
    row = m.db.execute("SELECT moved FROM attempts WHERE run_key=? AND recorded_at>=? ORDER BY recorded_at DESC "
                       "LIMIT 1", (key, since)).fetchone()
    if row is None:
        return []
    moves = []
    for kind, rel in json.loads(row["moved"]).items():
        dst = m.abspath(rel)
        src = dst.with_name(dst.name.rsplit(".", 1)[0])
        if src.exists() and not dst.exists():
            moves.append((src, dst))
    return moves


def make_executors(campaign_dir: Path, default: Any | None = None, jobs: int = 1) -> dict[str, Any]:
    """Executors able to answer for runs in this campaign (by executor name); submitit stays unimported."""
    from dlperf_slurm.executors import LocalExecutor, SlurmExecutor
    from dlperf_slurm.scheduler import Slurm

    exs: dict[str, Any] = {"local": LocalExecutor(campaign_dir, jobs)}
    if Slurm.available():
        exs["slurm"] = SlurmExecutor(campaign_dir)
    if default is not None:
        exs[default.name] = default
    return exs


def choose_executor(kind: str, campaign_dir: Path, jobs: int = 1):
    from dlperf_slurm.executors import LocalExecutor, SlurmExecutor
    from dlperf_slurm.scheduler import Slurm

    if kind == "auto":
        kind = "slurm" if Slurm.available() else "local"
    if kind == "slurm":
        return SlurmExecutor(campaign_dir)
    if kind == "local":
        return LocalExecutor(campaign_dir, jobs)
    raise UserError(f"unknown executor {kind!r}: expected auto, slurm or local")


@dataclass
class SubmitReport:
    submitted: int = 0
    groups: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    kept: dict[str, int] = field(default_factory=dict)  # why runs were not submitted: status -> count
    calls: int = 0


def submit(matrix, campaign_dir: str | os.PathLike, executor, *, retry_failed: bool = False, force: bool = False,
           dry_run: bool = False, template_dir: str | None = None, out=print) -> SubmitReport:
    """Submit what is missing (and failed runs with ``retry_failed``, everything finished with ``force``).

    Never submits a run that is SUBMITTING, PENDING, RUNNING or OK (unless forced)."""
    from dlperf_slurm import matrix as matrix_mod

    cdir = Path(campaign_dir).resolve()
    runs = matrix_mod.runs(matrix, cdir)
    seen: dict[str, Any] = {}
    for r in runs:
        if r.key in seen and seen[r.key].cell != r.cell:
            raise UserError(f"{matrix.path}: two cells share the id {r.cell.id} (they differ in "
                            f"{_cell_difference(seen[r.key].cell, r.cell)}), so their runs would share one log; "
                            "split them into two matrices")
        seen[r.key] = r
    report = SubmitReport()
    if dry_run:
        return _dry_run(matrix, cdir, runs, executor, retry_failed, force, out)
    if hasattr(executor, "preflight"):
        executor.preflight()
    with campaign_lock(cdir):
        m = Manifest(cdir, create=True)
        try:
            m.sync(matrix, runs)
            exs = make_executors(cdir, executor, getattr(executor, "jobs", 1))
            reconcile(m, exs, out)
            refresh(m, exs)
            rows = {r["key"]: r for r in m.runs()}
            todo = _to_submit(runs, {k: r["status"] for k, r in rows.items()}, retry_failed, force, report)
            groups, skipped = executor.plan(matrix, todo)
            report.skipped = [(r.key, why) for r, why in skipped]
            if skipped:
                now = time.time()
                with m.write() as db:
                    for r, why in skipped:
                        if rows[r.key]["status"] == UNSUBMITTED:
                            db.execute("UPDATE runs SET reason=?, updated_at=? WHERE key=?",
                                       (f"skipped by the {executor.name} executor: {why}", now, r.key))
            n = sum(g.size for g in groups)
            _summarize_plan(matrix, runs, report, n, len(groups), executor, out)
            journal = _Journal(m, matrix, template_dir, out)
            try:
                executor.submit(groups, journal)
            finally:
                report.submitted = sum(g.size for g, _ in journal.submitted)
                report.groups = len(journal.submitted)
                report.calls = sum(executor.calls.values())
        finally:
            m.close()
    return report


def _to_submit(runs, statuses: dict[str, str], retry_failed: bool, force: bool, report: SubmitReport) -> list:
    """The runs to submit: never submitted, failed (with ``retry_failed``), or finished (with ``force``); the
    others are counted in ``report.kept`` by status. Pending, running and SUBMITTING runs are never chosen."""
    todo = []
    for r in runs:
        st = statuses.get(r.key, UNSUBMITTED)
        if st == UNSUBMITTED or (st in FAILURES and (retry_failed or force)) or (st == Status.OK and force):
            todo.append(r)
        else:
            report.kept[st] = report.kept.get(st, 0) + 1
    return todo


def _cell_difference(a, b) -> str:
    da, db = a.as_dict(), b.as_dict()
    diff = [k for k in da if da[k] != db[k]] or ["launcher" if a.launcher != b.launcher else "?"]
    return ", ".join(diff)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _summarize_plan(matrix, runs, report: SubmitReport, n: int, ngroups: int, executor, out) -> None:
    kept = ", ".join(f"{v} {k}" for k, v in sorted(report.kept.items()))
    out(f"campaign {matrix.name}: {len(runs)} runs ({len(matrix.cells)} cells x {matrix.measure.repeats} repeats); "
        f"submitting {n} as " + (_plural(ngroups, 'job array', 'job arrays') if executor.name == 'slurm'
                                 else _plural(ngroups, 'local runner', 'local runners'))
        + (f"; not resubmitted: {kept}" if kept else ""))
    failed = sum(v for k, v in report.kept.items() if k in FAILURES)
    if failed:
        out(f"  {failed} failed runs are kept as they are: --retry-failed resubmits them")
    for key, why in report.skipped:
        out(f"  skipped {key}: {why}")


def _dry_run(matrix, cdir: Path, runs, executor, retry_failed: bool, force: bool, out) -> SubmitReport:
    report = SubmitReport()
    statuses: dict[str, str] = {}
    if (cdir / MANIFEST).exists():
        m = Manifest(cdir)
        statuses = {r["key"]: r["status"] for r in m.runs()}
        m.close()
    todo = _to_submit(runs, statuses, retry_failed, force, report)
    if executor.name == "slurm" and getattr(executor, "_max_array", None) is None:
        try:
            executor.max_group_size()
        except UserError as err:
            executor._max_array = 1001
            out(f"(cannot read MaxArraySize: {err}; assuming 1001)")
    groups, skipped = executor.plan(matrix, todo)
    report.skipped = [(r.key, why) for r, why in skipped]
    _summarize_plan(matrix, runs, report, sum(g.size for g in groups), len(groups), executor, out)
    out("dry run: nothing is written or submitted. " + (_plural(len(groups), "sbatch call", "sbatch calls")
        if executor.name == "slurm" else _plural(len(groups), "local runner", "local runners")) + " would be made:")
    for i, g in enumerate(groups, 1):
        out(f"[{i}] {executor.describe(g)}")
        for t, run in enumerate(g.runs):
            out(f"      task {t}: {run.key} -> {run.script}")
    report.groups = len(groups)
    return report


# ================================================================================================ status, wait, cancel


def counts(rows: Iterable[Any]) -> dict[str, int]:
    c: dict[str, int] = {}
    for r in rows:
        c[r["status"]] = c.get(r["status"], 0) + 1
    return c


ORDER = [Status.OK, Status.RUNNING, Status.PENDING, Status.REQUEUED, SUBMITTING, Status.FAILED, Status.OOM,
         Status.TIMEOUT, Status.NODE_FAIL, Status.CANCELLED, Status.PREEMPTED, Status.LAUNCH_FAILED, UNSUBMITTED]


def _fmt_counts(c: dict[str, int]) -> str:
    keys = [k for k in ORDER if c.get(k)] + sorted(k for k in c if k not in ORDER and c[k])
    return "  ".join(f"{k} {c[k]}" for k in keys)


def progress_line(c: dict[str, int], width: int = 30) -> str:
    total = sum(v for k, v in c.items() if k != UNSUBMITTED) or 1
    done = sum(v for k, v in c.items() if k in FINAL)
    ok = c.get(Status.OK, 0)
    n_ok = int(width * ok / total)
    n_bad = int(width * done / total) - n_ok
    bar = "#" * n_ok + "x" * max(0, n_bad)
    bar += "." * (width - len(bar))
    return f"[{bar}] {done}/{total} done  {_fmt_counts(c)}"


def wait(m: Manifest, executors: dict[str, Any], out=None, poll: Backoff | None = None,
         timeout: float | None = None) -> dict[str, int]:
    """Poll (with back-off, one batched query per round) until no run is active; shows a progress bar."""
    poll = poll or Backoff(1.0, 30.0)
    stream = sys.stderr
    tty = stream.isatty()
    last = None
    deadline = None if timeout is None else time.time() + timeout
    while True:
        if refresh(m, executors):
            poll.reset()
        c = counts(m.runs())
        line = progress_line(c)
        if out is not None:
            if line != last:
                out(line)
        elif tty:
            stream.write("\r" + line + " " * 5)
            stream.flush()
        elif line != last:
            print(line, file=stream, flush=True)
        last = line
        if not any(c.get(k) for k in (*ACTIVE, SUBMITTING)):
            if tty and out is None:
                stream.write("\n")
            return c
        if deadline and time.time() > deadline:
            raise UserError(f"timed out after {timeout:.0f} s waiting for the campaign's runs")
        time.sleep(poll.next())


def cancel(campaign_dir: Path, pending_only: bool = False, out=print) -> int:
    """Cancel the campaign's queued (and, unless pending_only, running) runs with one scancel."""
    with campaign_lock(campaign_dir):
        m = Manifest(campaign_dir)
        try:
            exs = make_executors(campaign_dir)
            reconcile(m, exs, out)
            refresh(m, exs)
            wanted = (Status.PENDING, Status.REQUEUED) if pending_only else tuple(ACTIVE)
            rows = [r for r in m.runs() if r["status"] in wanted and r["job_id"]]
            by_ex: dict[str, list[str]] = {}
            for r in rows:
                by_ex.setdefault(r["executor"] or "slurm", []).append(r["job_id"])
            now = time.time()
            with m.write() as db:
                db.executemany("UPDATE runs SET cancel_requested_at=? WHERE key=?", [(now, r["key"]) for r in rows])
            for name, ids in by_ex.items():
                ex = exs.get(name)
                if ex is None:
                    raise UserError(f"cannot cancel {len(ids)} {name} runs: no {name} client on this machine")
                ex.cancel(ids)
            out(f"cancel requested for {len(rows)} runs" + (f" ({', '.join(f'{k}: {len(v)}' for k, v in by_ex.items())})"
                                                           if by_ex else ""))
            return len(rows)
        finally:
            m.close()


def status_report(m: Manifest, show_runs: bool = True, notes: Sequence[str] = ()) -> str:
    from tabulate import tabulate

    rows = m.runs()
    lines = [f"campaign {m.meta('name') or m.dir.name} ({m.dir}): {len(rows)} runs: {_fmt_counts(counts(rows))}"]
    lines += [f"  {n}" for n in notes]
    if any(r["status"] == SUBMITTING for r in rows):
        lines.append("  a submit was interrupted: run `submit` again with the same matrix to settle SUBMITTING runs "
                     "(nothing is submitted twice)")
    cells: dict[str, list[Any]] = {}
    for r in rows:
        cells.setdefault(r["cell_id"], []).append(r)
    table = []
    for cell_id, rs in cells.items():
        c = counts(rs)
        n_ok = c.get(Status.OK, 0)
        worst = next((k for k in ORDER[::-1] if c.get(k) and k in FAILURES), "")
        table.append([cell_id, f"{n_ok}/{len(rs)}", _fmt_counts(c), worst])
    lines.append("")
    lines.append(tabulate(table, headers=["cell", "ok/n", "statuses", "failure"], tablefmt="github"))
    if show_runs:
        lines.append("")
        run_rows = [[r["key"], r["job_id"] or "-", r["status"], _short(r["reason"])] for r in rows]
        lines.append(tabulate(run_rows, headers=["run", "job", "status", "reason"], tablefmt="github"))
    return "\n".join(lines)


def _short(text: str, n: int = 110) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= n else text[: n - 3] + "..."


# ================================================================================================ CLI


def find_campaign(logs: str, name: str | None) -> Path:
    """A campaign folder: a path, a name under ``logs``, or (no name) the most recently updated one."""
    if name:
        p = Path(name)
        if (p / MANIFEST).exists():
            return p.resolve()
        q = Path(logs) / name
        if (q / MANIFEST).exists():
            return q.resolve()
        raise UserError(f"no campaign {name!r}: neither {p} nor {q} holds a {MANIFEST}")
    found = sorted(Path(logs).glob(f"*/{MANIFEST}"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise UserError(f"no campaign under {logs}/: submit a matrix first")
    return found[-1].parent.resolve()


def cmd_submit(args: argparse.Namespace) -> int:
    from dlperf_slurm import matrix as matrix_mod

    m = matrix_mod.load(args.matrix, site=False if args.no_site else args.site)
    if args.campaign:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", args.campaign):
            raise UserError(f"--campaign {args.campaign!r}: use letters, digits, '_', '.', '-'")
        m.name = args.campaign
    cdir = Path(args.logs) / m.name
    if args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    executor = choose_executor(args.executor, cdir.resolve(), args.jobs)
    if args.executor == "auto" and executor.name == "local" and not args.dry_run:
        print("dlperf-slurm: no sbatch on PATH: running locally (--executor local); "
              f"{args.jobs} at a time", file=sys.stderr)
    report = submit(m, cdir, executor, retry_failed=args.retry_failed, force=args.force, dry_run=args.dry_run,
                    template_dir=args.templates)
    if args.dry_run:
        return 0
    print(f"submitted {report.submitted} runs with "
          + (_plural(report.calls, "sbatch call", "sbatch calls") if executor.name == "slurm"
             else _plural(report.calls, "local runner", "local runners"))
          + f"; manifest: {cdir / MANIFEST}")
    if not args.wait:
        return 0
    man = Manifest(cdir)
    try:
        final = wait(man, make_executors(cdir.resolve(), executor, args.jobs))
        print(status_report(man, show_runs=False, notes=executor.notes()))
    finally:
        man.close()
    bad = sum(v for k, v in final.items() if k in FAILURES)
    return 0 if not bad else 1


def cmd_status(args: argparse.Namespace) -> int:
    cdir = find_campaign(args.logs, args.campaign)
    m = Manifest(cdir)
    try:
        exs = make_executors(cdir)
        if not args.no_refresh:
            refresh(m, exs)
        notes = []
        used = {r["executor"] for r in m.runs() if r["executor"]}
        for name in sorted(used):
            if name in exs:
                notes += exs[name].notes()
            else:
                notes.append(f"{name}: no client on this machine; statuses from the manifest and exit markers")
        print(status_report(m, show_runs=not args.cells, notes=notes))
    finally:
        m.close()
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    cancel(find_campaign(args.logs, args.campaign), pending_only=args.pending)
    return 0
