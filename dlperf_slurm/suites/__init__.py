"""Suites: one small registered unit per framework x model — its launch spec and its parser side by side.

A suite module defines subclasses of :class:`Suite` and decorates them with :func:`register`.
Modules are imported lazily, on the first lookup, so the CLI starts fast.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from typing import Any, ClassVar, Iterable, Iterator, Mapping, Sequence

from dlperf_slurm.model.cell import Cell, Measure  # noqa: F401  (suites use them)
from dlperf_slurm.model.result import ParseContext, RunResult  # noqa: F401  (suites use them)
from dlperf_slurm.model.status import Status  # noqa: F401  (suites use them)

# Every suite module: a lookup imports the one its suite's framework names (``tf-cnn/vgg16``: tf_cnn), or all of them
# when the suite lives elsewhere (``deepspeed/gpt``: gpt); listing the registry imports all.
_MODULES = ("pytorch_ddp", "ngc_pytorch", "tf2", "tf_cnn", "paddle", "mindspore", "pytorch_examples", "gpt", "oneflow",
            "mxnet", "ngc_tf1", "wdl", "insightface", "tensorpack", "torchtitan", "megatron_bridge")
_REGISTRY: dict[str, "Suite"] = {}
_loaded = False

#: In a program's argv, stands for the run's own folder (``Run.work_dir``, ``<run>.work``): the renderer puts
#: each run's path in its place, and the job script empties that folder at every start. A program's model,
#: checkpoint and output directories go there, so no repeat (nor a retry) reads what another one left.
RUN_DIR = "{run_dir}"
#: In a program's argv, stands for the run's repeat number (0, 1, ...): the renderer puts it in its place, as it
#: does RUN_DIR. An accuracy run gives each repeat its own seed with it, so the spread over the repeats of a cell is
#: the spread over seeds (as MLPerf's repeated runs), not the same training seven times.
REPEAT = "{repeat}"


#: Under srun (one task per GPU) the ranks learn their place from Slurm: torch's env:// rendezvous, which Megatron
#: and DeepSpeed's init_distributed read, wants RANK, LOCAL_RANK and WORLD_SIZE (MASTER_ADDR/PORT: the job script's).
SRUN_RANKS = 'export RANK="$SLURM_PROCID" LOCAL_RANK="$SLURM_LOCALID" WORLD_SIZE="$SLURM_NTASKS"; exec "$@"'


def ranks_from_slurm(cell: Cell, argv: list[str]) -> list[str]:
    """The argv a rank runs: under srun wrapped to export the rank variables torch's env:// rendezvous reads."""
    return ["bash", "-c", SRUN_RANKS, "dlperf", *argv] if cell.launcher == "srun" else argv


class Suite:
    """A framework x model: how to launch it and how to read its log.

    Subclasses set the class attributes and implement :meth:`program` and :meth:`parse`.
    """

    framework: ClassVar[str]
    model: ClassVar[str]
    # the framework's Python modules its program imports: before the launch, the program's interpreter imports them
    # on every node of the run (with dlperf_slurm, where the program is one of its modules), see node_imports
    imports: ClassVar[tuple[str, ...]] = ()
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
    # numeric options' least value: name -> (least, what the option is, for the error that names it)
    option_minimum: ClassVar[Mapping[str, tuple[int, str]]] = {}
    published: ClassVar[str] = "time"  # which throughput flavour the suite publishes: "time" or "speed"
    # (warmup, measure) steps DLPerf's own extraction script used on this program's logs: what
    # ``collect --from DIR --suite S`` times by default (None: the default window, 20 then 100)
    dlperf_window: ClassVar[tuple[int, int] | None] = None
    sample_unit: ClassVar[str] = "samples/s"
    # whether its program can train to an accuracy ([measure] mode = "accuracy": epochs of a real dataset, evaluated
    # after each, stopping at the target) and its parser reads the evaluations into RunResult.extra["evals"]
    accuracy: ClassVar[bool] = False
    # the evaluation lines of its program its parser reads (keys of dlperf_slurm.parsing.evals.FORMATS): into the
    # same RunResult.extra fields, read against a campaign's target (collect --from DIR --target top1:0.75)
    evaluations: ClassVar[tuple[str, ...]] = ()

    @property
    def name(self) -> str:
        return f"{self.framework}/{self.model}"

    def node_imports(self, program: Sequence[str]) -> tuple[str, ...]:
        """What the program's interpreter must import on every node before the launch: ``dlperf_slurm`` where the
        program is one of its modules (``python -m dlperf_slurm....``), then the suite's framework (:attr:`imports`).
        Nothing for a program that is no ``python ...`` argv (its interpreter is not known here)."""
        if not program or not os.path.basename(str(program[0])).startswith("python"):
            return ()
        own = ("dlperf_slurm",) if any(str(a).startswith("dlperf_slurm.") for a in program) else ()
        return tuple(dict.fromkeys((*own, *self.imports)))

    def drop_reason(self, cell: Cell) -> str | None:
        """Why this suite cannot run ``cell`` (None if it can)."""
        if cell.precision not in self.precisions:
            return f"{self.name} has no precision {cell.precision!r} (has: {', '.join(self.precisions)})"
        if cell.xla and not self.supports_xla:
            return f"{self.name} has no {self.xla_name} mode"
        if cell.launcher not in self.launchers:
            return f"{self.name} cannot run under launcher {cell.launcher!r} (can: {', '.join(self.launchers)})"
        return None

    def global_batch(self, cell: Cell) -> int:
        """The batch one step of the program takes over every GPU (what ``plan`` and the summaries show, and the
        figures' samples per step): GPUs x batch per device, unless the suite's program is given another."""
        return cell.devices * cell.batch_size

    def program(self, cell: Cell, measure: Measure, options: Mapping[str, Any]) -> list[str]:
        """The argv of one training process (what the launcher starts on every rank)."""
        raise NotImplementedError

    def accuracy_error(self, cell: Cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        """Why ``cell`` cannot be an accuracy run (``[measure] mode = "accuracy"``) with these options, as (the
        matrix key to name, what to set): e.g. synthetic data, which cannot be evaluated; None if it can."""
        return None

    def option_error(self, name: str, value: Any) -> str | None:
        """Why ``value`` (already of the default's type, at least its :attr:`option_minimum`) is no valid value of
        option ``name``; None if it is."""
        return None

    def layout_text(self, cell: Cell) -> str:
        """The cell's parallel layout as its program is given it, for the summary tables (``tp4 pp8 cp1 dp2 GA128``:
        the degrees, the data-parallel size and the gradient accumulation steps); "" for a suite without one."""
        return ""

    def launcher_args(self, cell: Cell) -> tuple[str, ...]:
        """Arguments the suite's log needs of the cell's launcher, before the matrix's own (e.g. every rank's lines
        labelled with its rank, where the program prints on every rank)."""
        return ()

    def environment(self, cell: Cell, options: Mapping[str, Any]) -> dict[str, str]:
        """Environment variables the suite needs (on top of the matrix's)."""
        return {}

    def files(self, cell: Cell, measure: Measure, options: Mapping[str, Any]) -> dict[str, str]:
        """Files the program reads (name -> text, e.g. a DeepSpeed config), written by the job script into the
        run's own folder (``RUN_DIR``) before the launch; the program names them as ``f"{RUN_DIR}/<name>"``."""
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


def unregister(name: str) -> None:
    """Remove the suite registered as ``name`` (for test-only suites); KeyError if none."""
    del _REGISTRY[name]


@contextlib.contextmanager
def registered(cls: type[Suite]) -> Iterator[Suite]:
    """Register ``cls`` for the duration of a ``with`` block (a test-only suite), then unregister it."""
    name = cls().name
    register(cls)
    try:
        yield _REGISTRY[name]
    finally:
        unregister(name)


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in _MODULES:
            importlib.import_module(f"{__name__}.{mod}")


def get(name: str) -> Suite:
    """The suite registered as ``name`` (``framework/model``); KeyError if none. Only what finding it takes is
    imported: the module its framework names (``tf2/resnet50``: ``tf2``; most suites live in theirs), then, if the
    suite is not there, every module."""
    suite = _REGISTRY.get(name)
    if suite is None:
        guess = name.split("/", 1)[0].replace("-", "_")
        if guess in _MODULES:
            importlib.import_module(f"{__name__}.{guess}")
        if name not in _REGISTRY:
            _load()
        suite = _REGISTRY[name]
    return suite


def names() -> list[str]:
    """Every registered suite name, sorted."""
    _load()
    return sorted(_REGISTRY)
