"""A campaign's manifest: ``logs/<campaign>/manifest.sqlite`` records every run (cell, repeat, script, log,
marker, scheduler, job id, array task, status, reason, the log's verdict, timestamps, earlier attempts) and every
submission. SQLite gives atomic transactions (a submit killed with SIGKILL leaves a consistent manifest),
readers while jobs run, and safe concurrent writers; ``submit`` and ``cancel`` also hold ``logs/<campaign>/.lock``
so two of them never interleave.

The read API other stages use: :func:`load_campaign` (typed :class:`RunRecord` rows), :func:`find_campaign`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from dlperf_slurm.errors import UserError
from dlperf_slurm.files import atomic_write
from dlperf_slurm.model import Cell, Matrix, Run, Status, status_of

MANIFEST = "manifest.sqlite"
#: collect's memory of the logs it parsed (dlperf_slurm.parsecache): per log, its stat when read, what it was read
#: with (parser version, suite, window) and the parser's result
PARSE_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS parse_cache (
    log TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, inode INTEGER NOT NULL,
    fingerprint TEXT NOT NULL, seconds REAL NOT NULL, result TEXT NOT NULL
);
"""
LOCK = ".lock"
MATRIX_COPY = "matrix.toml"
SCHEMA_VERSION = 3  # 3: parse_cache (collect's memory of the logs it read)

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
    cancel_requested_at REAL, time_limit_s REAL, log_status TEXT, slurm_out TEXT
);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status);
CREATE TABLE IF NOT EXISTS submissions (
    token TEXT PRIMARY KEY, name TEXT NOT NULL, executor TEXT NOT NULL, state TEXT NOT NULL,
    runs TEXT NOT NULL, job_id TEXT, options TEXT, error TEXT, created_at REAL NOT NULL, done_at REAL,
    held INTEGER NOT NULL DEFAULT 0, released_at REAL
);
CREATE TABLE IF NOT EXISTS attempts (
    run_key TEXT NOT NULL, attempt INTEGER NOT NULL, job_id TEXT, executor TEXT, status TEXT, reason TEXT,
    submitted_at REAL, ended_at REAL, moved TEXT NOT NULL, recorded_at REAL NOT NULL
);
""" + PARSE_CACHE_SCHEMA

# tables added since schema 1 (CREATE on an older manifest)
_ADDED_TABLES = (PARSE_CACHE_SCHEMA,)

# columns added since schema 1 (ALTER TABLE on an older manifest)
_ADDED = {"runs": {"log_status": "TEXT", "slurm_out": "TEXT"},
          "submissions": {"held": "INTEGER NOT NULL DEFAULT 0", "released_at": "REAL"}}

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
        if version is not None and int(version) < SCHEMA_VERSION:
            self._upgrade()

    def _upgrade(self) -> None:
        with self.write() as db:
            for create in _ADDED_TABLES:
                db.execute(create)
            for table, cols in _ADDED.items():
                have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
                for col, decl in cols.items():
                    if col not in have:
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {col} {decl}")
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                       (json.dumps(SCHEMA_VERSION),))

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
    def repeats(self) -> dict[str, int]:
        """cell id -> the repeats the manifest holds for it (more than the matrix's after ``--top-up``)."""
        return {r[0]: r[1] + 1 for r in self.db.execute("SELECT cell_id, MAX(repeat) FROM runs GROUP BY cell_id")}

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
    def sync(self, matrix: Matrix, runs: Sequence[Run]) -> int:
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
            meta = {"name": matrix.name, "suite": ", ".join(s.name for s in matrix.suites), "matrix_path": str(Path(matrix.path).resolve()),
                    "matrix_sha": sha, "measure": {"repeats": matrix.measure.repeats,
                                                   "warmup_steps": matrix.measure.warmup_steps,
                                                   "measure_steps": matrix.measure.measure_steps},
                    "suite_options": matrix.options, "time_limit": matrix.slurm.time,
                    "dropped": [{"cell": d.cell.as_dict(), "reason": d.reason} for d in matrix.dropped],
                    "system": matrix.system.label if matrix.system is not None else None}
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
                            self.rel(r.marker), Status.UNSUBMITTED, now, now, limit_s))
                added += 1
        return added


# ================================================================================================ read API


@dataclass(kw_only=True)
class RunRecord:
    """One run as the manifest knows it (paths are absolute)."""

    key: str
    cell_id: str
    repeat: int
    cell: Cell
    status: Status
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
    log_status: Status | None = None  # the log's verdict, once a log has been read (status or collect)
    sched_state: str | None = None  # the scheduler's own last word for the job (e.g. COMPLETED)
    slurm_out: Path | None = None  # the scheduler's own output file for this run (kill banners)
    previous: list[dict[str, Any]] = field(default_factory=list)  # earlier attempts, oldest first


@dataclass(kw_only=True)
class CampaignInfo:
    name: str
    dir: Path
    suite: str  # the suite's name (several: joined by ", ")
    measure: dict[str, int]  # repeats, warmup_steps, measure_steps
    options: dict[str, dict[str, Any]]  # suite name -> its options
    matrix_path: str
    matrix_copy: Path
    time_limit: str
    created_at: float | None
    cells: list[Cell]
    dropped: list[dict[str, Any]]
    runs: list[RunRecord]


    def options_for(self, suite: str) -> dict[str, Any]:
        """The options a suite of the campaign ran with."""
        return dict(self.options.get(suite, {}))


def suite_options(m: "Manifest") -> dict[str, dict[str, Any]]:
    """Suite name -> options, as the manifest keeps them (a campaign from before several suites per matrix
    kept one suite's options under ``options``)."""
    return m.meta("suite_options") or {m.meta("suite") or "": m.meta("options") or {}}


def load_campaign(campaign_dir: str | os.PathLike) -> CampaignInfo:
    """Everything the manifest holds, read-only (no scheduler query: run ``status`` to refresh)."""
    m = Manifest(campaign_dir)
    try:
        cells = {r["id"]: Cell.from_dict(json.loads(r["data"]))
                 for r in m.db.execute("SELECT id, data FROM cells ORDER BY ord")}
        history: dict[str, list[dict[str, Any]]] = {}
        for a in m.db.execute("SELECT * FROM attempts ORDER BY recorded_at"):
            d = dict(a)
            d["moved"] = {k: str(m.abspath(v)) for k, v in json.loads(a["moved"]).items()}
            history.setdefault(a["run_key"], []).append(d)
        runs = [RunRecord(key=r["key"], cell_id=r["cell_id"], repeat=r["repeat"], cell=cells[r["cell_id"]],
                          status=Status(r["status"]), reason=r["reason"], executor=r["executor"], job_id=r["job_id"],
                          array_job_id=r["array_job_id"], array_task=r["array_task"], attempt=r["attempt"],
                          exit_code=r["exit_code"], nodes=r["nodes"], script=m.abspath(r["script"]),
                          log=m.abspath(r["log"]), marker=m.abspath(r["marker"]), submitted_at=r["submitted_at"],
                          ended_at=r["ended_at"], updated_at=r["updated_at"],
                          log_status=status_of(r["log_status"]) if r["log_status"] else None,
                          slurm_out=Path(r["slurm_out"]) if r["slurm_out"] else None, sched_state=r["sched_state"],
                          previous=history.get(r["key"], []))
                for r in m.runs()]
        return CampaignInfo(name=m.meta("name") or m.dir.name, dir=m.dir, suite=m.meta("suite") or "",
                            measure=m.meta("measure") or {}, options=suite_options(m),
                            matrix_path=m.meta("matrix_path") or "", matrix_copy=m.dir / MATRIX_COPY,
                            time_limit=m.meta("time_limit") or "", created_at=m.meta("created_at"),
                            cells=list(cells.values()), dropped=m.meta("dropped") or [], runs=runs)
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


# ================================================================================================ finding


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
    found = sorted(campaigns(logs), key=lambda p: (p / MANIFEST).stat().st_mtime)
    if not found:
        raise UserError(f"no campaign under {logs}/: submit a matrix first")
    return found[-1].resolve()


def campaigns(logs: str) -> list[Path]:
    """The campaign folders under ``logs`` (those holding a manifest), by name."""
    return sorted(p.parent for p in Path(logs).glob(f"*/{MANIFEST}"))


