"""Which campaign a collect's cells belong to, beyond its name: two campaigns may share a name (two ``smoke``
campaigns of two clones, or one deleted and submitted again), and the results store must keep both.

:class:`CampaignId` holds

- ``key``: the identity the store keys a campaign's rows by. A campaign with a manifest: its name and the time
  its manifest was created (``smoke@2026-11-27T09:40:04.123456Z``): the same however often it is collected,
  wherever the folder is moved, and another for a campaign created again. A ``--from`` tree (no manifest): its
  name and its resolved folder.
- ``matrix``: the matrix it ran (the ``name`` in the campaign's copy of its matrix, else the matrix file's stem;
  a tree: ``tree:`` and its suites): ``compare --base last-good`` looks for a good campaign of the same matrix.
- ``where``: its folder, to tell namesakes apart in messages.
- ``ran_at``: when it ran (ISO 8601 UTC): its first run's submission (the manifest's), else its earliest log's
  modification time, else its manifest's creation; ``history`` orders campaigns by it.
- ``system``: the system it was submitted for (``--system``, the manifest's), "" when none.
"""

from __future__ import annotations

import datetime
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf_slurm.errors import UserError

TREE = "tree:"


@dataclass(frozen=True)
class CampaignId:
    key: str
    name: str
    matrix: str
    where: str
    ran_at: str
    system: str = ""


def iso(t: float | None) -> str:
    """A unix time as ISO 8601 UTC to the microsecond ('' for None)."""
    if t is None:
        return ""
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def identify(name: str, source: str, where: str, logs: Iterable[str] = (), suites: Iterable[str] = ()
             ) -> CampaignId:
    """A collection's identity (:class:`dlperf_slurm.collect.gather.Collection`'s ``name``, ``source`` and ``where``;
    ``logs`` and ``suites``: its runs', for a campaign without a manifest)."""
    from dlperf_slurm.campaign.folders import MANIFEST

    folder = Path(where).resolve()
    if source in ("manifest", "matrix") and (folder / MANIFEST).is_file():
        found = _from_manifest(name, folder)
        if found is not None:
            return found
    matrix = name if source == "matrix" else TREE + ",".join(sorted(set(suites)))
    return CampaignId(key=f"{name}@{folder}", name=name, matrix=matrix, where=str(folder), ran_at=_earliest(logs))


def of_collection(col: Any) -> CampaignId:
    return identify(col.name, col.source, col.where, (r.log for r in col.runs), (r.cell.suite for r in col.runs))


def _from_manifest(name: str, folder: Path) -> CampaignId | None:
    """None when the manifest cannot be read (the caller falls back on the folder)."""
    import sqlite3

    from dlperf_slurm.campaign.manifest import MATRIX_COPY, Manifest

    try:
        m = Manifest(folder)
    except (UserError, sqlite3.Error, OSError):
        return None
    try:
        created, name = m.meta("created_at"), str(m.meta("name") or name)
        submitted = [r.submitted_at for r in m.runs() if r.submitted_at is not None]
        matrix_path, system = m.meta("matrix_path") or "", m.meta("system") or ""
    except sqlite3.Error:
        return None
    finally:
        m.close()
    if not isinstance(created, (int, float)):
        return None
    try:
        matrix = tomllib.loads((folder / MATRIX_COPY).read_text()).get("name")
    except (OSError, ValueError):
        matrix = None
    if not isinstance(matrix, str) or not matrix:
        matrix = Path(matrix_path).stem if matrix_path else name
    return CampaignId(key=f"{name}@{iso(created)}", name=name, matrix=matrix, where=str(folder),
                      ran_at=iso(min(submitted) if submitted else created), system=str(system))


def _earliest(logs: Iterable[str]) -> str:
    times = []
    for log in logs:
        try:
            times.append(os.stat(log).st_mtime)
        except OSError:
            continue
    return iso(min(times)) if times else ""


def of_source(doc: dict[str, Any]) -> CampaignId | None:
    """The identity a summary (``summaries/<name>.json``) recorded of its one campaign; None when it holds several
    or was written before identities were (then the store is asked by name)."""
    sources = doc.get("sources")
    if not isinstance(sources, list) or len(sources) != 1 or not isinstance(sources[0], dict):
        return None
    s = sources[0]
    if not all(isinstance(s.get(k), str) and s.get(k) for k in ("campaign_key", "name", "matrix")):
        return None
    return CampaignId(key=s["campaign_key"], name=s["name"], matrix=s["matrix"], where=str(s.get("where") or ""),
                      ran_at=str(s.get("ran_at") or ""), system=str(s.get("system") or ""))
