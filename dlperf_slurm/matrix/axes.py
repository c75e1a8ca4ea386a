"""A matrix's axes, include and exclude rules into cells, for one suite or several.

Core axes (devices, batch size, precision, XLA, launcher, launcher arguments) mean the same for every suite; a
suite's extra axis (``suite.axes``) applies to the suites that declare it and is checked against each one's
allowed values. A rule (``[[include]]``/``[[exclude]]``) may name ``suite`` (one name or a list) to apply to
those suites only; a rule naming an extra axis applies only to the suites that have it. Every error names the
file, key and line (through :class:`~dlperf_slurm.matrix.toml_source.Source`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from dlperf_slurm import launchers
from dlperf_slurm.errors import MatrixError
from dlperf_slurm.matrix.toml_source import Source, did_you_mean
from dlperf_slurm.model.cell import Cell
from dlperf_slurm.words import plural

if TYPE_CHECKING:
    from dlperf_slurm.suites import Suite

#: fp8 (per-tensor or current scaling), mxfp8 and nvfp4 (Blackwell's block formats): a suite whose program has them
#: (torchtitan, Megatron-Bridge)
PRECISIONS = ("fp32", "amp", "fp16", "bf16", "fp8", "mxfp8", "nvfp4")
CORE_AXES = ("devices", "batch_size", "precision", "xla", "launcher", "launcher_args", "setup")
SUITE_KEY = "suite"  # in a rule: the suites it applies to

# Bounds no real benchmark reaches, so that a typo (an extra 0, 1e9 repeats) is an error at load and not a render
# or submit that fills the machine's memory with runs or scripts. Nodes: the largest Slurm clusters have about ten
# thousand nodes (Frontier 9,408, Aurora 10,624), and Slurm's own node records and bitmaps are sized for that order;
# 100,000 is ten times more. GPUs (ranks) per node: the densest nodes have 8 to 16 GPUs (HGX, DGX-2; 8 GCDs on
# Frontier's); 64 is four times that, and under Slurm's default MaxTasksPerNode (512) for per-GPU launchers. A batch
# per device: DLPerf's largest is W&D's 16,384 on one GPU; 2**20 is 64 times that and, times 64 GPUs per node, still
# a 32-bit integer (the node's or global batch some programs are given). Runs: cells x repeats, the scripts,
# manifest rows and jobs one submit makes; DLPerf's largest campaign here is 588.
MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 64
MAX_BATCH_SIZE = 2 ** 20
MAX_RUNS = 100_000
# Repeats of a cell: DLPerf ran 5 to 7, the README's top-up 21 at most; 1,000 is far beyond any median's need.
MAX_REPEATS = 1_000

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEVICES = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")
#: a shape relative to the GPUs a node of the site has: ``NxALL`` (every GPU of N nodes), ``Nxhalf`` (half of them)
_RELATIVE = re.compile(r"^\s*(\d+)\s*[xX]\s*(all|half)\s*$", re.I)
#: what the relative words mean, of a node's G GPUs
RELATIVE_SHAPES = {"all": lambda g: g, "half": lambda g: g // 2}

#: the GPUs a node of the site has, asked only when a relative shape is given (``key``: the matrix key, for errors)
NodeGpus = Callable[[str], int]

Rule = dict[str, list[Any]]


def cells(ctx: Source, suite_list: Sequence["Suite"], table: dict[str, Any], include: Any, exclude: Any,
          setups: Sequence[str] = (), repeats: int = 1, node_gpus: NodeGpus | None = None) -> list[Cell]:
    """Every cell of the matrix, suite by suite (in the order named), each: the axes' product minus the
    exclude rules, then the include rules' cells. A cell given twice is an error. ``setups``: the names of the
    matrix's ``[setups.NAME]`` bundles, the values the ``setup`` axis may take. More than :data:`MAX_RUNS` runs
    (cells x ``repeats``) is an error, found before the cells are made (see :func:`too_many_runs`). A shape
    relative to a node's GPUs (``1xall``, ``2xhalf``) is resolved with ``node_gpus`` (asked only then)."""
    setups = tuple(setups)
    _known_keys(ctx, suite_list, table, "axes")
    includes = _rule_tables(ctx, suite_list, include, "include")
    excludes = _rule_tables(ctx, suite_list, exclude, "exclude")
    plans = []  # per suite: its axes, its exclude rules, its include rules (each with the axes it leaves as they are)
    for suite in suite_list:
        base = _axes(ctx, suite, _own(suite, table), "axes", True, setups, node_gpus)
        rules_ex = [_axes(ctx, suite, _own(suite, r), f"exclude[{i}]", False, setups, node_gpus)
                    for i, r in excludes if _applies(suite, r)]
        rules_in = [(i, {**base, **_axes(ctx, suite, _own(suite, r), f"include[{i}]", False, setups, node_gpus)})
                    for i, r in includes if _applies(suite, r)]
        plans.append((suite, base, rules_ex, rules_in))
    limit = MAX_RUNS // repeats
    if not any(ex for _, _, ex, _ in plans):  # the exact count, before a cell is made
        n = sum(_size(base) + sum(_size(rule) for _, rule in rules_in) for _, base, _, rules_in in plans)
        if n > limit:
            raise too_many_runs(ctx, table, include, n, repeats)
    out: list[Cell] = []
    for suite, base, rules_ex, rules_in in plans:
        seen: dict[Cell, str] = {}
        for cell in _product(suite, base):
            if any(_matches(suite, cell, rule) for rule in rules_ex):
                continue
            seen[cell] = "axes"
            out.append(cell)
            if len(out) > limit:  # with exclude rules: counted as the cells are made, never more held
                raise too_many_runs(ctx, table, include, limit, repeats, at_least=True)
        for i, rule in rules_in:
            for cell in _product(suite, rule):
                if cell in seen:
                    raise ctx.error(f"include[{i}]", f"duplicate cell {cell.id} (already given by {seen[cell]})")
                seen[cell] = f"include[{i}]"
                out.append(cell)
                if len(out) > limit:
                    raise too_many_runs(ctx, table, include, limit, repeats, at_least=True)
    return out


def _size(rule: Rule) -> int:
    return math.prod(len(v) for v in rule.values())


def too_many_runs(ctx: Source, table: dict[str, Any], include: Any, cells: int, repeats: int,
                  at_least: bool = False) -> MatrixError:
    """More than :data:`MAX_RUNS` runs: how many (``at_least``: more than ``cells`` cells) and from which axes, at
    the key of the largest factor (an axis of [axes], or the repeats)."""
    sizes = {k: len(v) for k, v in table.items() if isinstance(v, list) and len(v) > 1}
    axis, most = max(sizes.items(), key=lambda kv: kv[1], default=("", 1))
    key = "measure.repeats" if repeats >= most else f"axes.{axis}"
    source = " x ".join(f"{k} {n:,}" for k, n in sizes.items()) or "one value per axis"
    if isinstance(include, list) and include:
        source += f", plus {plural(len(include), '[[include]] rule')}"
    runs = f"more than {MAX_RUNS:,} runs" if at_least else plural(cells * repeats, "run", grouped=True)
    return ctx.error(key, f"{'more than ' * at_least}{plural(cells, 'cell', grouped=True)} ({source}) x "
                          f"{plural(repeats, 'repeat', grouped=True)} = {runs}; "
                          f"a matrix may ask for at most {MAX_RUNS:,} runs: give fewer axis values or repeats, or "
                          "split it into several matrices")


def _extra_axes(suite_list: Sequence["Suite"]) -> list[str]:
    return sorted({k for s in suite_list for k in s.axes})


def _known_keys(ctx: Source, suite_list: Sequence["Suite"], table: dict[str, Any], prefix: str,
                rule: bool = False) -> None:
    """Every key names an axis of some suite of the matrix (or env.NAME; ``suite`` in a rule)."""
    allowed = [*CORE_AXES, *_extra_axes(suite_list)] + ([SUITE_KEY] if rule else [])
    names = ", ".join(s.name for s in suite_list)
    for key in table:
        full = f"{prefix}.{key}"
        if key.startswith("env."):
            if not _ENV_NAME.match(key[4:]):
                raise ctx.error(full, f"{key[4:]!r} is not a valid environment variable name")
        elif key not in allowed:
            raise ctx.error(full, f"unknown axis{did_you_mean(key, allowed)}; axes of {names}: "
                                  f"{', '.join(allowed)}, or env.NAME for an environment variable")


def _rule_tables(ctx: Source, suite_list: Sequence["Suite"], rules: Any, kind: str) -> list[tuple[int, dict[str, Any]]]:
    """The rules of one kind, checked for keys, with their index (for messages) and ``suite`` as a list."""
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ctx.error(kind, f"expected [[{kind}]] tables")
    names = [s.name for s in suite_list]
    out = []
    for i, rule in enumerate(rules):
        if not rule:
            raise ctx.error(f"{kind}[{i}]", "empty rule")
        _known_keys(ctx, suite_list, rule, f"{kind}[{i}]", rule=True)
        rule = dict(rule)
        if SUITE_KEY in rule:
            wanted = rule[SUITE_KEY] if isinstance(rule[SUITE_KEY], list) else [rule[SUITE_KEY]]
            for w in wanted:
                if w not in names:
                    raise ctx.error(f"{kind}[{i}].{SUITE_KEY}", f"{w!r} is not a suite of this matrix"
                                    f"{did_you_mean(str(w), names)}; its suites: {', '.join(names)}")
            rule[SUITE_KEY] = wanted
        out.append((i, rule))
    return out


def _applies(suite: "Suite", rule: dict[str, Any]) -> bool:
    """A rule applies to a suite it names (all when it names none) that has every extra axis it uses."""
    if SUITE_KEY in rule and suite.name not in rule[SUITE_KEY]:
        return False
    return all(k in CORE_AXES or k.startswith("env.") or k in suite.axes for k in rule if k != SUITE_KEY)


def _own(suite: "Suite", table: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``table`` that are axes of ``suite`` (core, env.NAME or its own extra axes)."""
    return {k: v for k, v in table.items() if k in CORE_AXES or k.startswith("env.") or k in suite.axes}


def _duplicates(values: list[Any]) -> set[str]:
    """The reprs of the values given more than once (equal as ``==`` says; a list by its repr), in linear time."""
    seen: dict[Any, Any] = {}
    dup: set[str] = set()
    for v in values:
        try:
            key: Any = ("=", v)
            hash(key)
        except TypeError:  # a list (launcher_args)
            key = ("repr", repr(v))
        if key in seen:
            dup.update((repr(seen[key]), repr(v)))
        else:
            seen[key] = v
    return dup


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _axes(ctx: Source, suite: "Suite", table: dict[str, Any], prefix: str, require_all: bool,
          setups: tuple[str, ...] = (), node_gpus: NodeGpus | None = None) -> Rule:
    """Validate an axes table (``[axes]``, an include or an exclude rule) into name -> list of values."""
    out: Rule = {}
    for key, raw in table.items():
        full = f"{prefix}.{key}"
        if key == "launcher_args" and isinstance(raw, list) and not (raw and isinstance(raw[0], list)):
            raw = [raw]  # one argument list, given flat
        values = _as_list(raw)
        if not values:
            raise ctx.error(full, "empty axis: give at least one value")
        checked = [_axis_value(ctx, suite, key, full, v, setups, node_gpus) for v in values]
        if key == "devices" and any(isinstance(v, str) and _RELATIVE.match(v) for v in values):
            # a relative shape that comes to one given already (1xall on a 1-GPU site, beside 1x1) is kept once
            checked = list(dict.fromkeys(checked))
        dup = _duplicates(checked)
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
        out.setdefault("setup", [""])
    return out


def _axis_value(ctx: Source, suite: "Suite", key: str, full: str, v: Any, setups: tuple[str, ...] = (),
                node_gpus: NodeGpus | None = None) -> Any:
    if key == "devices":
        return _shape(ctx, full, v, node_gpus)
    if key == "batch_size":
        if isinstance(v, bool) or not isinstance(v, int):
            raise ctx.error(full, f"expected an integer, got {v!r}")
        if v < 1:
            raise ctx.error(full, f"expected an integer >= 1, got {v}")
        if v > MAX_BATCH_SIZE:
            raise ctx.error(full, f"at most {MAX_BATCH_SIZE:,} per device, got {v:,}")
        return v
    if key == "precision":
        if v not in PRECISIONS:
            raise ctx.error(full, f"expected one of {', '.join(PRECISIONS)}, got {v!r}"
                                  f"{did_you_mean(str(v), PRECISIONS)}")
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
    if key == "setup":
        if v not in setups:
            names = ", ".join(setups) or "none: add a [setups.NAME] table"
            raise ctx.error(full, f"unknown setup {v!r}{did_you_mean(str(v), setups)}; the matrix's setups: {names}")
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
        raise ctx.error(full, f"expected one of {', '.join(map(str, allowed))} ({suite.name}), got {v!r}"
                              f"{did_you_mean(str(v), map(str, allowed))}")
    return v


def _shape(ctx: Source, full: str, v: Any, node_gpus: NodeGpus | None) -> tuple[int, int]:
    """A ``devices`` value: ``NODESxGPUS``, or a shape relative to the GPUs a node has (``1xall``, ``1xhalf``)."""
    rel = _RELATIVE.match(v) if isinstance(v, str) else None
    if rel:
        return _relative(ctx, full, v, int(rel.group(1)), rel.group(2).lower(), node_gpus)
    m = _DEVICES.match(v) if isinstance(v, str) else None
    if not m:
        raise ctx.error(full, f"expected 'NODESxGPUS' such as '1x8', or a shape relative to the GPUs a node has: "
                              f"'1xall', '2xall', '1xhalf'; got {v!r}")
    n, g = int(m.group(1)), int(m.group(2))
    if n < 1 or g < 1:
        raise ctx.error(full, f"nodes and GPUs per node must be >= 1, got {v!r}")
    if n > MAX_NODES or g > MAX_GPUS_PER_NODE:
        raise ctx.error(full, f"at most {MAX_NODES:,} nodes of at most {MAX_GPUS_PER_NODE} GPUs each, got {v!r}")
    return (n, g)


def _relative(ctx: Source, full: str, v: str, n: int, word: str, node_gpus: NodeGpus | None) -> tuple[int, int]:
    """``NxALL`` / ``Nxhalf``: N nodes of all (half) the GPUs a node of the site has."""
    if node_gpus is None:
        raise ctx.error(full, f"{v!r} is relative to the GPUs a node has, which nothing here says")
    have = node_gpus(full)
    g = RELATIVE_SHAPES[word](have)
    if n < 1 or g < 1:
        raise ctx.error(full, f"{v!r}: nodes and GPUs per node must be >= 1 (a node has {plural(have, 'GPU')}: "
                              f"half of it is none)" if g < 1 else
                        f"{v!r}: nodes and GPUs per node must be >= 1")
    if n > MAX_NODES:
        raise ctx.error(full, f"at most {MAX_NODES:,} nodes, got {v!r}")
    return (n, g)


def _product(suite: "Suite", axes: Rule) -> Iterable[Cell]:
    keys = list(axes)
    for combo in itertools.product(*(axes[k] for k in keys)):
        v = dict(zip(keys, combo))
        n, g = v["devices"]
        # a suite axis at its default value is left out, so ids stay short and stable
        params = tuple(sorted((k, v[k]) for k in suite.axes if k in v and v[k] != suite.axis_defaults.get(k)))
        env = tuple(sorted((k[4:], v[k]) for k in keys if k.startswith("env.")))
        cell = Cell(suite=suite.name, model=suite.model, framework=suite.framework, nodes=n, gpus_per_node=g,
                    batch_size=v["batch_size"], precision=v["precision"], xla=v["xla"], launcher=v["launcher"],
                    launcher_args=tuple(v["launcher_args"]), params=params, env=env, default_launcher=suite.launcher,
                    setup=v["setup"])
        gb = suite.global_batch(cell)  # the suite decides the batch its program is given
        yield dataclasses.replace(cell, program_batch=gb) if gb != cell.global_batch else cell


def _matches(suite: "Suite", cell: Cell, rule: Rule) -> bool:
    for key, values in rule.items():
        if key == "devices":
            actual: Any = (cell.nodes, cell.gpus_per_node)
        elif key == "launcher_args":
            actual = cell.launcher_args
        elif key.startswith("env."):
            actual = dict(cell.env).get(key[4:])
        elif key in ("batch_size", "precision", "xla", "launcher", "setup"):
            actual = getattr(cell, key)
        else:
            actual = cell.param(key, suite.axis_defaults.get(key))
        if actual not in values:
            return False
    return True
