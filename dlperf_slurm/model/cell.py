"""The matrix's nouns: a :class:`Matrix`, its :class:`Cell` s and their :class:`Run` s, its :class:`Measure`
window and accuracy :class:`Target`, and the cells it dropped. Statuses are :mod:`dlperf_slurm.model.status`'s,
what a parser is told and returns :mod:`dlperf_slurm.model.result`'s, the rows ``collect`` builds
:mod:`dlperf_slurm.model.rows`'s and the matrix's configuration tables :mod:`dlperf_slurm.model.config`'s.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from dlperf_slurm.model.config import Environment, Health, Provenance, Setup, SlurmConfig, System

DEFAULT_WARMUP_STEPS = 20  # method.md: steps skipped before the window
DEFAULT_MEASURE_STEPS = 100  # method.md: steps timed
DEFAULT_REPEATS = 7

_SAFE_ID = re.compile(r"[^A-Za-z0-9_.\-]+")


# ================================================================================================ the matrix


@dataclass(frozen=True)
class Cell:
    """One configuration of the matrix (run ``repeats`` times)."""

    suite: str
    model: str
    framework: str
    nodes: int
    gpus_per_node: int
    batch_size: int  # per device
    precision: str
    xla: bool
    launcher: str
    launcher_args: tuple[str, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()  # suite-declared extra axes, sorted by name
    env: tuple[tuple[str, str], ...] = ()  # free environment-variable axes ("env.NAME"), sorted
    default_launcher: str = field(default="", compare=False)  # the suite's; any other launcher is in the id
    setup: str = ""  # a named bundle of launcher arguments and environment (the matrix's [setups.NAME])
    # the global batch the program is given, as its suite decides it (``Suite.global_batch``: with tensor or
    # pipeline parallelism a ``global_batch`` axis, not GPUs x batch); 0: GPUs x batch per device
    program_batch: int = field(default=0, compare=False)

    @property
    def shape(self) -> str:
        """DLPerf's device-shape label, e.g. ``2n8g``."""
        return f"{self.nodes}n{self.gpus_per_node}g"

    @property
    def devices(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def global_batch(self) -> int:
        """The batch one step of the program takes over every GPU: what its suite decided
        (:attr:`program_batch`), else GPUs x batch per device."""
        return self.program_batch or self.devices * self.batch_size

    def param(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)

    def _variant_parts(self) -> list[str]:
        parts = [] if self.launcher == (self.default_launcher or self.launcher) else [f"launcher-{self.launcher}"]
        parts += [f"setup-{self.setup}"] if self.setup else []
        parts += [f"{k}-{v}" for k, v in self.params]
        parts += [f"{k}-{v}" for k, v in self.env]
        if self.launcher_args:
            joined = "-".join(self.launcher_args)
            digest = hashlib.sha1("\0".join(self.launcher_args).encode()).hexdigest()[:6]
            parts.append(f"la-{joined[:24]}-{digest}")
        return [_SAFE_ID.sub("-", p).strip("-") for p in parts]

    @functools.cached_property
    def id(self) -> str:
        """Stable readable id, e.g. ``bert-base.pytorch-ddp.2x8.b96.amp.xla0``."""
        base = (f"{self.model}.{self.framework}.{self.nodes}x{self.gpus_per_node}.b{self.batch_size}.{self.precision}"
                f".xla{int(self.xla)}")
        parts = self._variant_parts()
        return ".".join([base, *parts]) if parts else base

    @functools.cached_property
    def stem(self) -> str:
        """File stem in DLPerf's convention: ``<model>_b<bsz>_<prec>[_xla][_<variant>...]``."""
        parts = [self.model, f"b{self.batch_size}", self.precision]
        if self.xla:
            parts.append("xla")
        parts += [p.replace("_", "-") for p in self._variant_parts()]
        return "_".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "suite": self.suite, "framework": self.framework, "model": self.model,
            "nodes": self.nodes, "gpus_per_node": self.gpus_per_node, "shape": self.shape,
            "batch_size": self.batch_size, "global_batch": self.global_batch, "precision": self.precision,
            "xla": self.xla, "launcher": self.launcher, "launcher_args": list(self.launcher_args),
            "params": dict(self.params), "env": dict(self.env), "default_launcher": self.default_launcher,
            "setup": self.setup,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Cell":
        """The cell :meth:`as_dict` wrote (a manifest row, a JSON summary). A dict from before
        ``default_launcher`` was stored learns it from its id: ``launcher-X`` in the id means another default."""
        launcher = str(d.get("launcher") or "")
        default = d.get("default_launcher")
        if default is None:
            default = f"not-{launcher}" if f".launcher-{launcher}" in str(d.get("id", "")) else launcher
        return cls(suite=str(d["suite"]), model=str(d["model"]), framework=str(d["framework"]),
                   nodes=int(d["nodes"]), gpus_per_node=int(d["gpus_per_node"]), batch_size=int(d["batch_size"]),
                   precision=str(d["precision"]), xla=bool(d["xla"]), launcher=launcher,
                   launcher_args=tuple(d.get("launcher_args") or ()),
                   params=tuple(sorted((d.get("params") or {}).items())),
                   env=tuple(sorted((d.get("env") or {}).items())), default_launcher=str(default),
                   setup=str(d.get("setup") or ""), program_batch=_program_batch(d))


def _program_batch(d: Mapping[str, Any]) -> int:
    """A stored cell's global batch when it is not GPUs x batch (0 otherwise, or when it is no number)."""
    try:
        gb = int(d.get("global_batch") or 0)
        return gb if gb != int(d["nodes"]) * int(d["gpus_per_node"]) * int(d["batch_size"]) else 0
    except (TypeError, ValueError):
        return 0


MODES = ("throughput", "accuracy")
METRICS = ("top1", "top5", "auc", "lfw")  # an accuracy run's target metrics (auc: W&D's, lfw: a face model's)


@dataclass(frozen=True)
class Target:
    """An accuracy run's target: the first evaluation whose ``metric`` reaches ``value`` (a fraction) ends it."""

    metric: str  # one of METRICS
    value: float

    def text(self) -> str:
        return f"{self.metric} {self.value:.2%}"


@dataclass(frozen=True)
class Measure:
    repeats: int = DEFAULT_REPEATS
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    measure_steps: int = DEFAULT_MEASURE_STEPS
    # A run whose log (and heartbeat) stops changing for longer than its hang bound is stopped by its own job
    # script and reads HANG. The bound: hang_timeout seconds (0: never stopped); once a built-in workload reports
    # its median step time, max(hang_min, hang_factor x that median).
    hang_timeout: int = 900
    hang_factor: int = 10
    hang_min: int = 60
    # "accuracy": the program trains ``epochs`` epochs of a real dataset, evaluating after each, and stops at the
    # first evaluation that reaches ``target`` (method.md, "Accuracy runs"); "throughput": the timed window alone
    mode: str = "throughput"
    epochs: int = 0
    target: Target | None = None

    @property
    def accuracy(self) -> bool:
        return self.mode == "accuracy"


@dataclass(frozen=True)
class Dropped:
    cell: Cell
    reason: str


@dataclass(kw_only=True)
class Matrix:
    path: Path
    name: str
    suites: tuple[Any, ...]  # the registered dlperf_slurm.suites.Suite objects it names, in order
    cells: list[Cell]
    dropped: list[Dropped]
    measure: Measure
    slurm: SlurmConfig
    environment: Environment
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # suite name -> that suite's options
    description: str = ""
    grouped: bool = False  # suites given as a list: each framework's runs in a folder of its own
    setups: dict[str, "Setup"] = field(default_factory=dict)  # the matrix's [setups.NAME] bundles
    health: Health = Health()
    provenance: Provenance = Provenance()
    system: System | None = None  # the site file's named system (and partition) it is for, if any
    overridden: tuple[str, ...] = ()  # the matrix's keys that win over the system's own value, one line each
    node_gpus: str = ""  # how relative shapes (1xall) were resolved: one line for plan ('' when none was given)
    gpus_per_node: int | None = None  # the GPUs a node has, where something says (gpu_hours)

    def suite_of(self, cell: Cell) -> Any:
        """The suite that runs ``cell``."""
        return next(s for s in self.suites if s.name == cell.suite)

    def options_for(self, cell: Cell) -> dict[str, Any]:
        """The options of the suite that runs ``cell``."""
        return self.options.get(cell.suite, {})

    @property
    def runs(self) -> int:
        return len(self.cells) * self.measure.repeats


@dataclass(frozen=True)
class Run:
    """One repeat of one cell, with its files in DLPerf's layout under the campaign folder:
    ``<campaign>/<N>n<G>g/<model>_b<bsz>_<prec>[_xla][_variant]_<repeat>.{log,sbatch,exit,work/}``."""

    cell: Cell
    repeat: int
    campaign_dir: Path
    group: str = ""  # a folder between the campaign and the shape (a matrix of several suites: the framework)

    @property
    def key(self) -> str:
        return f"{self.cell.id}.r{self.repeat}"

    @functools.cached_property
    def base(self) -> Path:
        return self.campaign_dir.joinpath(self.group, self.cell.shape, f"{self.cell.stem}_{self.repeat}")

    @functools.cached_property
    def log(self) -> Path:
        return self.base.with_name(self.base.name + ".log")

    @functools.cached_property
    def script(self) -> Path:
        return self.base.with_name(self.base.name + ".sbatch")

    @functools.cached_property
    def marker(self) -> Path:
        """Written atomically by the job script at its end: the exit status of the launcher."""
        return self.base.with_name(self.base.name + ".exit")

    @functools.cached_property
    def work_dir(self) -> Path:
        """The run's own folder for what its program writes (model, checkpoints, outputs), for suites whose
        program names it (``suites.RUN_DIR``): the job script empties it at every start."""
        return self.base.with_name(self.base.name + ".work")


# ================================================================================================ scheduling


# ================================================================================================ parsing
