"""The site file: the ``[slurm]``, ``[environment]`` and ``[health]`` defaults a center shares, its named
systems and partitions (``[systems.NAME]``, ``[systems.NAME.partitions.P]``, ``default_system``) laid over them,
and its results store (``[store] url``). :mod:`dlperf_slurm.matrix.loader` lays a matrix over what this gives.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix.toml_source import Source, check_keys, read_toml
from dlperf_slurm.model.config import System


#: the environment variables that name the site files and the folders (each over what a site file says)
SITE_ENV, SYSTEM_SITE_ENV = "DLPERF_SLURM_SITE", "DLPERF_SLURM_SYSTEM_SITE"
ROOT_ENV = {"logs": "DLPERF_SLURM_LOGS", "summaries": "DLPERF_SLURM_SUMMARIES"}
#: the center's site file, for every user of the machine, under each user's own
SYSTEM_SITE = Path("/etc/dlperf_slurm/site.toml")
#: the folders a command uses when neither an option, the environment nor a site file's [paths] names them
DEFAULT_ROOTS = {"logs": "logs", "summaries": "summaries"}
GIVEN = "the command line"


def default_site_file() -> Path | None:
    """This user's site file when there is one: ``$DLPERF_SLURM_SITE``, else ``~/.config/dlperf_slurm/site.toml``
    when it exists."""
    env = os.environ.get(SITE_ENV)
    if env:
        return Path(env)
    home = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "dlperf_slurm" / "site.toml"
    return home if home.is_file() else None


def system_site_file() -> Path:
    """Where the center's site file is looked for: ``$DLPERF_SLURM_SYSTEM_SITE``, else
    ``/etc/dlperf_slurm/site.toml``."""
    env = os.environ.get(SYSTEM_SITE_ENV)
    return Path(env) if env else SYSTEM_SITE


@dataclass
class Site:
    """The site files read, lowest first (the center's, then the user's or ``--site``'s), laid one over the other."""

    data: dict[str, Any] = field(default_factory=dict)
    src: Source | None = None  # the top file's; a key it lacks is found in the files under it (Source.holder)
    files: list[tuple[str, Path]] = field(default_factory=list)  # (role, path) of each file read, lowest first

    @property
    def path(self) -> Path | None:
        return self.files[-1][1] if self.files else None


def read_site(site: str | os.PathLike | None | Literal[False] = None, missing_ok: bool = False) -> Site:
    """The site files for a command's ``--site`` (None: the default one, False: ``--no-site``, none at all): the
    center's system-wide file (:func:`system_site_file`) when it exists (or its variable names it), then the
    user's (``--site FILE``, else :func:`default_site_file`) over it, table by table, key by key. A file named
    that is not there is an error, unless ``missing_ok`` (``site show``: it says so)."""
    if site is False:
        return Site()
    wanted: list[tuple[str, Path]] = []
    system = system_site_file()
    if os.environ.get(SYSTEM_SITE_ENV) or system.is_file():
        wanted.append(("system-wide", system))
    mine = Path(site) if site else default_site_file()
    if mine is not None and not any(_same(mine, p) for _r, p in wanted):
        wanted.append(("user", mine))
    out = Site()
    for role, path in wanted:
        if missing_ok and not path.is_file():
            continue
        data, src = load_site(path)
        if src is not None:
            src.site = out.src
        out.data, out.src = _layer(out.data, data), src
        out.files.append((role, path))
    return out


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _layer(under: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``under``: a table of both merged key by key, at every depth; any other value replaced."""
    out = dict(under)
    for k, v in over.items():
        out[k] = _layer(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def root(kind: str, given: str | None, site: Site) -> tuple[Path, str]:
    """The folder of campaigns (``kind`` "logs") or of summaries ("summaries") and what decided it: the option,
    else ``$DLPERF_SLURM_LOGS`` / ``$DLPERF_SLURM_SUMMARIES``, else the site files' ``[paths]`` (a relative path
    is taken from the folder of the file that gives it; ``~`` and ``$VAR`` expanded), else ``logs`` / ``summaries``
    in the working folder."""
    if given:
        return Path(given), GIVEN
    env = os.environ.get(ROOT_ENV[kind])
    if env:
        return Path(env), f"${ROOT_ENV[kind]}"
    value = (site.data.get("paths") or {}).get(kind)
    if value is None or site.src is None:
        return Path(DEFAULT_ROOTS[kind]), "default: in the working folder"
    src, held = site.src.holder(f"paths.{kind}") or (site.src, f"paths.{kind}")
    if not isinstance(value, str) or not value:
        raise src.error(held, "expected a folder, e.g. \"/scratch/$USER/dlperf/logs\"")
    missing = [v for v in re.findall(r"\$\{?(\w+)", value) if v not in os.environ]
    if missing:
        raise src.error(held, f"${missing[0]} is not set in this environment: set it, or give the folder whole")
    path = Path(os.path.expanduser(os.path.expandvars(value)))
    line = src.line_of(held)
    path = path if path.is_absolute() else Path(os.path.normpath(src.path.parent / path))
    return path, f"{src.path}:{line} [paths] {kind}"


def user_site_file() -> Path:
    """Where this user's site file lives, whether or not it exists yet: ``$DLPERF_SLURM_SITE``, else
    ``$XDG_CONFIG_HOME/dlperf_slurm/site.toml`` (``~/.config/...``); ``site init`` writes it."""
    env = os.environ.get(SITE_ENV)
    return Path(env) if env else Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "dlperf_slurm" \
        / "site.toml"


SITE_KEYS = ("slurm", "environment", "health", "provenance", "store", "submit", "systems", "default_system", "paths")
PATHS_KEYS = tuple(DEFAULT_ROOTS)
#: what a site file's [systems.NAME] and [systems.NAME.partitions.P] hold besides the tables they layer
SYSTEM_TABLES = ("slurm", "environment", "health")
SYSTEM_HARDWARE = {"description": str, "gpu_model": str, "gpus_per_node": int, "interconnect": str,
                   "busbw_gbs": float}


def load_site(path: Path | None) -> tuple[dict[str, Any], Source | None]:
    """A site file holds the ``[slurm]``, ``[environment]`` and ``[health]`` defaults a center shares, its named
    systems (``[systems.NAME]``, see :func:`select_system`) and ``default_system``, and ``[store] url``, its
    results store (:mod:`dlperf_slurm.store.database`): its data, and its :class:`Source` (an error in a value it gives
    names it, with its line)."""
    if path is None:
        return {}, None
    data, text = read_toml(Path(path), "site file")
    src = Source(Path(path), text)
    check_keys(src, data, SITE_KEYS, "")
    paths = data.get("paths", {})
    if not isinstance(paths, dict):
        raise src.error("paths", "expected a table: [paths] logs = \"DIR\", summaries = \"DIR\"")
    check_keys(src, paths, PATHS_KEYS, "paths")
    return data, src


def select_system(site: dict[str, Any], src: Source | None, wanted: str | None
                  ) -> tuple[dict[str, Any], System | None, dict[tuple[str, str], tuple[str, Any]]]:
    """The site's tables with a named system's (``NAME``) and its partition's (``NAME:PARTITION``) laid over them,
    in that order (``wanted``: ``--system``, else the site file's ``default_system``, else none); the system; and
    for each ``(table, key)`` a system or partition sets, ``(its label, its value)``."""
    given = bool(wanted)
    wanted = wanted or site.get("default_system")
    if not wanted:
        return site, None, {}
    where = f"site file {src.path}" if src is not None else "no site file"
    if not isinstance(wanted, str):
        raise src.error("default_system", "expected a system name (a [systems.NAME] table)")  # type: ignore[union-attr]
    name, _, part = wanted.partition(":")
    systems = site.get("systems") or {}
    if src is None or not isinstance(systems, dict) or name not in systems:
        known = ", ".join(sorted(systems)) if isinstance(systems, dict) and systems else "none"
        if not given and src is not None:  # the site file's own default names it: said at its line
            raise src.error("default_system", f"{wanted!r}: no [systems.{name}] in the site files (their systems: "
                            f"{known}); name one of them, or --system NAME")
        raise UserError(f"--system {wanted}: {where} has no [systems.{name}] (its systems: {known})")
    layers: list[tuple[str, str, dict[str, Any]]] = []
    table = systems[name]
    if not isinstance(table, dict):
        raise src.error(f"systems.{name}", "expected a table")
    check_keys(src, table, (*SYSTEM_TABLES, *SYSTEM_HARDWARE, "partitions"), f"systems.{name}")
    layers.append((name, f"systems.{name}", table))
    if part:
        parts = table.get("partitions") or {}
        if not isinstance(parts, dict) or part not in parts or not isinstance(parts[part], dict):
            known = ", ".join(sorted(parts)) if isinstance(parts, dict) and parts else "none"
            raise UserError(f"--system {wanted}: {where} has no [systems.{name}.partitions.{part}] (partitions of "
                            f"{name}: {known})")
        check_keys(src, parts[part], (*SYSTEM_TABLES, *SYSTEM_HARDWARE), f"systems.{name}.partitions.{part}")
        layers.append((wanted, f"systems.{name}.partitions.{part}", parts[part]))
    merged = {t: dict(site.get(t) or {}) for t in SYSTEM_TABLES}
    origin: dict[tuple[str, str], tuple[str, Any]] = {}
    hardware: dict[str, Any] = {}
    for label, prefix, layer in layers:
        for t in SYSTEM_TABLES:
            own = layer.get(t, {})
            if not isinstance(own, dict):
                raise src.error(f"{prefix}.{t}", "expected a table")
            merged[t] = _merge(merged[t], own)
            origin.update({(t, k): (label, v) for k, v in own.items()})
        for key, kind in SYSTEM_HARDWARE.items():
            if key not in layer:
                continue
            value = layer[key]
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 if kind is float
                  else isinstance(value, int) and not isinstance(value, bool) and value >= 1 if kind is int
                  else isinstance(value, str))
            if not ok:
                want = {float: "a positive number (GB/s)", int: "a whole number >= 1", str: "a string"}[kind]
                raise src.error(f"{prefix}.{key}", f"expected {want}")
            hardware[key] = float(value) if kind is float else value
    return {**site, **merged}, System(name=name, partition=part, **hardware), origin


def busbw_gate(site: Mapping[str, Any], site_src: Source | None, system: System | None, matrix: Mapping[str, Any],
               matrix_src: Source) -> tuple[float | None, tuple[str, ...]]:
    """The health gate's all-reduce threshold, decided here alone: the chosen system's (or partition's) expected
    bus bandwidth (``busbw_gbs``) when it sets one, else None (the ``[health]`` layers give ``min_busbw_gbs`` as
    they give every key). With an expected bandwidth, every ``[health] min_busbw_gbs`` that says otherwise (the
    site's, the system's or partition's own, the matrix's) is said, one line each naming its file and line, as a
    matrix key a system also sets is (``site``: the site file as read, before :func:`select_system`)."""
    if system is None or not system.busbw_gbs:
        return None, ()
    expected = system.busbw_gbs
    tables: list[tuple[Source | None, str, Any]] = [(site_src, "", site)]
    systems = site.get("systems") or {}
    own = systems.get(system.name) if isinstance(systems, dict) else None
    if isinstance(own, dict):
        tables.append((site_src, f"systems.{system.name}.", own))
        parts = own.get("partitions") or {}
        if system.partition and isinstance(parts, dict) and isinstance(parts.get(system.partition), dict):
            tables.append((site_src, f"systems.{system.name}.partitions.{system.partition}.", parts[system.partition]))
    tables.append((matrix_src, "", matrix))
    said = []
    for src, prefix, table in tables:
        health = table.get("health") if isinstance(table, Mapping) else None
        value = health.get("min_busbw_gbs") if isinstance(health, Mapping) else None
        if src is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value == expected:
            continue  # absent, the same, or not a number (the [health] check names that)
        line = src.line_of(f"{prefix}health.min_busbw_gbs")
        said.append(f"{src.path}{f':{line}' if line else ''}: [{prefix}health] min_busbw_gbs = {value:g} is not used: "
                    f"the health gate's threshold is system {system.label}'s expected busbw_gbs, {expected:g} GB/s")
    return expected, tuple(said)


def _overridden(ctx: Source, data: Mapping[str, Any], origin: Mapping[tuple[str, str], tuple[str, Any]]
                ) -> tuple[str, ...]:
    """The matrix's keys that a system also sets to another value: the matrix's wins, and is said."""
    out = []
    for (table, key), (label, value) in origin.items():
        own = data.get(table)
        if isinstance(own, dict) and key in own and own[key] != value:
            line = ctx.line_of(f"{table}.{key}")
            at = f"{ctx.path}" + (f":{line}" if line else "")
            out.append(f"{at}: [{table}] {key} = {own[key]!r} wins over system {label}'s {value!r}")
    return tuple(out)


def _merge(site: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(site)
    for k, v in own.items():
        if isinstance(v, dict) and isinstance(merged.get(k), dict):
            merged[k] = {**merged[k], **v}
        else:
            merged[k] = v
    return merged
