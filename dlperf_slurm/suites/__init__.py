"""Suites: one small registered unit per framework x model — its launch spec and its parser side by side.

A suite module defines subclasses of :class:`Suite` and decorates them with :func:`register`.
Modules are imported lazily, on the first lookup, so the CLI starts fast.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from dlperf_slurm.matrix import Cell, Measure

# Every suite module, imported on first use of the registry.
_MODULES = ("pytorch_ddp", "ngc_pytorch", "tf2", "tf_cnn")
_REGISTRY: dict[str, "Suite"] = {}
_loaded = False


class Status:
    """Run statuses of the measurement contract (method.md). Plain strings, so they serialise as-is."""

    OK = "OK"
    OOM = "OOM"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    CANCELLED = "CANCELLED"
    PREEMPTED = "PREEMPTED"
    REQUEUED = "REQUEUED"
    LAUNCH_FAILED = "LAUNCH_FAILED"  # no step lines at all
    INCOMPLETE = "INCOMPLETE"  # fewer steps than the window
    NONFINITE = "NONFINITE"  # loss NaN/inf inside the run
    FAILED = "FAILED"  # non-zero exit, cause unknown
    UNMEASURED = "UNMEASURED"  # the run went past the window, but its log does not cover it (e.g. coarse logging)
    PARSE_ERROR = "PARSE_ERROR"  # the parser itself failed on this log (a bug to report; never a number)
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    UNSUBMITTED = "UNSUBMITTED"

    FINAL_FAILURES = (OOM, TIMEOUT, NODE_FAIL, CANCELLED, PREEMPTED, LAUNCH_FAILED, INCOMPLETE, NONFINITE, FAILED,
                      UNMEASURED, PARSE_ERROR)
    ACTIVE = (PENDING, RUNNING, REQUEUED)


@dataclass
class ParseContext:
    """What a parser needs to know about the run whose log it reads."""

    nodes: int
    gpus_per_node: int
    batch_size: int  # per device, as in the matrix
    warmup_steps: int = 20
    measure_steps: int = 100
    precision: str = "fp32"
    options: Mapping[str, Any] = field(default_factory=dict)  # the suite's [options] (e.g. batches_per_iter)

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def global_batch(self) -> int:
        return self.world_size * self.batch_size


@dataclass
class RunResult:
    """What one run's log says, per method.md. Figures are None when the log does not give them."""

    status: str
    reason: str = ""
    throughput: float | None = None  # samples/s, time flavour (primary)
    throughput_speed: float | None = None  # samples/s, speed flavour (mean of printed per-step figures)
    latency_ms: float | None = None  # measured wall time / measured steps
    steps_seen: int = 0
    mem_peak_mib: float | None = None  # max "used" over every GPU of every node (NVML)
    mem_gpu0_mib: float | None = None  # GPU 0 of the first node (DLPerf comparability)
    mem_allocator_mib: float | None = None  # framework allocator peak (torch max_memory_allocated), max over ranks
    mem_reason: str = ""  # why memory is missing (e.g. CPU run)
    gpu_util: float | None = None
    loss_finite: bool | None = None
    tiny: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Suite:
    """A framework x model: how to launch it and how to read its log.

    Subclasses set the class attributes and implement :meth:`program` and :meth:`parse`.
    """

    framework: ClassVar[str]
    model: ClassVar[str]
    description: ClassVar[str] = ""
    launcher: ClassVar[str] = "srun"  # default launcher
    launchers: ClassVar[tuple[str, ...]] = ("srun",)  # launchers this suite can run under
    precisions: ClassVar[tuple[str, ...]] = ("fp32", "amp")
    supports_xla: ClassVar[bool] = False
    xla_name: ClassVar[str] = "XLA"  # what the xla axis means for this suite (e.g. torch.compile)
    # extra axes the suite declares: name -> allowed values (empty tuple: any scalar)
    axes: ClassVar[Mapping[str, tuple]] = {}
    axis_defaults: ClassVar[Mapping[str, Any]] = {}
    # suite options ([options] table of a matrix): name -> default
    options: ClassVar[Mapping[str, Any]] = {}
    published: ClassVar[str] = "time"  # which throughput flavour the suite publishes: "time" or "speed"
    sample_unit: ClassVar[str] = "samples/s"

    @property
    def name(self) -> str:
        return f"{self.framework}/{self.model}"

    def drop_reason(self, cell: "Cell") -> str | None:
        """Why this suite cannot run ``cell`` (None if it can)."""
        if cell.precision not in self.precisions:
            return f"{self.name} has no precision {cell.precision!r} (has: {', '.join(self.precisions)})"
        if cell.xla and not self.supports_xla:
            return f"{self.name} has no {self.xla_name} mode"
        if cell.launcher not in self.launchers:
            return f"{self.name} cannot run under launcher {cell.launcher!r} (can: {', '.join(self.launchers)})"
        return None

    def program(self, cell: "Cell", measure: "Measure", options: Mapping[str, Any]) -> list[str]:
        """The argv of one training process (what the launcher starts on every rank)."""
        raise NotImplementedError

    def environment(self, cell: "Cell", options: Mapping[str, Any]) -> dict[str, str]:
        """Environment variables the suite needs (on top of the matrix's)."""
        return {}

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        """Read one run's log (an iterable of text lines, streamed once) into a :class:`RunResult`."""
        raise NotImplementedError


def register(cls: type[Suite]) -> type[Suite]:
    """Class decorator: add a suite to the registry under ``framework/model``."""
    inst = cls()
    if inst.name in _REGISTRY:
        raise RuntimeError(f"suite {inst.name} registered twice")
    _REGISTRY[inst.name] = inst
    return cls


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in _MODULES:
            importlib.import_module(f"{__name__}.{mod}")


def get(name: str) -> Suite:
    """The suite registered as ``name`` (``framework/model``); KeyError if none."""
    _load()
    return _REGISTRY[name]


def names() -> list[str]:
    """Every registered suite name, sorted."""
    _load()
    return sorted(_REGISTRY)
