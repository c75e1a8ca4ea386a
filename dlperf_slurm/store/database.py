"""The results store: every ``collect`` adds its cells to one database, so a center's campaigns over months are
one record (``history``, ``compare --base last-good``, the HTML report's trend plots read it back).

One row per (system, partition, campaign, cell), the campaign by its identity (:mod:`dlperf_slurm.campaign.identity`:
two campaigns of one name are two campaigns), with its name, matrix, folder and when it ran; the cell's suite,
median with its confidence interval, runs planned and OK, status, the OK runs' throughputs and every run's status
(so ``history`` can judge two campaigns with ``compare``'s own rule), the System section's versions, and when it
was first and last collected. Collecting a campaign again updates its rows (an upsert on that key), never
duplicates them.

Schema 3 (this one) keys campaigns by identity and keeps the OK runs' energy figures (``ok_energy``, samples per
joule) beside their throughputs. An older store is migrated when first opened, in one transaction, every row kept:
a schema-2 store gains the energy column, empty for its rows; in a schema-1 store (keyed by name) a row's identity
becomes ``legacy:<name>`` and its run time its first collect's, and the first collect of a campaign of that name on
that system and partition takes those rows over as its own (:meth:`Store.add`): collecting the old campaign again
updates them, as before.

Where it lives (:func:`resolve`): ``--store URL``, else ``$DLPERF_SLURM_STORE``, else the site file's
``[store] url``, else SQLite at ``$XDG_DATA_HOME/dlperf_slurm/results.sqlite`` (``~/.local/share/...``). A URL
``postgresql://user@host:port/db`` names a PostgreSQL database (a center's shared store; driver: psycopg 3, the
``store`` extra); ``sqlite:///path`` or a plain path an SQLite file (stdlib).

This module owns all of the store's SQL: the other modules see :class:`StoredCell` records
(:mod:`dlperf_slurm.store.filing` makes them from a collect).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf_slurm.disk import private_file
from dlperf_slurm.errors import UserError

ENV = "DLPERF_SLURM_STORE"
SCHEMA_VERSION = 3
TABLE = "dlperf_cells"
LEGACY = "legacy:"  # a schema-1 row's identity: legacy:<campaign name>

#: the key, then the columns after it, in order; ``first_collected`` is set once, the others on every collect
_KEY = ("system_name", "partition_name", "campaign_key", "cell_id")
_VALUES = ("campaign", "matrix", "campaign_where", "ran_at", "suite", "unit", "median", "ci_low", "ci_high", "n",
           "n_ok", "status", "ok_values", "statuses", "versions", "first_collected", "collected_at", "ok_energy")
_V1_COLUMNS = ("system_name", "partition_name", "campaign", "cell_id", "suite", "unit", "median", "ci_low", "ci_high",
               "n", "n_ok", "status", "ok_values", "statuses", "versions", "first_collected", "collected_at")


def _create(table: str) -> str:
    return f"""CREATE TABLE {table} (
    system_name TEXT NOT NULL,
    partition_name TEXT NOT NULL,
    campaign_key TEXT NOT NULL,
    cell_id TEXT NOT NULL,
    campaign TEXT NOT NULL,
    matrix TEXT NOT NULL,
    campaign_where TEXT NOT NULL,
    ran_at TEXT NOT NULL,
    suite TEXT NOT NULL,
    unit TEXT NOT NULL,
    median DOUBLE PRECISION,
    ci_low DOUBLE PRECISION,
    ci_high DOUBLE PRECISION,
    n INTEGER NOT NULL,
    n_ok INTEGER NOT NULL,
    status TEXT NOT NULL,
    ok_values TEXT NOT NULL,
    statuses TEXT NOT NULL,
    versions TEXT NOT NULL,
    first_collected TEXT NOT NULL,
    collected_at TEXT NOT NULL,
    ok_energy TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (system_name, partition_name, campaign_key, cell_id))"""


_INDEXES = (f"CREATE INDEX IF NOT EXISTS {TABLE}_cell ON {TABLE} (cell_id, system_name, partition_name)",
            f"CREATE INDEX IF NOT EXISTS {TABLE}_campaign ON {TABLE} (campaign, system_name, partition_name)")

#: schema 1 -> 2, every row kept: built beside the old table, which then goes (the new one takes its name)
_FROM_V1 = (_create(f"{TABLE}_v2"),
            f"INSERT INTO {TABLE}_v2 ({', '.join(_KEY + _VALUES)}) SELECT system_name, partition_name, "
            f"'{LEGACY}' || campaign, cell_id, campaign, '', '', first_collected, "
            f"{', '.join(c for c in _V1_COLUMNS if c not in ('system_name', 'partition_name', 'campaign', 'cell_id'))}"
            f", '[]' FROM {TABLE}",
            f"DROP TABLE {TABLE}",
            f"ALTER TABLE {TABLE}_v2 RENAME TO {TABLE}")
#: schema 2 -> 3: the OK runs' energy figures (samples per joule), none for the rows stored before
_FROM_V2 = (f"ALTER TABLE {TABLE} ADD COLUMN ok_energy TEXT NOT NULL DEFAULT '[]'",)

_UPSERT = (f"INSERT INTO {TABLE} ({', '.join(_KEY + _VALUES)}) VALUES ({', '.join(['%s'] * len(_KEY + _VALUES))}) "
           f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET "
           + ", ".join(f"{c} = excluded.{c}" for c in _VALUES if c != "first_collected"))


@dataclass(frozen=True, kw_only=True)
class StoredCell:
    """One cell of one campaign on one system, as the store holds it."""

    system: str
    partition: str
    campaign: str  # its name
    cell_id: str
    suite: str
    unit: str
    median: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    n_ok: int
    status: str
    ok_values: tuple[float, ...]  # the OK runs' throughputs
    statuses: tuple[str, ...]  # every run's status
    ok_energy: tuple[float, ...] = ()  # the OK runs' samples (tokens) per joule, where they were measured
    versions: dict[str, str] = field(default_factory=dict)  # driver, CUDA, NCCL, framework, container, ...
    first_collected: str = ""  # ISO 8601 UTC
    collected_at: str = ""
    campaign_key: str = ""  # its identity (campaignid.CampaignId.key); "" is taken as its name
    matrix: str = ""  # the matrix it ran (campaignid); "" for a row stored before matrices were
    where: str = ""  # its folder
    ran_at: str = ""  # when it ran, ISO 8601 UTC ("" : its first collect)

    @property
    def system_label(self) -> str:
        return f"{self.system}:{self.partition}" if self.partition else (self.system or "-")

    @property
    def key(self) -> str:
        return self.campaign_key or self.campaign

    @property
    def when(self) -> str:
        """When it ran (its first collect for a row that does not say)."""
        return self.ran_at or self.first_collected


# ================================================================================================ where


def default_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dlperf_slurm" / "results.sqlite"


def resolve(url: str | None = None, site: dict[str, Any] | None = None) -> str:
    """The store's URL: ``url`` (``--store``), ``$DLPERF_SLURM_STORE``, the site file's ``[store] url``, or the
    default SQLite file."""
    if url:
        return url
    if os.environ.get(ENV):
        return os.environ[ENV]
    site_url = ((site or {}).get("store") or {}).get("url")
    if site_url:
        if not isinstance(site_url, str):
            raise UserError(f"site file [store] url: expected a string such as postgresql://user@host/db, "
                            f"got {site_url!r}")
        return site_url
    return str(default_path())


def url_for(args: Any) -> str:
    """The store a command's ``--store``, ``--site`` and ``--no-site`` name (:func:`resolve`)."""
    from dlperf_slurm.matrix.sitefile import read_site

    site: dict[str, Any] = {}
    if not (getattr(args, "store", None) or os.environ.get(ENV) or getattr(args, "no_site", False)):
        site = read_site(getattr(args, "site", None)).data
    return resolve(getattr(args, "store", None), site)


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def describe(url: str) -> str:
    """The URL without its password (``user:***@host``, ``password=***``), for messages; any URL, split by hand:
    one that urllib cannot split (``[bad``, a port that is no number) is the one a user mistyped."""
    import re

    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    userinfo, at, host = netloc.rpartition("@")
    if sep and at and ":" in userinfo:
        rest = f"{userinfo.partition(':')[0]}:***@{host}{slash}{path}"
    return scheme + sep + re.sub(r"(password=)[^&]*", r"\1***", rest) if sep else url


# ============================================================================================ the store


class Store:
    """An open store (a context manager): :meth:`add`, :meth:`cells`, :meth:`campaigns`."""

    def __init__(self, url: str):
        self.url = url
        self.postgres = is_postgres(url)
        try:
            self.conn = self._connect()
            self._migrate()
        except self.errors() as err:  # no server, a bad password, an unwritable file, not a database
            raise UserError(f"results store {describe(url)}: cannot open it: {self._said(err)}") from None

    def errors(self) -> tuple[type[BaseException], ...]:
        """What the driver raises for what a user or a server can cause."""
        if self.postgres:
            try:
                import psycopg
            except ImportError:  # _connect says so
                return (OSError,)
            return (psycopg.Error, OSError)
        return (sqlite3.Error, OSError)

    def _connect(self) -> Any:
        if self.postgres:
            try:
                import psycopg
            except ImportError:
                raise UserError(f"results store {describe(self.url)}: PostgreSQL needs psycopg 3: "
                                "pip install 'dlperf_slurm[store]'") from None
            return psycopg.connect(self.url, connect_timeout=10)
        if "://" in self.url and not self.url.startswith("sqlite:///"):  # a typo'd scheme is no file name
            raise UserError(f"results store {describe(self.url)}: not a store URL: expected postgresql://user@host/db, "
                            "sqlite:///PATH or a file path")
        path = Path(self.url.removeprefix("sqlite:///") if self.url.startswith("sqlite:///") else self.url)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.absolute() == default_path().absolute():  # the user's own results: nobody else's to read (#32)
            private_file(path)
        conn = sqlite3.connect(path, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    @contextlib.contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """A driver error (the server gone mid-query, a damaged file) as one line: ``cannot <what>: ...``."""
        try:
            yield
        except self.errors() as err:
            raise UserError(f"results store {describe(self.url)}: cannot {what}: {self._said(err)}") from None

    def _said(self, err: BaseException) -> str:
        """The driver's first line, the URL in it (libpq quotes a URL it cannot parse) without its password."""
        return _first_line(err).replace(self.url, describe(self.url))

    def _sql(self, text: str) -> str:
        return text if self.postgres else text.replace("%s", "?")

    def _migrate(self) -> None:
        """Create the tables, or bring a schema-1 store to this schema (:data:`_FROM_V1`), in one transaction that
        holds the store's write lock (two collects opening a schema-1 store at once: one migrates, one waits)."""
        try:
            self._migrate_in(self.conn.cursor())
        except BaseException:
            with contextlib.suppress(*self.errors()):
                self.conn.rollback()
            raise

    def _migrate_in(self, cur: Any) -> None:
        cur.execute("SELECT COUNT(*) FROM " + ("information_schema.tables WHERE table_schema = current_schema() AND "
                                               "table_name" if self.postgres else "sqlite_master WHERE name")
                    + f" IN ('dlperf_schema', '{TABLE}')")
        if cur.fetchone()[0] == 2:
            cur.execute("SELECT version FROM dlperf_schema")
            if cur.fetchall() == [(SCHEMA_VERSION,)]:  # the common case: no write, no lock (a reader stays one)
                self.conn.commit()
                return
        if not self.postgres:
            cur.execute("BEGIN IMMEDIATE")
        cur.execute("CREATE TABLE IF NOT EXISTS dlperf_schema (version INTEGER NOT NULL)")
        if self.postgres:
            cur.execute("LOCK TABLE dlperf_schema IN EXCLUSIVE MODE")
        cur.execute("SELECT version FROM dlperf_schema")
        row = cur.fetchone()
        if row is None:
            cur.execute(self._sql("INSERT INTO dlperf_schema (version) VALUES (%s)"), (SCHEMA_VERSION,))
        elif row[0] > SCHEMA_VERSION:
            raise UserError(f"results store {describe(self.url)}: schema version {row[0]} is newer than this "
                            f"dlperf_slurm's ({SCHEMA_VERSION}): upgrade dlperf_slurm")
        elif row[0] in (1, 2):
            for stmt in _FROM_V1 if row[0] == 1 else _FROM_V2:  # schema 1's rebuild makes schema 3's table at once
                cur.execute(stmt)
            cur.execute(self._sql("UPDATE dlperf_schema SET version = %s"), (SCHEMA_VERSION,))
        for stmt in (_create(f"IF NOT EXISTS {TABLE}"), *_INDEXES):
            cur.execute(stmt)
        self.conn.commit()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def add(self, cells: Sequence[StoredCell]) -> tuple[int, int]:
        """Upsert ``cells`` in one transaction: ``(added, updated)``. A campaign's first collect on a system and
        partition takes over the rows a schema-1 store kept under its name (``legacy:<name>``)."""
        if not cells:
            return 0, 0
        keys = {(c.system, c.partition, c.key, c.cell_id) for c in cells}
        known = set()
        with self._failing("add the cells"):
            cur = self.conn.cursor()
            for system, partition, key, name in {(c.system, c.partition, c.key, c.campaign) for c in cells}:
                where = "system_name = %s AND partition_name = %s AND campaign_key = %s"
                cur.execute(self._sql(f"SELECT COUNT(*) FROM {TABLE} WHERE {where}"), (system, partition, key))
                if not cur.fetchone()[0]:  # never collected under its identity: the rows of a schema-1 store?
                    cur.execute(self._sql(f"UPDATE {TABLE} SET campaign_key = %s WHERE {where}"),
                                (key, system, partition, LEGACY + name))
                cur.execute(self._sql(f"SELECT cell_id FROM {TABLE} WHERE {where}"), (system, partition, key))
                known |= {(system, partition, key, r[0]) for r in cur.fetchall()}
            cur.executemany(self._sql(_UPSERT), [_params(c) for c in cells])
            self.conn.commit()
        updated = len(keys & known)
        return len(keys) - updated, updated

    def namesakes(self, cell: StoredCell) -> list[tuple[str, str, str]]:
        """The other campaigns stored under ``cell``'s campaign name on its system and partition:
        ``(identity, folder, ran at)`` each, oldest first."""
        with self._failing("read it"):
            cur = self.conn.cursor()
            cur.execute(self._sql(f"SELECT DISTINCT campaign_key, campaign_where, ran_at FROM {TABLE} WHERE "
                                  "campaign = %s AND system_name = %s AND partition_name = %s AND campaign_key <> %s "
                                  "ORDER BY ran_at, campaign_key"),
                        (cell.campaign, cell.system, cell.partition, cell.key))
            return [(r[0], r[1], r[2]) for r in cur.fetchall()]

    def cells(self, *, pattern: str | None = None, system: str | None = None, partition: str | None = None,
              since: str | None = None, campaign: str | None = None, matrix: str | None = None,
              cell_ids: Collection[str] | None = None) -> list[StoredCell]:
        """The stored cells, the campaign that ran first first: ``pattern`` a glob over cell ids (``*resnet50*``),
        ``since`` an ISO date (ran on or after it), ``campaign`` a name, ``matrix`` the campaigns of one matrix,
        ``cell_ids`` these cells only (a collect's trend: the database picks them, by its index, from a center's
        years of campaigns)."""
        where, params = [], []
        if cell_ids is not None:
            if not cell_ids:
                return []
            where.append(f"cell_id IN ({', '.join(['%s'] * len(cell_ids))})")
            params += sorted(cell_ids)
        for column, value in (("system_name", system), ("partition_name", partition), ("campaign", campaign),
                              ("matrix", matrix)):
            if value is not None:
                where.append(f"{column} = %s")
                params.append(value)
        if since:
            where.append("ran_at >= %s")
            params.append(since)
        if pattern:
            where.append("cell_id LIKE %s ESCAPE '\\'")
            params.append(_like(pattern))
        sql = (f"SELECT {', '.join(_KEY + _VALUES)} FROM {TABLE}" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY ran_at, campaign_key, cell_id")
        with self._failing("read it"):
            cur = self.conn.cursor()
            cur.execute(self._sql(sql), params)
            rows = cur.fetchall()
        return [_cell(row) for row in rows]

    def count(self) -> int:
        with self._failing("read it"):
            cur = self.conn.cursor()
            cur.execute(f"SELECT COUNT(*) FROM {TABLE}")
            return int(cur.fetchone()[0])


def _like(glob: str) -> str:
    """A shell glob (``*``, ``?``) as a LIKE pattern, LIKE's own wildcards escaped."""
    out = []
    for ch in glob:
        out.append({"*": "%", "?": "_", "%": "\\%", "_": "\\_", "\\": "\\\\"}.get(ch, ch))
    return "".join(out)


def _params(c: StoredCell) -> tuple[Any, ...]:
    return (c.system, c.partition, c.key, c.cell_id, c.campaign, c.matrix, c.where, c.when, c.suite, c.unit,
            c.median, c.ci_low, c.ci_high, c.n, c.n_ok, c.status, json.dumps(list(c.ok_values)),
            json.dumps(list(c.statuses)), json.dumps(c.versions, sort_keys=True), c.first_collected, c.collected_at,
            json.dumps(list(c.ok_energy)))


def _cell(row: Sequence[Any]) -> StoredCell:
    (system, partition, key, cell_id, campaign, matrix, where, ran_at, suite, unit, median, ci_low, ci_high, n, n_ok,
     status, ok_values, statuses, versions, first, last, ok_energy) = row
    return StoredCell(system=system, partition=partition, campaign=campaign, cell_id=cell_id, suite=suite,
                      unit=unit, median=median, ci_low=ci_low, ci_high=ci_high, n=n, n_ok=n_ok, status=status,
                      ok_values=tuple(json.loads(ok_values)), statuses=tuple(json.loads(statuses)),
                      versions=json.loads(versions), first_collected=first, collected_at=last, campaign_key=key,
                      matrix=matrix, where=where, ran_at=ran_at, ok_energy=tuple(json.loads(ok_energy or "[]")))


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


def split_system(value: str | None) -> tuple[str, str]:
    """``NAME[:PARTITION]`` as ``(name, partition)``."""
    if not value:
        return "", ""
    name, _, partition = value.partition(":")
    return name, partition
