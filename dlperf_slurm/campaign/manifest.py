"""A campaign's manifest: ``logs/<campaign>/manifest.sqlite`` records every run (cell, repeat, script, log,
marker, scheduler, job id, array task, status, reason, the log's verdict, timestamps, earlier attempts) and every
submission. SQLite gives atomic transactions (a submit killed with SIGKILL leaves a consistent manifest),
readers while jobs run, and safe concurrent writers; ``submit`` and ``cancel`` also hold ``logs/<campaign>/.lock``
so two of them never interleave.

This module owns the manifest's SQL (with the parse cache's store, :mod:`dlperf_slurm.collect.parsecache`): the other
stages read and write through its API, never with SQL of their own. Read: :func:`load_campaign` (typed
:class:`RunRecord` rows), :meth:`Manifest.runs` (typed filters), ``cells``, ``executors``, ``submissions``;
write, one transaction each: :meth:`Manifest.record_submission`, ``record_ids``, ``refuse_submission``,
``close_submission``, ``mark_released``, ``set_reasons``, ``settle``, ``set_verdicts``, ``request_cancel``.
Where campaigns live and their lock: :mod:`dlperf_slurm.campaign.folders`; the typed rows:
:mod:`dlperf_slurm.campaign.records`; the tables: :mod:`dlperf_slurm.campaign.schema`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from dlperf_slurm import disk
from dlperf_slurm.campaign import revisions
from dlperf_slurm.campaign.folders import (
    MANIFEST,
    journal_mode,
    why_read_only,
)
from dlperf_slurm.campaign.records import RUN_SELECT, CampaignInfo, Decision, ManifestRun, RunRecord
from dlperf_slurm.campaign.schema import (
    _ADDED,
    _ADDED_TABLES,
    _SCHEMA,
    SCHEMA_VERSION,
    connect,
)
from dlperf_slurm.disk import atomic_write, log_identity
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix import measure
from dlperf_slurm.model.cell import Cell, Matrix, Run
from dlperf_slurm.model.status import FINAL, Status, status_of

MATRIX_COPY = "matrix.toml"

# ================================================================================================ manifest


class Manifest:
    """The campaign's SQLite manifest. Every write is one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, campaign_dir: str | os.PathLike, create: bool = False, read_only: bool | None = None):
        """``read_only``: open it for reading alone (None: when this user cannot write the campaign, a colleague's or
        on a read-only mount, or its disk is full: ``read_only_why`` says which); then :meth:`write` refuses, and an
        older schema is read as it is, not upgraded."""
        self.dir = Path(campaign_dir).resolve()
        self.path = self.dir / MANIFEST
        if not self.path.exists() and not create:
            raise UserError(f"{self.dir}: no campaign here (no {MANIFEST}); submit a matrix first")
        self.read_only_why = "" if create else why_read_only(self.dir) if read_only is None else (
            "opened read-only" if read_only else "")
        self.read_only = bool(self.read_only_why)
        if not self.read_only:
            self.dir.mkdir(parents=True, exist_ok=True)
        disk.OPENED.append(self.path)
        self.db = connect(self.path, self.read_only)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA busy_timeout = 60000")
        if self.read_only:
            return
        if create or self.meta("schema_version") is None:  # None: a creation a kill cut short (nothing recorded)
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
        if self.read_only:  # the CLI's one line (storage.storage_problem): the disk is full, or make it writable
            raise sqlite3.OperationalError(("database or disk is full" if "full" in self.read_only_why else
                                            "attempt to write a readonly database") + f" ({self.read_only_why})")
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # a full disk may fail the rollback too: the first error counts
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
    def changed_logs(self) -> list[ManifestRun]:
        """Ended runs whose log is not the one their verdict was read from (appended to, replaced, deleted,
        made unreadable, or read before log identities were kept): ``status`` decides them again."""
        rows = self.db.execute("SELECT * FROM runs WHERE log_status IS NOT NULL OR log_id IS NOT NULL ORDER BY ord")
        return [run for run in map(ManifestRun.from_row, rows)
                if status_of(run.status) in FINAL and log_identity(self.abspath(run.log)) != run.log_id]

    def repeats(self) -> dict[str, int]:
        """cell id -> the repeats the manifest holds for it (more than the matrix's after ``--top-up``)."""
        return {r[0]: r[1] + 1 for r in self.db.execute("SELECT cell_id, MAX(repeat) FROM runs GROUP BY cell_id")}

    def runs(self, *, keys: Sequence[str] | None = None, statuses: Iterable[str] | None = None,
             verdict_missing: bool = False) -> list[ManifestRun]:
        """The runs' records in matrix order: all, or those with one of ``keys``, one of ``statuses``, or
        (``verdict_missing``) no log verdict recorded yet."""
        where, args = _where(keys=keys, statuses=statuses, verdict_missing=verdict_missing)
        plain = self.db.cursor()
        plain.row_factory = None  # tuples, each field by its place (10^5 rows: a third of the time by name)
        try:
            rows = plain.execute(f"SELECT {RUN_SELECT} FROM runs{where} ORDER BY ord", args).fetchall()
        except sqlite3.OperationalError as err:  # an older schema's table, read without its upgrade (read-only)
            if "no such column" not in str(err):
                raise
            return [ManifestRun.from_row(r) for r in self.db.execute(f"SELECT * FROM runs{where} ORDER BY ord", args)]
        return [ManifestRun.from_values(r) for r in rows]

    def statuses(self) -> list[tuple[str, str]]:
        """(cell id, status) of every run, in matrix order: what an exit code needs, without the whole records."""
        return [(r[0], r[1]) for r in self.db.execute("SELECT cell_id, status FROM runs ORDER BY ord")]

    def has_runs(self, *, statuses: Iterable[str]) -> bool:
        """Whether any run has one of ``statuses``."""
        where, args = _where(statuses=statuses)
        return self.db.execute(f"SELECT 1 FROM runs{where} LIMIT 1", args).fetchone() is not None

    def executors(self) -> set[str]:
        """The backends the campaign's runs went to."""
        return {r[0] for r in self.db.execute("SELECT DISTINCT executor FROM runs WHERE executor IS NOT NULL")}

    def cell_ids(self) -> list[str]:
        """The cells' ids, in matrix order (without reading the cells)."""
        return [r[0] for r in self.db.execute("SELECT id FROM cells ORDER BY ord")]

    def cells(self) -> dict[str, Cell]:
        """cell id -> its cell, in matrix order."""
        return {r["id"]: Cell.from_dict(json.loads(r["data"]))
                for r in self.db.execute("SELECT id, data FROM cells ORDER BY ord")}

    def attempts(self) -> list[sqlite3.Row]:
        """Every run's earlier attempts, oldest first."""
        return self.db.execute("SELECT * FROM attempts ORDER BY recorded_at").fetchall()

    def last_moves(self, key: str, since: float) -> dict[str, str] | None:
        """What the run's latest attempt recorded at or after ``since`` moved aside (kind -> path relative to the
        campaign), None without such an attempt."""
        row = self.db.execute("SELECT moved FROM attempts WHERE run_key=? AND recorded_at>=? ORDER BY recorded_at "
                              "DESC LIMIT 1", (key, since)).fetchone()
        return None if row is None else json.loads(row["moved"])

    def submissions(self, *, state: str) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM submissions WHERE state = ?", (state,)).fetchall()

    def held_tokens(self) -> set[str]:
        """The submissions this tool submitted with a hold."""
        return {r[0] for r in self.db.execute("SELECT token FROM submissions WHERE held = 1")}

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
        window = (matrix.measure.warmup_steps, matrix.measure.measure_steps)
        added = 0
        with self.write() as db:
            meta: dict[str, Any] = {"name": matrix.name, "suite": ", ".join(s.name for s in matrix.suites),
                                    "matrix_path": str(Path(matrix.path).resolve()),
                    "matrix_sha": sha, "measure": measure.record(matrix.measure),
                    "suite_options": matrix.options, "time_limit": matrix.slurm.time,
                    "dropped": [{"cell": d.cell.as_dict(), "reason": d.reason} for d in matrix.dropped],
                    "system": matrix.system.label if matrix.system is not None else None,
                    revisions.META: revisions.identity(matrix)}
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
                           "updated_at, time_limit_s, warmup_steps, measure_steps) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           (r.key, r.cell.id, r.repeat, base + i, self.rel(r.script), self.rel(r.log),
                            self.rel(r.marker), Status.UNSUBMITTED, now, now, limit_s, *window))
                added += 1
        return added

    # -- the write API: every change to a run or a submission after sync, each one transaction

    def record_submission(self, *, token: str, name: str, executor: str, options: Any, held: bool,
                          runs: Sequence[tuple[str, str | None, dict[str, str]]], now: float,
                          window: tuple[int, int] | None = None) -> None:
        """The journal's first step: each run SUBMITTING in submission ``token`` (with ``window``, the warm-up and
        measured steps its script runs), its previous attempt kept (when it had one or files were moved aside), and
        the submission itself. ``runs``: ``(key, the scheduler's output file, what is moved aside: kind -> path
        relative to the campaign)``."""
        keys = [k for k, _out, _moved in runs]
        with self.write() as db:
            rows = {r["key"]: r for r in db.execute(*_select_runs(keys))}
            for key, out, moved in runs:
                row = rows[key]
                if row["attempt"] or moved:
                    db.execute("INSERT INTO attempts(run_key, attempt, job_id, executor, status, reason, submitted_at, "
                               "ended_at, moved, recorded_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                               (key, row["attempt"], row["job_id"], row["executor"], row["status"], row["reason"],
                                row["submitted_at"], row["ended_at"], json.dumps(moved), now))
                db.execute("UPDATE runs SET status=?, reason='', executor=?, submission=?, job_id=NULL, "
                           "array_job_id=NULL, array_task=NULL, attempt=attempt+1, exit_code=NULL, sched_state=NULL, "
                           "nodes=NULL, submitted_at=NULL, ended_at=NULL, cancel_requested_at=NULL, log_status=NULL, "
                           "slurm_out=?, updated_at=?, warmup_steps=COALESCE(?, warmup_steps), "
                           "measure_steps=COALESCE(?, measure_steps) WHERE key=?",
                           (Status.SUBMITTING, executor, token, out or None, now, *(window or (None, None)), key))
            db.execute("INSERT INTO submissions(token, name, executor, state, runs, options, created_at, held) "
                       "VALUES (?,?,?,?,?,?,?,?)",
                       (token, name, executor, Status.SUBMITTING, json.dumps(keys), json.dumps(options), now,
                        int(held)))

    def record_ids(self, *, token: str, executor: str, ids: Sequence[tuple[str, str, str | None, int | None]],
                   job_id: str | None) -> None:
        """The journal's last step: the submission's runs PENDING with their job ids, ``ids``: ``(key, job id,
        array job id, array task)``; ``job_id``: the submission's (its array's)."""
        now = time.time()
        with self.write() as db:
            for key, jid, array_id, task in ids:
                db.execute("UPDATE runs SET job_id=?, array_job_id=?, array_task=?, status=?, reason='', executor=?, "
                           "submitted_at=?, updated_at=? WHERE key=? AND submission=?",
                           (jid, array_id, task, Status.PENDING, executor, now, now, key, token))
            db.execute("UPDATE submissions SET state='SUBMITTED', job_id=?, done_at=? WHERE token=?",
                       (job_id, now, token))

    def refuse_submission(self, token: str, keys: Sequence[str], error: str, now: float) -> None:
        """A submission the scheduler refused: FAILED, and its runs UNSUBMITTED with the cause."""
        with self.write() as db:
            db.execute("UPDATE submissions SET state='FAILED', error=?, done_at=? WHERE token=?", (error, now, token))
            db.execute(f"UPDATE runs SET status=?, reason=?, submission=NULL, updated_at=? "
                       f"WHERE key IN ({','.join('?' * len(keys))})",
                       (Status.UNSUBMITTED, f"submission refused: {error}", now, *keys))

    def close_submission(self, token: str, *, adopted: Sequence[tuple[str, str | None]], back: Sequence[str],
                         submitted_at: float, state: str) -> None:
        """An interrupted submission settled: the ``adopted`` runs ``(key, job id)`` RUNNING (their logs show they
        started), the runs put ``back`` UNSUBMITTED, the submission in ``state``."""
        now = time.time()
        with self.write() as db:
            for k, jid in adopted:
                db.execute("UPDATE runs SET status=?, reason=?, job_id=?, submitted_at=?, updated_at=? WHERE key=?",
                           (Status.RUNNING, "adopted after an interrupted submit (found by its log)", jid,
                            submitted_at, now, k))
            for k in back:
                db.execute("UPDATE runs SET status=?, reason='', submission=NULL, attempt=MAX(attempt-1, 0), "
                           "updated_at=? WHERE key=?", (Status.UNSUBMITTED, now, k))
            db.execute("UPDATE submissions SET state=?, done_at=? WHERE token=?", (state, now, token))

    def mark_released(self, tokens: Iterable[str]) -> None:
        """The hold these submissions were submitted with is released."""
        with self.write() as db:
            db.executemany("UPDATE submissions SET released_at=? WHERE token=?", [(time.time(), t) for t in tokens])

    def set_reasons(self, reasons: Mapping[str, str], now: float) -> None:
        """Why each run (key -> reason) stays as it is (e.g. skipped by the executor)."""
        with self.write() as db:
            for key, why in reasons.items():
                db.execute("UPDATE runs SET reason=?, updated_at=? WHERE key=?", (why, now, key))

    def settle(self, decisions: Sequence[Decision], now: float) -> None:
        """Record what ``refresh`` decided for each run (an end time and a log verdict never go away)."""
        with self.write() as db:
            db.executemany("UPDATE runs SET status=?, reason=?, exit_code=?, sched_state=?, nodes=?, "
                           "ended_at=COALESCE(?, ended_at), updated_at=?, log_status=COALESCE(?, log_status), "
                           "log_id=COALESCE(?, log_id), slurm_energy_j=COALESCE(?, slurm_energy_j) WHERE key=?",
                           [(d.status, d.reason, d.exit_code, d.sched_state, d.nodes, d.ended_at, now, d.log_status,
                             d.log_id, d.slurm_energy_j, d.key) for d in decisions])

    def set_verdicts(self, verdicts: Sequence[Decision]) -> None:
        """Record the log verdicts ``collect`` read for ended runs that had none, with the status decided with
        them (the exit code too, unless one is recorded)."""
        with self.write() as db:
            db.executemany("UPDATE runs SET status=?, reason=?, log_status=?, exit_code=COALESCE(exit_code, ?), "
                           "log_id=? WHERE key=? AND log_status IS NULL",
                           [(d.status, d.reason, d.log_status, d.exit_code, d.log_id, d.key) for d in verdicts])

    def mark_found(self, found: Sequence[tuple[str, str, str | None, str, int, float, float, str]]) -> None:
        """``doctor``: runs a rebuilt manifest found by their files, each (status, reason, job id, executor,
        attempts, submitted at, now, key), to be decided again by ``status``."""
        with self.write() as db:
            db.executemany("UPDATE runs SET status=?, reason=?, job_id=?, executor=?, attempt=?, submitted_at=?, "
                           "updated_at=? WHERE key=?", found)

    def request_cancel(self, keys: Sequence[str], now: float) -> None:
        with self.write() as db:
            db.executemany("UPDATE runs SET cancel_requested_at=? WHERE key=?", [(now, k) for k in keys])


def _where(*, keys: Sequence[str] | None = None, statuses: Iterable[str] | None = None,
           verdict_missing: bool = False) -> tuple[str, list[Any]]:
    """A WHERE clause over runs for :meth:`Manifest.runs`' filters, and its arguments."""
    parts, args = [], []
    if keys is not None:
        parts.append(f"key IN ({','.join('?' * len(keys))})")
        args += list(keys)
    if statuses is not None:
        wanted = [str(s) for s in statuses]
        parts.append(f"status IN ({','.join('?' * len(wanted))})")
        args += wanted
    if verdict_missing:
        parts.append("log_status IS NULL")
    return (" WHERE " + " AND ".join(parts) if parts else ""), args


def _select_runs(keys: Sequence[str]) -> tuple[str, list[Any]]:
    where, args = _where(keys=keys)
    return f"SELECT * FROM runs{where} ORDER BY ord", args


# ================================================================================================ read API


def suite_options(m: "Manifest") -> dict[str, dict[str, Any]]:
    """Suite name -> options, as the manifest keeps them (a campaign from before several suites per matrix
    kept one suite's options under ``options``)."""
    return m.meta("suite_options") or {m.meta("suite") or "": m.meta("options") or {}}


def load_campaign(campaign_dir: str | os.PathLike) -> CampaignInfo:
    """Everything the manifest holds, read-only (no scheduler query: run ``status`` to refresh)."""
    m = Manifest(campaign_dir)
    try:
        cells = m.cells()
        history: dict[str, list[dict[str, Any]]] = {}
        for a in m.attempts():
            d = dict(a)
            d["moved"] = {k: str(m.abspath(v)) for k, v in json.loads(a["moved"]).items()}
            history.setdefault(a["run_key"], []).append(d)
        runs = [RunRecord(key=r.key, cell_id=r.cell_id, repeat=r.repeat, cell=cells[r.cell_id],
                          status=Status(r.status), reason=r.reason, executor=r.executor, job_id=r.job_id,
                          array_job_id=r.array_job_id, array_task=r.array_task, attempt=r.attempt,
                          exit_code=r.exit_code, nodes=r.nodes, script=m.abspath(r.script),
                          log=m.abspath(r.log), marker=m.abspath(r.marker), submitted_at=r.submitted_at,
                          ended_at=r.ended_at, updated_at=r.updated_at,
                          log_status=status_of(r.log_status) if r.log_status else None, log_id=r.log_id,
                          slurm_out=Path(r.slurm_out) if r.slurm_out else None, sched_state=r.sched_state,
                          window=None if r.warmup_steps is None or r.measure_steps is None else (
                              r.warmup_steps, r.measure_steps), slurm_energy_j=r.slurm_energy_j,
                          previous=history.get(r.key, []))
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
