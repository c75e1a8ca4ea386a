"""Benchmark matrices: TOML in, validated cells out.

A matrix names one suite and its axes; every combination of axis values is a *cell*, run ``repeats`` times.
Everything a user can get wrong is checked here, with the file, key and line in the message.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from dlperf_slurm import launchers, suites
from dlperf_slurm.toml_source import Source, check_keys, did_you_mean, read_toml
from dlperf_slurm.model import (Cell, Container, Dropped, Environment, Health, Matrix, Measure, Run, SlurmConfig,
                                time_to_minutes)

PRECISIONS = ("fp32", "amp", "fp16", "bf16")
GPU_REQUESTS = ("gpus-per-node", "gres", "none")
CORE_AXES = ("devices", "batch_size", "precision", "xla", "launcher", "launcher_args")

TOP_KEYS = ("suite", "name", "description", "axes", "include", "exclude", "measure", "slurm", "environment", "options",
            "health")
HEALTH_KEYS = {"enabled": Health.enabled, "timeout_s": Health.timeout_s, "min_busbw_gbs": Health.min_busbw_gbs,
               "size_mb": Health.size_mb, "python": Health.python}
MEASURE_KEYS = {"repeats": Measure.repeats, "warmup_steps": Measure.warmup_steps,
                "measure_steps": Measure.measure_steps, "hang_timeout": Measure.hang_timeout,
                "hang_factor": Measure.hang_factor, "hang_min": Measure.hang_min}
_MEASURE_MIN = {"warmup_steps": 0, "hang_timeout": 0}  # the others are at least 1
SLURM_KEYS = {
    "partition": None, "account": None, "qos": None, "time": "00:30:00", "exclusive": False,
    "constraint": None, "gpu_request": "gpus-per-node", "cpus_per_task": None, "mem": None,
    "extra_directives": [], "array_throttle": None,
}
ENV_KEYS = {"modules": [], "env": {}, "setup": [], "container": {}}
CONTAINER_KEYS = ("type", "image", "mounts", "binds", "options")

# Values that end up in #SBATCH lines or names: no whitespace, quotes or shell metacharacters.
_DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9_.,:=/@%+\-\[\]]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE_NAME = re.compile(r"^[A-Za-z0-9_.+/\-]+$")
_DEVICES = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


# ---------------------------------------------------------------------------------------------- loading


def default_site_file() -> Path | None:
    env = os.environ.get("DLPERF_SLURM_SITE")
    if env:
        return Path(env)
    home = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "dlperf_slurm" / "site.toml"
    return home if home.is_file() else None


def load_site(path: Path | None) -> dict[str, Any]:
    """A site file holds the ``[slurm]``, ``[environment]`` and ``[health]`` defaults a center shares."""
    if path is None:
        return {}
    data, text = read_toml(Path(path))
    check_keys(Source(Path(path), text), data, ("slurm", "environment", "health"), "")
    return data


def load(path: str | os.PathLike, site: str | os.PathLike | None | bool = None) -> Matrix:
    """Load and validate a matrix file. ``site``: a site file, None for the default one, False for none."""
    path = Path(path)
    data, text = read_toml(path)
    ctx = Source(path, text)
    site_path = None if site is False else (Path(site) if site else default_site_file())
    site_data = load_site(site_path) if site_path else {}
    return _build(ctx, data, site_data, site_path)


def _merge(site: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(site)
    for k, v in own.items():
        if isinstance(v, dict) and isinstance(merged.get(k), dict):
            merged[k] = {**merged[k], **v}
        else:
            merged[k] = v
    return merged


def _build(ctx: Source, data: dict[str, Any], site: dict[str, Any], site_path: Path | None) -> Matrix:
    check_keys(ctx, data, TOP_KEYS, "")
    if "suite" not in data:
        raise ctx.error("suite", f"missing: name a suite, one of: {', '.join(suites.names())}")
    suite_name = data["suite"]
    if not isinstance(suite_name, str):
        raise ctx.error("suite", "expected a string such as 'pytorch-ddp/resnet50'")
    try:
        suite = suites.get(suite_name)
    except KeyError:
        raise ctx.error("suite", f"unknown suite {suite_name!r}{did_you_mean(suite_name, suites.names())}; "
                                 f"known: {', '.join(suites.names())}") from None
    name = data.get("name", ctx.path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        raise ctx.error("name", "expected a campaign name of letters, digits, '_', '.', '-'")

    measure = _measure(ctx, data.get("measure", {}))
    slurm = _slurm(ctx, _merge(site.get("slurm", {}), data.get("slurm", {})))
    environment = _environment(ctx, _merge(site.get("environment", {}), data.get("environment", {})))
    options = _options(ctx, suite, data.get("options", {}))
    health = _health(ctx, _merge(site.get("health", {}), data.get("health", {})))

    axes = data.get("axes")
    if not isinstance(axes, dict):
        raise ctx.error("axes", "missing [axes] table (devices, batch_size, precision, ...)")
    base = _axes(ctx, suite, axes, "axes", require_all=True)
    rules_ex = _rules(ctx, suite, data.get("exclude", []), "exclude")
    rules_in = _rules(ctx, suite, data.get("include", []), "include")

    cells: list[Cell] = []
    seen: dict[Cell, str] = {}
    for cell in _product(suite, base):
        if any(_matches(suite, cell, rule) for rule in rules_ex):
            continue
        seen[cell] = "axes"
        cells.append(cell)
    for i, rule in enumerate(rules_in):
        full = {**base, **rule}
        for cell in _product(suite, full):
            if cell in seen:
                raise ctx.error(f"include[{i}]", f"duplicate cell {cell.id} (already given by {seen[cell]})")
            seen[cell] = f"include[{i}]"
            cells.append(cell)
    kept, dropped = [], []
    for cell in cells:
        reason = suite.drop_reason(cell) or launchers.container_reason(cell.launcher, environment.container.type)
        (dropped.append(Dropped(cell, reason)) if reason else kept.append(cell))
    if not kept:
        raise ctx.error("axes", "the matrix has no runnable cell" + (f" ({dropped[0].reason})" if dropped else ""))
    return Matrix(ctx.path, name, suite, kept, dropped, measure, slurm, environment, options,
                  str(data.get("description", "")), health)


def _int(ctx: Source, key: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.error(key, f"expected an integer, got {value!r}")
    if value < minimum:
        raise ctx.error(key, f"expected an integer >= {minimum}, got {value}")
    return value


def _measure(ctx: Source, table: Any) -> Measure:
    if not isinstance(table, dict):
        raise ctx.error("measure", "expected a table")
    check_keys(ctx, table, MEASURE_KEYS, "measure")
    vals = {k: _int(ctx, f"measure.{k}", table.get(k, d), _MEASURE_MIN.get(k, 1)) for k, d in MEASURE_KEYS.items()}
    return Measure(**vals)


def _health(ctx: Source, table: Any) -> Health:
    if not isinstance(table, dict):
        raise ctx.error("health", "expected a table")
    check_keys(ctx, table, HEALTH_KEYS, "health")
    v = {**HEALTH_KEYS, **table}
    if not isinstance(v["enabled"], bool):
        raise ctx.error("health.enabled", "expected true or false")
    v["timeout_s"] = _int(ctx, "health.timeout_s", v["timeout_s"])
    for k in ("min_busbw_gbs", "size_mb"):
        if isinstance(v[k], bool) or not isinstance(v[k], (int, float)) or v[k] < 0:
            raise ctx.error(f"health.{k}", f"expected a number >= 0, got {v[k]!r}")
        v[k] = float(v[k])
    v["python"] = _safe(ctx, "health.python", v["python"], _MODULE_NAME)
    return Health(**v)


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
    v["time"] = _safe(ctx, "slurm.time", v["time"])
    try:
        if time_to_minutes(v["time"]) <= 0:
            raise ValueError
    except ValueError:
        raise ctx.error("slurm.time", f"expected a Slurm time limit such as '00:30:00' or '1-00:00:00', got {v['time']!r}") from None
    if not isinstance(v["exclusive"], bool):
        raise ctx.error("slurm.exclusive", "expected true or false")
    if v["gpu_request"] not in GPU_REQUESTS:
        raise ctx.error("slurm.gpu_request", f"expected one of {', '.join(GPU_REQUESTS)}{did_you_mean(str(v['gpu_request']), GPU_REQUESTS)}")
    for k in ("cpus_per_task", "array_throttle"):
        if v[k] is not None:
            v[k] = _int(ctx, f"slurm.{k}", v[k])
    extra = v["extra_directives"]
    if not isinstance(extra, list) or not all(isinstance(x, str) for x in extra):
        raise ctx.error("slurm.extra_directives", "expected a list of strings such as '--reservation=bench'")
    for x in extra:
        if "\n" in x or "\r" in x or not re.fullmatch(r"--?[A-Za-z][A-Za-z0-9\-]*(=[A-Za-z0-9_.,:=/@%+\-\[\]]+)?", x.strip()):
            raise ctx.error("slurm.extra_directives", f"{x!r} is not one sbatch option such as '--reservation=bench'")
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


def _options(ctx: Source, suite: "suites.Suite", table: Any) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ctx.error("options", "expected a table")
    check_keys(ctx, table, suite.options, "options")
    out = dict(suite.options)
    for k, v in table.items():
        default = suite.options[k]
        if default is not None and type(v) is not type(default) and not (isinstance(default, float) and isinstance(v, int)):
            raise ctx.error(f"options.{k}", f"expected {type(default).__name__}, got {v!r}")
        if isinstance(v, str) and ("\n" in v or "\0" in v):
            raise ctx.error(f"options.{k}", "newlines are not allowed")
        why = suite.option_error(k, v)
        if why:
            raise ctx.error(f"options.{k}", why)
        out[k] = v
    return out


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _axes(ctx: Source, suite: "suites.Suite", table: dict[str, Any], prefix: str, require_all: bool) -> dict[str, list[Any]]:
    """Validate an axes table (``[axes]``, an include or an exclude rule) into name -> list of values."""
    allowed = [*CORE_AXES, *suite.axes]
    out: dict[str, list[Any]] = {}
    for key, raw in table.items():
        full = f"{prefix}.{key}"
        if key.startswith("env."):
            name = key[4:]
            if not _ENV_NAME.match(name):
                raise ctx.error(full, f"{name!r} is not a valid environment variable name")
        elif key not in allowed:
            raise ctx.error(full, f"unknown axis{did_you_mean(key, allowed)}; axes of {suite.name}: "
                                  f"{', '.join(allowed)}, or env.NAME for an environment variable")
        if key == "launcher_args" and isinstance(raw, list) and not (raw and isinstance(raw[0], list)):
            raw = [raw]  # one argument list, given flat
        values = _as_list(raw)
        if not values:
            raise ctx.error(full, "empty axis: give at least one value")
        checked = [_axis_value(ctx, suite, key, full, v) for v in values]
        dup = {repr(v) for v in checked if checked.count(v) > 1}
        if dup:
            raise ctx.error(full, f"duplicate value {sorted(dup)[0]}: each value once")
        out[key] = checked
    if require_all:
        for key in ("devices", "batch_size"):
            if key not in out:
                raise ctx.error(f"{prefix}.{key}", "missing axis")
        out.setdefault("precision", ["fp32"])
        out.setdefault("xla", [False])
        out.setdefault("launcher", [suite.launcher])
        out.setdefault("launcher_args", [()])
    return out


def _axis_value(ctx: Source, suite: "suites.Suite", key: str, full: str, v: Any) -> Any:
    if key == "devices":
        m = _DEVICES.match(v) if isinstance(v, str) else None
        if not m:
            raise ctx.error(full, f"expected 'NODESxGPUS' such as '1x8', got {v!r}")
        n, g = int(m.group(1)), int(m.group(2))
        if n < 1 or g < 1:
            raise ctx.error(full, f"nodes and GPUs per node must be >= 1, got {v!r}")
        return (n, g)
    if key == "batch_size":
        return _int(ctx, full, v)
    if key == "precision":
        if v not in PRECISIONS:
            raise ctx.error(full, f"expected one of {', '.join(PRECISIONS)}, got {v!r}{did_you_mean(str(v), PRECISIONS)}")
        return v
    if key == "xla":
        if not isinstance(v, bool):
            raise ctx.error(full, f"expected true or false, got {v!r}")
        return v
    if key == "launcher":
        known = launchers.names()
        if v not in known:
            raise ctx.error(full, f"expected one of {', '.join(known)}, got {v!r}{did_you_mean(str(v), known)}")
        return v
    if key == "launcher_args":
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
            raise ctx.error(full, "expected a list of argument lists, e.g. [['--mca', 'btl', 'self,tcp'], []]")
        if any("\n" in x or "\0" in x for x in v):
            raise ctx.error(full, "newlines are not allowed in launcher arguments")
        return tuple(v)
    if key.startswith("env."):
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise ctx.error(full, f"expected a string or number, got {v!r}")
        if "\0" in str(v):
            raise ctx.error(full, "NUL is not allowed")
        return str(v)
    allowed = suite.axes[key]
    if isinstance(v, (list, dict)):
        raise ctx.error(full, f"expected a scalar value, got {v!r}")
    if allowed and v not in allowed:
        raise ctx.error(full, f"expected one of {', '.join(map(str, allowed))}, got {v!r}{did_you_mean(str(v), map(str, allowed))}")
    return v


def _rules(ctx: Source, suite: "suites.Suite", rules: Any, kind: str) -> list[dict[str, list[Any]]]:
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ctx.error(kind, f"expected [[{kind}]] tables")
    out = []
    for i, rule in enumerate(rules):
        if not rule:
            raise ctx.error(f"{kind}[{i}]", "empty rule")
        out.append(_axes(ctx, suite, rule, f"{kind}[{i}]", require_all=False))
    return out


def _product(suite: "suites.Suite", axes: dict[str, list[Any]]) -> Iterable[Cell]:
    keys = list(axes)
    for combo in itertools.product(*(axes[k] for k in keys)):
        v = dict(zip(keys, combo))
        n, g = v["devices"]
        # a suite axis at its default value is left out, so ids stay short and stable
        params = tuple(sorted((k, v[k]) for k in suite.axes if k in v and v[k] != suite.axis_defaults.get(k)))
        env = tuple(sorted((k[4:], v[k]) for k in keys if k.startswith("env.")))
        yield Cell(suite=suite.name, model=suite.model, framework=suite.framework, nodes=n, gpus_per_node=g,
                   batch_size=v["batch_size"], precision=v["precision"], xla=v["xla"], launcher=v["launcher"],
                   launcher_args=tuple(v["launcher_args"]), params=params, env=env, default_launcher=suite.launcher)


def _matches(suite: "suites.Suite", cell: Cell, rule: dict[str, list[Any]]) -> bool:
    for key, values in rule.items():
        if key == "devices":
            actual: Any = (cell.nodes, cell.gpus_per_node)
        elif key == "launcher_args":
            actual = cell.launcher_args
        elif key.startswith("env."):
            actual = dict(cell.env).get(key[4:])
        elif key in ("batch_size", "precision", "xla", "launcher"):
            actual = getattr(cell, key)
        else:
            actual = cell.param(key, suite.axis_defaults.get(key))
        if actual not in values:
            return False
    return True


# ---------------------------------------------------------------------------------------------- runs


def runs(matrix: Matrix, campaign_dir: str | os.PathLike) -> list[Run]:
    """Every run of the matrix, cell by cell, repeats 0..N-1."""
    d = Path(campaign_dir)
    return [Run(c, r, d) for c in matrix.cells for r in range(matrix.measure.repeats)]
