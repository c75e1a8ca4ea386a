"""What ``collect`` remembers between runs, so that a log is parsed once: per log, its size, mtime and inode when
it was read, what it was read with (the parser version, the suite, the window and options: the *fingerprint*),
how long that took, and the suite parser's :class:`~dlperf_slurm.model.result.RunResult` (the log's verdict and
figures).

A run's log that still matches all of it is not read again: its result is rebuilt from the cache, exactly (a
result that JSON cannot carry exactly is not cached), and goes through the status decision like a freshly parsed
one (:mod:`dlperf_slurm.collect.runparse`; the decision also weighs the scheduler state and the exit marker, which
change
without the log). A log that grew (a running job), was replaced, or is read with another window or another parser
version is parsed again.

The cache lives in the campaign's manifest (table ``parse_cache``) for a campaign, and for anything else
(``collect --from DIR``, ``--matrix`` without a manifest) in ``.<summary>.cache.sqlite`` beside the summaries, which
also remembers what the writers last wrote (:class:`OutputState`). Both are only an optimisation: a cache that
cannot be read or written is a warning, and ``collect --no-cache`` reads every log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
import io
import json
import os
import pickle
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from dlperf_slurm import __version__
from dlperf_slurm.campaign import folders, manifest, schema
from dlperf_slurm.model.cell import Cell
from dlperf_slurm.model.result import RunResult
from dlperf_slurm.model.status import Status

#: Bump to drop every cache entry written before (any change to the parsing code does it by itself, see
#: :func:`parser_version`).
CACHE_FORMAT = 1
SIDE_FILE = ".{stem}.cache.sqlite"
_OUTPUTS_SCHEMA = "CREATE TABLE IF NOT EXISTS outputs (path TEXT PRIMARY KEY, digest TEXT NOT NULL)"


class Entry(NamedTuple):
    """One log as the cache knows it."""

    size: int
    mtime_ns: int
    inode: int
    fingerprint: str
    seconds: float  # how long the parse took (the run row's parse_seconds)
    result: str  # the RunResult, :func:`encode`d


# ============================================================================================== versions


@functools.cache
def parser_version() -> str:
    """The package version, the cache format and a digest of the source of everything that turns a log into a
    RunResult (the parsing package, every suite module, the nouns, the decision and its evidence readers,
    events): editing any of it drops the cache."""
    from dlperf_slurm import events, model, outcome, parsing, suites

    h = hashlib.sha1(f"{__version__}/{CACHE_FORMAT}".encode())
    roots = [Path(m.__file__).parent for m in (parsing, suites, model, outcome)]  # type: ignore[arg-type]
    files = sorted(p for r in roots for p in r.glob("*.py")) + [Path(events.__file__)]
    for p in files:
        with contextlib.suppress(OSError):
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def _suite_source(suite_name: str) -> str:
    """A digest of the module that defines the suite (a suite registered from outside the suites package)."""
    from dlperf_slurm import suites

    try:
        path = inspect.getsourcefile(type(suites.get(suite_name)))
        return hashlib.sha1(Path(path).read_bytes()).hexdigest()[:12] if path else ""
    except (KeyError, OSError, TypeError):
        return ""


def fingerprint(cell: Cell, warmup: int, measure: int, options: Mapping[str, Any]) -> str:
    """What a log's result depends on besides the log: the parser, the suite and what the parse context holds."""
    suite = cell.suite
    return json.dumps([parser_version(), _suite_source(suite), suite, cell.nodes, cell.gpus_per_node,
                       cell.batch_size, cell.precision, warmup, measure, options],
                      sort_keys=True, default=str, separators=(",", ":"))


# ================================================================================================ values

_FIELDS = tuple(f.name for f in dataclasses.fields(RunResult))


def encode(res: RunResult) -> str | None:
    """The result as JSON, or None when JSON would not give it back exactly (a tuple, a non-string key, ...)."""
    d = res.__dict__.copy() if len(res.__dict__) == len(_FIELDS) else {k: getattr(res, k) for k in _FIELDS}
    if not all(_exact(v) for k, v in d.items() if k != "status"):
        return None
    d["status"] = str(res.status)
    return json.dumps(d, separators=(",", ":"))


def _exact(v: Any) -> bool:
    """JSON gives ``v`` back equal and of the same types (floats by their repr, NaN and infinities included)."""
    t = type(v)
    if t is str or t is float or t is int or t is bool or v is None:
        return True
    if t is list:
        return all(_exact(x) for x in v)
    if t is dict:
        return all(type(k) is str and _exact(x) for k, x in v.items())
    return False


def decode(text: str) -> RunResult:
    return _result(json.loads(text))


def decode_all(texts: list[str]) -> list[RunResult]:
    """:func:`decode` of many, with one JSON parse."""
    return [_result(d) for d in json.loads("[" + ",".join(texts) + "]")] if texts else []


_STATUS = {s.value: s for s in Status}


def _result(d: dict[str, Any]) -> RunResult:
    d["status"] = _STATUS.get(d["status"]) or Status(d["status"])
    return RunResult(**d)


def canonical(path: str | os.PathLike) -> str:
    """The one spelling of a file's path the caches know it by, whatever spelling a user gave: absolute, its
    folder's symlinks resolved (``tree/1n1g/x.log``, ``/abs/tree/1n1g/x.log``, ``link/1n1g/x.log`` and the same
    from another working directory are one key). A folder is resolved once per collect (:meth:`Caches.known`
    forgets them); the file's own name is kept (a log that is itself a symlink stays that link)."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(_real_folder(folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)), name)


_real_folder = functools.lru_cache(maxsize=4096)(os.path.realpath)


def stat_key(path: str) -> tuple[int, int, int] | None:
    """``(size, mtime_ns, inode)`` of a file, None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


# ================================================================================================ stores


class _Store:
    """One SQLite database holding a ``parse_cache`` table; keys are the logs' :func:`canonical` paths, relative to
    ``base`` (itself resolved) when below it (a campaign moved as a whole keeps its cache), else absolute."""

    def __init__(self, base: Path):
        self.base = Path(os.path.realpath(base))
        self._below = str(self.base).rstrip(os.sep) + os.sep  # a canonical path below base starts so

    def key(self, log: str) -> str:
        """The one place a log's key is made (:meth:`base_path` is its inverse); a :func:`canonical` path is
        normalised, so its prefix says whether it is below ``base`` (``os.path.relpath`` took 40 µs a log)."""
        path = canonical(log)
        return path[len(self._below):] if path.startswith(self._below) else path

    @contextlib.contextmanager
    def _db(self, write: bool) -> Iterator[sqlite3.Connection]:
        raise NotImplementedError

    def load(self) -> dict[str, Entry]:
        with self._db(False) as db:
            try:
                rows = db.execute("SELECT log, size, mtime_ns, inode, fingerprint, seconds, result "
                                  "FROM parse_cache").fetchall()
            except sqlite3.OperationalError:  # no such table yet
                return {}
        return {self.base_path(r[0]): Entry(*r[1:]) for r in rows}

    def base_path(self, key: str) -> str:
        """The :func:`canonical` path of the log stored under ``key``."""
        return key if os.path.isabs(key) else os.path.join(self.base, key)

    def save(self, fresh: Mapping[str, Entry], keep: Iterable[str]) -> None:
        """Add the ``fresh`` entries and forget every log not in ``keep``."""
        keep_keys = {self.key(k) for k in keep}
        with self._db(True) as db:
            db.execute(schema.PARSE_CACHE_SCHEMA)
            have = {r[0] for r in db.execute("SELECT log FROM parse_cache")}
            stale = [(k,) for k in have - keep_keys]
            if stale:
                db.executemany("DELETE FROM parse_cache WHERE log = ?", stale)
            db.executemany("INSERT OR REPLACE INTO parse_cache(log, size, mtime_ns, inode, fingerprint, seconds, "
                           "result) VALUES (?,?,?,?,?,?,?)", [(self.key(k), *e) for k, e in fresh.items()])


class ManifestStore(_Store):
    """The cache in a campaign's manifest (written in one transaction, beside submit and status)."""

    def __init__(self, campaign_dir: str | os.PathLike):
        super().__init__(Path(campaign_dir))

    @contextlib.contextmanager
    def _db(self, write: bool) -> Iterator[sqlite3.Connection]:
        m = manifest.Manifest(self.base)
        try:
            if write:
                with m.write() as db:
                    yield db
            else:
                yield m.db
        finally:
            m.close()


class SideStore(_Store):
    """The cache in ``.<stem>.cache.sqlite`` beside the summaries (``--from DIR``, matrices without a manifest);
    it also keeps the writers' :class:`OutputState`."""

    def __init__(self, path: Path):
        super().__init__(path.parent)
        self.path = path

    @contextlib.contextmanager
    def _db(self, write: bool) -> Iterator[sqlite3.Connection]:
        if not write and not self.path.exists():
            empty = sqlite3.connect(":memory:")
            try:
                yield empty
            finally:
                empty.close()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            if write:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            else:
                yield db
        finally:
            db.close()


def side_file(out_dir: str | os.PathLike, stem: str) -> Path:
    return Path(out_dir) / SIDE_FILE.format(stem=stem)


# ============================================================================================ the writers


class OutputState:
    """What the writers last wrote (file -> digest of what it was made from), kept in the side file, so a summary
    whose inputs did not change is not written again."""

    def __init__(self, path: Path | None, digests: dict[str, str] | None = None):
        self.path = path
        self.before: dict[str, str] = dict(digests or {})  # as the files are (as last written)
        self.now: dict[str, str] = {}  # as this collect leaves them
        self.kept: set[str] = set()  # files this collect found current
        self.removed: list[Path] = []  # files the last collect wrote that this one no longer makes

    def begin(self) -> None:
        """Start a new round of writing (``--watch``): what the last one left is what is there."""
        if self.now:
            self.before = dict(self.now)
        self.now, self.kept, self.removed = {}, set(), []

    @classmethod
    def load(cls, path: Path) -> OutputState:
        digests: dict[str, str] = {}
        if path.exists():
            try:
                db = sqlite3.connect(path, timeout=60)
                try:
                    digests = {canonical(p): d for p, d in db.execute("SELECT path, digest FROM outputs")}
                finally:
                    db.close()
            except sqlite3.Error:
                digests = {}
        return cls(path, digests)

    def fresh(self, path: Path, digest: str) -> bool:
        """``path`` exists and was made from inputs with this digest (then it is recorded as still current).
        Files are known by their :func:`canonical` path: ``--out summaries`` and ``--out /abs/summaries`` are one."""
        key = canonical(path)
        if self.before.get(key) == digest and os.path.exists(key):
            self.now[key] = digest
            self.kept.add(key)
            return True
        return False

    def record(self, path: Path, digest: str) -> None:
        self.now[canonical(path)] = digest

    def is_kept(self, path: Path) -> bool:
        """This collect found ``path`` current and did not write it."""
        return canonical(path) in self.kept

    def files(self, prefix: str) -> list[Path]:
        """The files recorded last time with a digest that starts with ``prefix``, in the order recorded."""
        return [Path(p) for p, d in self.before.items() if d.startswith(prefix)]

    def save(self) -> None:
        if self.path is None or (self.now == self.before and self.path.exists()):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute(_OUTPUTS_SCHEMA)
            db.execute("DELETE FROM outputs")
            db.executemany("INSERT INTO outputs(path, digest) VALUES (?, ?)", sorted(self.now.items()))
            db.execute("COMMIT")
        finally:
            db.close()


def digest(*parts: Any) -> str:
    """A digest of what a summary is made from (rows, collections): equal values give equal digests (pickled
    without its memo, which would depend on which objects are shared)."""
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=4)
    p.fast = True  # no memo
    try:
        p.dump(parts)
        data = buf.getvalue()
    except (pickle.PicklingError, TypeError, AttributeError, ValueError):
        data = repr(parts).encode()
    return hashlib.sha1(data).hexdigest()


def warn(what: str, err: BaseException) -> None:
    print(f"dlperf-slurm: warning: {what} ({type(err).__name__}: {err}); collect goes on without it",
          file=sys.stderr)


# ============================================================================================== a collect


class Caches:
    """The parse caches one collect reads and writes: each campaign's manifest for its runs, the side file beside
    the summaries for every other source. ``read=False`` (``--no-cache``): every log is parsed, and the caches are
    written anew."""

    def __init__(self, collections: Iterable[Any], side: Path, read: bool = True):
        self.read = read
        self.side = SideStore(side)
        self.homes: list[tuple[_Store, list[str]]] = []  # store -> the logs it holds
        by: dict[str, tuple[_Store, list[str]]] = {}
        for col in collections:
            if col.source == "manifest":
                key = f"manifest:{col.where}"
                if key not in by:
                    by[key] = (ManifestStore(col.where), [])
            else:
                key = "side"
                if key not in by:
                    by[key] = (self.side, [])
            by[key][1].extend(s.log for s in col.runs)
        self.homes = list(by.values())

    def known(self) -> dict[str, Entry]:
        """Every entry the caches hold, by the log's :func:`canonical` path."""
        _real_folder.cache_clear()  # a symlink may point elsewhere by the next collect of a --watch
        out: dict[str, Entry] = {}
        if not self.read:
            return out
        for store, _logs in self.homes:
            try:
                out.update(store.load())
            except (sqlite3.Error, OSError) as err:
                warn(f"parse cache {getattr(store, 'path', store.base)} not read", err)
        return out

    def save(self, fresh: Mapping[str, Entry | None]) -> None:
        """Add the entries of the logs parsed this time (None: not cacheable) and forget logs no run has now."""
        for store, logs in self.homes:
            mine = {log: e for log in logs if (e := fresh.get(log)) is not None}
            if not mine and self.read or isinstance(store, ManifestStore) and folders.why_read_only(store.base):
                continue  # nothing new: keep what is there (stale entries go with the next write); or read-only
            try:
                store.save(mine, logs)
            except (sqlite3.Error, OSError) as err:
                warn(f"parse cache {getattr(store, 'path', store.base)} not written", err)
