"""The manifest's tables (SQLite DDL) and how an older manifest is brought up to date: what
:class:`dlperf_slurm.campaign.manifest.Manifest` creates and upgrades (it alone runs these statements); how it is opened
(:func:`connect`, read-only too) and checked (:func:`integrity_problem`, for ``doctor``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dlperf_slurm import disk

#: collect's memory of the logs it parsed (dlperf_slurm.collect.parsecache): per log, its stat when read, what it was
#: read
#: with (parser version, suite, window) and the parser's result
PARSE_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS parse_cache (
    log TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, inode INTEGER NOT NULL,
    fingerprint TEXT NOT NULL, seconds REAL NOT NULL, result TEXT NOT NULL
);
"""
SCHEMA_VERSION = 6  # 3: parse_cache (collect's memory of the logs it read); 4: runs.log_id; 5: each run's window;
#                     6: runs.slurm_energy_j (sacct's ConsumedEnergyRaw)

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
    cancel_requested_at REAL, time_limit_s REAL, log_status TEXT, slurm_out TEXT, log_id TEXT,
    warmup_steps INTEGER, measure_steps INTEGER, slurm_energy_j REAL
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
_ADDED = {"runs": {"log_status": "TEXT", "slurm_out": "TEXT", "log_id": "TEXT", "warmup_steps": "INTEGER",
                  "measure_steps": "INTEGER", "slurm_energy_j": "REAL"},
          "submissions": {"held": "INTEGER NOT NULL DEFAULT 0", "released_at": "REAL"}}


def connect(path: Path, read_only: bool) -> sqlite3.Connection:
    """The manifest's connection; read-only: SQLite's ``mode=ro``, else (a WAL database whose ``-shm`` this user
    can neither find nor make) ``immutable=1``, which reads the file as it is on disk."""
    if not read_only:
        return sqlite3.connect(path, timeout=60, isolation_level=None)
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=60, isolation_level=None)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError as err:
        if disk.damaged(err):
            raise
        db.close()
    return sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True, timeout=60, isolation_level=None)


def integrity_problem(path: Path) -> str:
    """'' when the manifest at ``path`` opens and passes SQLite's integrity check, else what is wrong (``doctor``).
    An error that is not the file's (a full disk, a read-only folder) is raised: the file may well be sound."""
    if not path.exists():
        return "missing"
    disk.OPENED.append(path)
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            bad = [r[0] for r in db.execute("PRAGMA integrity_check").fetchall() if r[0] != "ok"]
            db.execute("SELECT COUNT(*) FROM runs").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError as err:
        if not disk.damaged(err):
            raise
        return str(err)
    return "; ".join(bad[:3])
