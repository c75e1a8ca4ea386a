"""Benchmark matrices: TOML in, validated cells out.

A matrix names one suite (or several) and its axes; every combination of axis values is a *cell*, run
``repeats`` times (the axes and rules into cells: :mod:`dlperf_slurm.matrix.axes`).
Everything a user can get wrong is checked here, with the file, key and line in the message.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Literal, Mapping

from dlperf_slurm import launchers, suites
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix import axes
from dlperf_slurm.matrix.measure import int_value as _int
from dlperf_slurm.matrix.measure import measure as _measure
from dlperf_slurm.matrix.nodegpus import NodeGpus
from dlperf_slurm.matrix.nodegpus import site_reason as _site_reason
from dlperf_slurm.matrix.sitefile import _merge, _overridden, busbw_gate, read_site, select_system
from dlperf_slurm.matrix.toml_source import Source, check_keys, did_you_mean, read_toml
from dlperf_slurm.model.cell import Cell, Dropped, Matrix, Run
from dlperf_slurm.model.config import (
    Container,
    Environment,
    Health,
    Provenance,
    Setup,
    SlurmConfig,
    System,
    time_to_minutes,
)
from dlperf_slurm.words import plural

GPU_REQUESTS = ("gpus-per-node", "gres", "none")

TOP_KEYS = ("suite", "name", "description", "axes", "include", "exclude", "measure", "slurm", "environment", "options",
            "setups", "health", "provenance")
SETUP_KEYS = ("launcher_args", "env", "description")
PROVENANCE_KEYS = ("env_allow", "env_deny", "umask")
HEALTH_KEYS = {"enabled": Health.enabled, "timeout_s": Health.timeout_s, "min_busbw_gbs": Health.min_busbw_gbs,
               "size_mb": Health.size_mb, "python": Health.python, "controller_wait_s": Health.controller_wait_s}
SLURM_KEYS: dict[str, Any] = {
    "partition": None, "account": None, "qos": None, "time": "00:30:00", "exclusive": False,
    "constraint": None, "gpu_request": "gpus-per-node", "cpus_per_task": None, "mem": None,
    "extra_directives": [], "array_throttle": None, "gpus_per_node": None,
}
# sbatch options the submit journal sets itself: a site directive overriding one breaks it
_OWNED_DIRECTIVES = ("job-name", "output", "error", "array", "open-mode", "signal")
ENV_KEYS: dict[str, Any] = {"modules": [], "env": {}, "setup": [], "container": {}}
CONTAINER_KEYS = ("type", "image", "mounts", "binds", "options")

# Values that end up in #SBATCH lines or names: no whitespace, quotes or shell metacharacters.
_DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9_.,:=/@%+\-\[\]]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE_NAME = re.compile(r"^[A-Za-z0-9_.+/\-]+$")
_ONE_OPTION = re.compile(r"--?[A-Za-z][A-Za-z0-9\-]*(=[A-Za-z0-9_.,:=/@%+\-\[\]]+)?")  # one sbatch option, its value


# ---------------------------------------------------------------------------------------------- loading


def load(path: str | os.PathLike, site: str | os.PathLike | None | Literal[False] = None, system: str | None = None
         ) -> Matrix:
    """Load and validate a matrix file. ``site``: a site file, None for the default one, False for none;
    ``system``: ``NAME[:PARTITION]``, a named system of the site file (default: its ``default_system``)."""
    path = Path(path)
    data, text = read_toml(path)
    files = read_site(site)
    site_read, site_src = files.data, files.src
    if system and site_src is None:
        raise UserError(f"--system {system}: no site file (--site FILE, $DLPERF_SLURM_SITE, "
                        "~/.config/dlperf_slurm/site.toml or the system-wide /etc/dlperf_slurm/site.toml) names "
                        "systems")
    site_data, chosen, origin = select_system(site_read, site_src, system)
    layer = site_src
    while chosen is not None and layer is not None:  # a value a system gives is reported at its own line
        layer.layers = ((f"systems.{chosen.name}.partitions.{chosen.partition}",) if chosen.partition else ()) \
            + (f"systems.{chosen.name}",)
        layer = layer.site
    ctx = Source(path, text, site=site_src)
    gate = busbw_gate(site_read, site_src, chosen, data, ctx)
    return _build(ctx, data, site_data, chosen, origin, gate)


def _build(ctx: Source, data: dict[str, Any], site: dict[str, Any],
           system: System | None = None, origin: Mapping[tuple[str, str], tuple[str, Any]] | None = None,
           gate: tuple[float | None, tuple[str, ...]] = (None, ())) -> Matrix:
    check_keys(ctx, data, TOP_KEYS, "")
    suite_list, several = _suites(ctx, data)
    name = data.get("name", ctx.path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        raise ctx.error("name", "expected a campaign name of letters, digits, '_', '.', '-'")

    measure = _measure(ctx, data.get("measure", {}), suite_list)
    slurm = _slurm(ctx, _merge(site.get("slurm", {}), data.get("slurm", {})))
    environment = _environment(ctx, _merge(site.get("environment", {}), data.get("environment", {})))
    options = _suite_options(ctx, suite_list, data.get("options", {}), several)
    health = _health(ctx, _merge(site.get("health", {}), data.get("health", {})))
    origin = dict(origin or {})
    if gate[0] is not None and system is not None:  # the system's expected busbw is the threshold (busbw_gate)
        health = dataclasses.replace(health, min_busbw_gbs=gate[0], expected_by=system.label)
        origin.pop(("health", "min_busbw_gbs"), None)  # said by busbw_gate, not as a matrix key that wins
    provenance = _provenance(ctx, _merge(site.get("provenance", {}), data.get("provenance", {})))

    table = data.get("axes")
    if not isinstance(table, dict):
        raise ctx.error("axes", "missing [axes] table (devices, batch_size, precision, ...)")
    table = {k: v for k, v in table.items() if k != axes.SUITE_KEY}
    by_name = {s.name: s for s in suite_list}
    setups = _setups(ctx, data.get("setups", {}))
    kept, dropped = [], []
    node = NodeGpus(ctx, slurm, system)
    for cell in axes.cells(ctx, suite_list, table, data.get("include", []), data.get("exclude", []), list(setups),
                           measure.repeats, node_gpus=node):
        reason = (by_name[cell.suite].drop_reason(cell)
                  or launchers.container_reason(cell.launcher, environment.container.type)
                  or _system_reason(cell, system) or _site_reason(cell, slurm))
        (dropped.append(Dropped(cell, reason)) if reason else kept.append(cell))
        why = by_name[cell.suite].accuracy_error(cell, options[cell.suite]) if measure.accuracy and not reason else None
        if why:  # e.g. synthetic data: nothing to evaluate
            raise ctx.error(*why)
    if not kept:
        raise ctx.error("axes", "the matrix has no runnable cell" + (f" ({dropped[0].reason})" if dropped else ""))
    _distinct_files(ctx, kept, several)
    return Matrix(path=ctx.path, name=name, suites=tuple(suite_list), cells=kept, dropped=dropped, measure=measure,
                  slurm=slurm, environment=environment, options=options, description=str(data.get("description", "")),
                  grouped=several, setups=setups, health=health,
                  provenance=provenance, system=system,
                  overridden=gate[1] + _overridden(ctx, data, origin), node_gpus=node.line(),
                  gpus_per_node=node.known())


def _system_reason(cell: Cell, system: System | None) -> str | None:
    """Why the named system cannot run a cell: more GPUs per node than its nodes have, or a precision its GPU model
    has no tensor cores for (FP8 before Hopper and Ada, MXFP8 and NVFP4 before Blackwell)."""
    if system is not None and system.gpus_per_node and cell.gpus_per_node > system.gpus_per_node:
        return (f"system {system.label} has {plural(system.gpus_per_node, 'GPU')} per node, the cell asks "
                f"{cell.gpus_per_node}")
    if system is not None and system.gpu_model:
        from dlperf_slurm.workloads.peaks import precision_reason

        why = precision_reason(cell.precision, system.gpu_model)
        if why:
            return f"system {system.label}: {why}"
    return None


def _distinct_files(ctx: Source, cells: list[Cell], grouped: bool) -> None:
    """No two cells share an id or a run's files: values that differ only in characters an id or a file name
    drops (``eth0,eth1`` and ``eth0 eth1``; ``ib_0`` and ``ib-0`` in file names) would write one log twice."""
    seen: dict[tuple, Cell] = {}
    for cell in cells:
        for what, k in (("id", (cell.id,)), ("files", (cell.framework if grouped else "", cell.shape, cell.stem))):
            other = seen.setdefault((what, *k), cell)
            if other is cell:
                continue
            key, va, vb = _axis_between(other, cell)
            raise ctx.error(key, f"{va!r} and {vb!r} give two cells the same {what} ({k[-1]}): an id keeps only "
                                 "letters, digits, '_', '.' and '-' of a value (a file name turns '_' into '-'); "
                                 "give values that differ in those")


def _axis_between(a: Cell, b: Cell) -> tuple[str, Any, Any]:
    """The axis two cells of one id differ in, and their two values."""
    for prefix, x, y in (("axes.env.", dict(a.env), dict(b.env)), ("axes.", dict(a.params), dict(b.params))):
        for name in sorted(set(x) | set(y)):
            if x.get(name) != y.get(name):
                return prefix + name, x.get(name), y.get(name)
    return "axes.launcher_args", list(a.launcher_args), list(b.launcher_args)


def _setups(ctx: Source, table: Any) -> dict[str, Setup]:
    """``[setups.NAME]``: named bundles of launcher arguments and environment, the values of the ``setup`` axis."""
    if not isinstance(table, dict):
        raise ctx.error("setups", "expected tables [setups.NAME] with launcher_args and env")
    out = {}
    for name, t in table.items():
        key = f"setups.{name}"
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
            raise ctx.error(key, "a setup name is letters, digits, '_', '.', '-'")
        if not isinstance(t, dict):
            raise ctx.error(key, "expected a table with launcher_args and env")
        check_keys(ctx, t, SETUP_KEYS, key)
        args = _str_list(ctx, f"{key}.launcher_args", t.get("launcher_args", []))
        if any("\n" in a or "\0" in a for a in args):
            raise ctx.error(f"{key}.launcher_args", "newlines are not allowed in launcher arguments")
        env = t.get("env", {})
        if not isinstance(env, dict):
            raise ctx.error(f"{key}.env", "expected a table of NAME = \"value\"")
        for k, v in env.items():
            if not _ENV_NAME.match(k):
                raise ctx.error(f"{key}.env.{k}", "not a valid environment variable name")
            if isinstance(v, bool) or not isinstance(v, (str, int, float)) or "\0" in str(v):
                raise ctx.error(f"{key}.env.{k}", f"expected a string or number, got {v!r}")
        out[name] = Setup(tuple(args), tuple(sorted((k, str(v)) for k, v in env.items())),
                          str(t.get("description", "")))
    return out


def _suites(ctx: Source, data: dict[str, Any]) -> tuple[list["suites.Suite"], bool]:
    """The matrix's suites: ``suite = "a/b"`` (one), or a list (``suite = [...]`` or ``[axes] suite = [...]``):
    several, each cell's runs then in a folder of its framework (DLPerf's layout)."""
    in_axes = isinstance(data.get("axes"), dict) and axes.SUITE_KEY in data["axes"]
    if "suite" in data and in_axes:
        raise ctx.error("axes.suite", "the suites are given twice: keep either the top-level suite or axes.suite")
    key = "axes.suite" if in_axes else "suite"
    raw = data["axes"][axes.SUITE_KEY] if in_axes else data.get("suite")
    if raw is None:
        raise ctx.error("suite", f"missing: name a suite, one of: {', '.join(suites.names())}")
    several = isinstance(raw, list)
    wanted = raw if several else [raw]
    if not wanted or not all(isinstance(w, str) for w in wanted):
        raise ctx.error(key, "expected a suite name such as 'pytorch-ddp/resnet50', or a list of them")
    out = []
    for w in wanted:
        try:
            s = suites.get(w)
        except KeyError:
            raise ctx.error(key, f"unknown suite {w!r}{did_you_mean(w, suites.names())}; "
                                 f"known: {', '.join(suites.names())}") from None
        if s in out:
            raise ctx.error(key, f"suite {w!r} named twice")
        out.append(s)
    return out, several


def _health(ctx: Source, table: Any) -> Health:
    if not isinstance(table, dict):
        raise ctx.error("health", "expected a table")
    check_keys(ctx, table, HEALTH_KEYS, "health")
    v = {**HEALTH_KEYS, **table}
    if not isinstance(v["enabled"], bool):
        raise ctx.error("health.enabled", "expected true or false")
    v["timeout_s"] = _int(ctx, "health.timeout_s", v["timeout_s"])
    v["controller_wait_s"] = _int(ctx, "health.controller_wait_s", v["controller_wait_s"])
    for k in ("min_busbw_gbs", "size_mb"):
        if isinstance(v[k], bool) or not isinstance(v[k], (int, float)) or v[k] < 0:
            raise ctx.error(f"health.{k}", f"expected a number >= 0, got {v[k]!r}")
        v[k] = float(v[k])
    v["python"] = _safe(ctx, "health.python", v["python"], _MODULE_NAME)
    return Health(**v)


def _provenance(ctx: Source, table: Any) -> Provenance:
    if not isinstance(table, dict):
        raise ctx.error("provenance", "expected a table with env_allow, env_deny, umask")
    check_keys(ctx, table, PROVENANCE_KEYS, "provenance")
    lists = {k: tuple(_str_list(ctx, f"provenance.{k}", table.get(k, []))) for k in ("env_allow", "env_deny")}
    for k, bad in ((k, p) for k, ps in lists.items() for p in ps if not re.fullmatch(r"[A-Za-z0-9_*?]+", p)):
        raise ctx.error(f"provenance.{k}", f"{bad!r} is not a name pattern: letters, digits, '_', and the wildcards "
                                           "'*' and '?' (e.g. 'MY_SITE_*')")
    umask = table.get("umask")
    if umask is not None and (not isinstance(umask, str) or not re.fullmatch(r"0?[0-7]{3}", umask)):
        raise ctx.error("provenance.umask", f"expected an octal umask as a string such as \"027\" (group may read, "
                                            f"others nothing) or \"077\", got {umask!r}")
    return Provenance(lists["env_allow"], lists["env_deny"], umask.zfill(4) if umask else None)


def _safe(ctx: Source, key: str, value: Any, pattern: re.Pattern = _DIRECTIVE_VALUE, what: str = "") -> str:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise ctx.error(key, f"expected a string, got {value!r}")
    s = str(value)
    if not pattern.match(s):
        raise ctx.error(key, f"{s!r} is not allowed here{what}: use letters, digits and . , : = / @ % + - _ only")
    return s


def _slurm(ctx: Source, table: dict[str, Any]) -> SlurmConfig:
    check_keys(ctx, table, SLURM_KEYS, "slurm")
    v = {**SLURM_KEYS, **table}
    for k in ("partition", "account", "qos", "constraint", "mem"):
        if v[k] is not None:
            v[k] = _safe(ctx, f"slurm.{k}", v[k])
    try:  # the format first: "30 min" is a time written the wrong way, not a shell-charset problem
        if not isinstance(v["time"], str) or time_to_minutes(v["time"]) <= 0:
            raise ValueError
    except ValueError:
        raise ctx.error("slurm.time", "expected a Slurm time such as 00:30:00 (or 1-00:00:00, a day), got "
                                      f"{v['time']!r}") from None
    v["time"] = _safe(ctx, "slurm.time", v["time"])
    if not isinstance(v["exclusive"], bool):
        raise ctx.error("slurm.exclusive", "expected true or false")
    if v["gpu_request"] not in GPU_REQUESTS:
        raise ctx.error("slurm.gpu_request", f"expected one of {', '.join(GPU_REQUESTS)}"
                                             f"{did_you_mean(str(v['gpu_request']), GPU_REQUESTS)}")
    for k in ("cpus_per_task", "array_throttle", "gpus_per_node"):
        if v[k] is not None:
            v[k] = _int(ctx, f"slurm.{k}", v[k])
    if v["gpus_per_node"] is not None and not 1 <= v["gpus_per_node"] <= axes.MAX_GPUS_PER_NODE:
        raise ctx.error("slurm.gpus_per_node", f"expected the GPUs a node has, 1 to {axes.MAX_GPUS_PER_NODE}")
    extra = v["extra_directives"]
    if not isinstance(extra, list) or not all(isinstance(x, str) for x in extra):
        raise ctx.error("slurm.extra_directives", "expected a list of strings such as '--reservation=bench'")
    for x in extra:
        if "\n" in x or "\r" in x or not _ONE_OPTION.fullmatch(x.strip()):
            raise ctx.error("slurm.extra_directives", f"{x!r} is not one sbatch option such as '--reservation=bench'")
        word = x.strip().lstrip("-").split("=", 1)[0]
        owned = next((o for o in _OWNED_DIRECTIVES if o.startswith(word)), None)  # sbatch takes any unique prefix
        if owned:
            raise ctx.error("slurm.extra_directives", f"{x!r}: --{owned} is dlperf_slurm's own (the job name carries "
                                                      "the submission token an interrupted submit is found by, the "
                                                      "output holds Slurm's banners status reads, the array is the "
                                                      "group's runs); leave it out")
    v["extra_directives"] = tuple(x.strip() for x in extra)
    return SlurmConfig(**v)


def _str_list(ctx: Source, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ctx.error(key, "expected a list of strings")
    return value


def _environment(ctx: Source, table: dict[str, Any]) -> Environment:
    check_keys(ctx, table, ENV_KEYS, "environment")
    modules = _str_list(ctx, "environment.modules", table.get("modules", []))
    for m in modules:
        _safe(ctx, "environment.modules", m, _MODULE_NAME)
    env = table.get("env", {})
    if not isinstance(env, dict):
        raise ctx.error("environment.env", "expected a table of NAME = \"value\"")
    env_items = []
    for k, val in env.items():
        if not _ENV_NAME.match(k):
            raise ctx.error(f"environment.env.{k}", "not a valid environment variable name")
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            raise ctx.error(f"environment.env.{k}", f"expected a string or number, got {val!r}")
        env_items.append((k, str(val)))
    setup = _str_list(ctx, "environment.setup", table.get("setup", []))
    c = table.get("container", {}) or {}
    if not isinstance(c, dict):
        raise ctx.error("environment.container", "expected a table with type, image, mounts/binds")
    check_keys(ctx, c, CONTAINER_KEYS, "environment.container")
    ctype = c.get("type", "none" if not c.get("image") else None)
    if ctype not in launchers.CONTAINER_KINDS:
        raise ctx.error("environment.container.type", f"expected one of {', '.join(launchers.CONTAINER_KINDS)}")
    image = c.get("image", "")
    if ctype != "none" and (not isinstance(image, str) or not image):
        raise ctx.error("environment.container.image", f"a {ctype} container needs an image")
    mounts = _str_list(ctx, "environment.container.mounts", c.get("mounts", c.get("binds", [])))
    opts = _str_list(ctx, "environment.container.options", c.get("options", []))
    container = Container(ctype, image if ctype != "none" else "", tuple(mounts), tuple(opts))
    return Environment(tuple(modules), tuple(env_items), tuple(setup), container)


def _suite_options(ctx: Source, suite_list: list["suites.Suite"], table: Any,
                   several: bool) -> dict[str, dict[str, Any]]:
    """Each suite's options (suite name -> options): for one suite ``[options]`` is its own; with several, a
    key of ``[options]`` goes to every suite that has that option, and ``[options."<suite>"]`` to that suite
    only (and wins)."""
    if not isinstance(table, dict):
        raise ctx.error("options", "expected a table")
    if not several:
        (suite,) = suite_list
        return {suite.name: _options(ctx, suite, table, "options")}
    names = [s.name for s in suite_list]
    shared = {k: v for k, v in table.items() if k not in names}
    known = sorted({k for s in suite_list for k in s.options})
    for k in shared:
        if k not in known:
            raise ctx.error(f"options.{k}", f"no suite of this matrix has option {k!r}"
                                            f"{did_you_mean(k, [*known, *names])}; options: {', '.join(known)}, "
                                            f"or a table per suite ([options.\"{names[0]}\"])")
    out = {}
    for s in suite_list:
        own = table.get(s.name, {})
        if not isinstance(own, dict):
            raise ctx.error(f"options.{s.name}", "expected a table of that suite's options")
        mine = {k: v for k, v in shared.items() if k in s.options}
        out[s.name] = {**_options(ctx, s, mine, "options"),
                       **_options(ctx, s, own, f"options.{s.name}", defaults=False)}
    return out


def _options(ctx: Source, suite: "suites.Suite", table: dict[str, Any], prefix: str,
             defaults: bool = True) -> dict[str, Any]:
    check_keys(ctx, table, suite.options, prefix)
    out = dict(suite.options) if defaults else {}
    for k, v in table.items():
        why = option_problem(suite, k, v)
        if why:
            raise ctx.error(f"{prefix}.{k}", why)
        out[k] = v
    return out


def option_problem(suite: "suites.Suite", key: str, value: Any) -> str | None:
    """What is wrong with one of the suite's options given this value (its type, a line break, the suite's own
    check), or None; ``key`` is one of ``suite.options``."""
    default = suite.options[key]
    if default is not None and type(value) is not type(default) and not (isinstance(default, float)
                                                                      and isinstance(value, int)):
        return f"expected {type(default).__name__}, got {value!r}"
    if isinstance(value, str) and ("\n" in value or "\0" in value):
        return "newlines are not allowed"
    least = suite.option_minimum.get(key)
    if least is not None and value < least[0]:
        return f"must be at least {least[0]} ({least[1]})"
    return suite.option_error(key, value)


# ---------------------------------------------------------------------------------------------- runs


def runs(matrix: Matrix, campaign_dir: str | os.PathLike, repeats: Mapping[str, int] | None = None) -> list[Run]:
    """Every run of the matrix, cell by cell, repeats 0..N-1 (with several suites, each in its framework's
    folder: ``<campaign>/<framework>/<N>n<G>g/...``). ``repeats``: cell id -> more repeats than the matrix's
    for that cell (``submit --top-up``)."""
    d = Path(campaign_dir)
    more = repeats or {}
    return [Run(c, r, d, c.framework if matrix.grouped else "") for c in matrix.cells
            for r in range(max(matrix.measure.repeats, more.get(c.id, 0)))]
