"""The results store: every ``collect`` adds its cells to one database, so a center's campaigns over months are
one record (``history``, ``compare --base last-good``, the HTML report's trend plots read it back).

One row per (system, partition, campaign, cell): its suite, median with its confidence interval, runs planned and
OK, status, the OK runs' throughputs and every run's status (so ``history`` can judge two campaigns with
``compare``'s own rule), the System section's versions, and when it was first and last collected. Collecting a
campaign again updates its rows (an upsert on that key), never duplicates them.

Where it lives (:func:`resolve`): ``--store URL``, else ``$DLPERF_SLURM_STORE``, else the site file's
``[store] url``, else SQLite at ``$XDG_DATA_HOME/dlperf_slurm/results.sqlite`` (``~/.local/share/...``). A URL
``postgresql://user@host:port/db`` names a PostgreSQL database (a center's shared store; driver: psycopg 3, the
``store`` extra); ``sqlite:///path`` or a plain path an SQLite file (stdlib).

This module owns all of the store's SQL: the other modules see :class:`StoredCell` records.
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

from dlperf_slurm.errors import UserError
from dlperf_slurm.sysversions import partition_of, system_section, versions_of

ENV = "DLPERF_SLURM_STORE"
SCHEMA_VERSION = 1
TABLE = "dlperf_cells"

#: the columns after the key, in order; ``first_collected`` is set once, the others on every collect
_KEY = ("system_name", "partition_name", "campaign", "cell_id")
_VALUES = ("suite", "unit", "median", "ci_low", "ci_high", "n", "n_ok", "status", "ok_values", "statuses",
           "versions", "first_collected", "collected_at")

_DDL = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    system_name TEXT NOT NULL,
    partition_name TEXT NOT NULL,
    campaign TEXT NOT NULL,
    cell_id TEXT NOT NULL,
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
    PRIMARY KEY (system_name, partition_name, campaign, cell_id))""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_cell ON {TABLE} (cell_id, system_name, partition_name)",
    "CREATE TABLE IF NOT EXISTS dlperf_schema (version INTEGER NOT NULL)",
)

_UPSERT = (f"INSERT INTO {TABLE} ({', '.join(_KEY + _VALUES)}) VALUES ({', '.join(['%s'] * len(_KEY + _VALUES))}) "
           f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET "
           + ", ".join(f"{c} = excluded.{c}" for c in _VALUES if c != "first_collected"))


@dataclass(frozen=True, kw_only=True)
class StoredCell:
    """One cell of one campaign on one system, as the store holds it."""

    system: str
    partition: str
    campaign: str
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
    versions: dict[str, str] = field(default_factory=dict)  # driver, CUDA, NCCL, framework, container, ...
    first_collected: str = ""  # ISO 8601 UTC
    collected_at: str = ""

    @property
    def system_label(self) -> str:
        return f"{self.system}:{self.partition}" if self.partition else (self.system or "-")


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
    from dlperf_slurm.sitefile import default_site_file, load_site

    site: dict[str, Any] = {}
    if not (getattr(args, "store", None) or os.environ.get(ENV) or getattr(args, "no_site", False)):
        path = Path(args.site) if getattr(args, "site", None) else default_site_file()
        site = load_site(path)[0] if path else {}
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
        cur = self.conn.cursor()
        for stmt in _DDL:
            cur.execute(stmt)
        cur.execute("SELECT version FROM dlperf_schema")
        row = cur.fetchone()
        if row is None:
            cur.execute(self._sql("INSERT INTO dlperf_schema (version) VALUES (%s)"), (SCHEMA_VERSION,))
        elif row[0] > SCHEMA_VERSION:
            raise UserError(f"results store {describe(self.url)}: schema version {row[0]} is newer than this "
                            f"dlperf_slurm's ({SCHEMA_VERSION}): upgrade dlperf_slurm")
        self.conn.commit()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def add(self, cells: Sequence[StoredCell]) -> tuple[int, int]:
        """Upsert ``cells`` in one transaction: ``(added, updated)``."""
        if not cells:
            return 0, 0
        keys = {(c.system, c.partition, c.campaign, c.cell_id) for c in cells}
        known = set()
        with self._failing("add the cells"):
            cur = self.conn.cursor()
            for system, partition, campaign in {k[:3] for k in keys}:
                cur.execute(self._sql(f"SELECT cell_id FROM {TABLE} WHERE system_name = %s AND partition_name = %s "
                                      "AND campaign = %s"), (system, partition, campaign))
                known |= {(system, partition, campaign, r[0]) for r in cur.fetchall()}
            cur.executemany(self._sql(_UPSERT), [_params(c) for c in cells])
            self.conn.commit()
        updated = len(keys & known)
        return len(keys) - updated, updated

    def cells(self, *, pattern: str | None = None, system: str | None = None, partition: str | None = None,
              since: str | None = None, campaign: str | None = None,
              cell_ids: Collection[str] | None = None) -> list[StoredCell]:
        """The stored cells, oldest campaign first: ``pattern`` a glob over cell ids (``*resnet50*``),
        ``since`` an ISO date (first collected on or after it), ``cell_ids`` these cells only (a collect's trend:
        the database picks them, by its index, from a center's years of campaigns)."""
        where, params = [], []
        if cell_ids is not None:
            if not cell_ids:
                return []
            where.append(f"cell_id IN ({', '.join(['%s'] * len(cell_ids))})")
            params += sorted(cell_ids)
        for column, value in (("system_name", system), ("partition_name", partition), ("campaign", campaign)):
            if value is not None:
                where.append(f"{column} = %s")
                params.append(value)
        if since:
            where.append("first_collected >= %s")
            params.append(since)
        if pattern:
            where.append("cell_id LIKE %s ESCAPE '\\'")
            params.append(_like(pattern))
        sql = (f"SELECT {', '.join(_KEY + _VALUES)} FROM {TABLE}" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY first_collected, campaign, cell_id")
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


def open_store(url: str) -> Store:
    return Store(url)


def _like(glob: str) -> str:
    """A shell glob (``*``, ``?``) as a LIKE pattern, LIKE's own wildcards escaped."""
    out = []
    for ch in glob:
        out.append({"*": "%", "?": "_", "%": "\\%", "_": "\\_", "\\": "\\\\"}.get(ch, ch))
    return "".join(out)


def _params(c: StoredCell) -> tuple[Any, ...]:
    return (c.system, c.partition, c.campaign, c.cell_id, c.suite, c.unit, c.median, c.ci_low, c.ci_high, c.n,
            c.n_ok, c.status, json.dumps(list(c.ok_values)), json.dumps(list(c.statuses)),
            json.dumps(c.versions, sort_keys=True), c.first_collected, c.collected_at)


def _cell(row: Sequence[Any]) -> StoredCell:
    (system, partition, campaign, cell_id, suite, unit, median, ci_low, ci_high, n, n_ok, status, ok_values,
     statuses, versions, first, last) = row
    return StoredCell(system=system, partition=partition, campaign=campaign, cell_id=cell_id, suite=suite,
                      unit=unit, median=median, ci_low=ci_low, ci_high=ci_high, n=n, n_ok=n_ok, status=status,
                      ok_values=tuple(json.loads(ok_values)), statuses=tuple(json.loads(statuses)),
                      versions=json.loads(versions), first_collected=first, collected_at=last)


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


# ======================================================================================= from a collect


def now_iso() -> str:
    """UTC, to the microsecond: campaigns collected in one second keep their order."""
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def records(result: Any, *, system: str = "", partition: str = "", system_section: dict[str, Any] | None = None,
            when: str | None = None) -> list[StoredCell]:
    """A collect's cells as store records: one per cell with a status (a cell not yet run is left out); its OK
    values and statuses are the side ``compare`` reads from the same runs (:func:`compare.sides_from_runs`)."""
    from dlperf_slurm.compare import sides_from_runs

    when = when or now_iso()
    by_campaign: dict[str, list[Any]] = {}
    for r in result.runs:
        by_campaign.setdefault(r.campaign, []).append(r)
    sides = {name: sides_from_runs({"cell_id": r.cell_id, "status": r.status, "throughput": r.throughput}
                                   for r in runs) for name, runs in by_campaign.items()}
    versions = {name: versions_of(system_section, runs) for name, runs in by_campaign.items()}
    out = []
    for c in result.cells:
        side = sides.get(c.campaign, {}).get(c.cell_id)
        if side is None:
            continue
        out.append(StoredCell(system=system, partition=partition, campaign=c.campaign, cell_id=c.cell_id,
                              suite=c.suite, unit=c.unit, median=c.median, ci_low=c.ci_low, ci_high=c.ci_high,
                              n=c.n, n_ok=c.n_ok, status=str(c.status), ok_values=side.values,
                              statuses=side.statuses, versions=versions.get(c.campaign, {}),
                              first_collected=when, collected_at=when))
    return out


def split_system(value: str | None) -> tuple[str, str]:
    """``NAME[:PARTITION]`` as ``(name, partition)``."""
    if not value:
        return "", ""
    name, _, partition = value.partition(":")
    return name, partition


def placement(result: Any, system: str | None) -> tuple[str, str, dict[str, Any] | None]:
    """Where a collect's cells go in the store: ``(system, partition, System object)``; the partition, when
    ``NAME[:PARTITION]`` names none, is the one the System object's runs ran in."""
    name, partition = split_system(system)
    section = system_section(result)
    return name, partition or partition_of(section), section


def record_collect(result: Any, url: str, system: str | None = None) -> tuple[int, int]:
    """Add a collect's cells to the store at ``url``: ``(added, updated)``."""
    name, partition, section = placement(result, system)
    rows = records(result, system=name, partition=partition, system_section=section)
    with Store(url) as st:
        return st.add(rows)
