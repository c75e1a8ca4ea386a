"""torchtitan (pytorch/torchtitan, PyTorch's own LLM pre-training platform): ``torchtitan/llama3`` (its Llama 3 models),
``torchtitan/qwen3`` (its Qwen3 models, dense and mixture of experts), ``torchtitan/gpt-oss`` (OpenAI's gpt-oss
mixtures of experts) and ``torchtitan/deepseek-v3`` (its DeepSeek-V3 mixture-of-experts models), ``python -m
torchtitan.train --module <family> --config <family>_<flavor>`` (torchtitan 0.3.0's command line); all print the
same metrics line (its trainer's).

Extra axes (beyond the shape, batch and precision):

- ``flavor``: the model, one of torchtitan's configs of the family (:data:`LLAMA3`: ``debugmodel``, ``8B``, ``70B``,
  ``405B``; :data:`QWEN3`: ``debugmodel``, ``0.6B``, ``1.7B``, ``14B``, ``32B``, ``debugmodel_moe``, ``30B-A3B``;
  :data:`GPT_OSS`: ``debugmodel``, ``20b``, ``120b``; :data:`DEEPSEEK_V3`: ``debugmodel``, ``16B``, ``671B``);
- the parallel layout, as torchtitan's ``--parallelism.*`` degrees: ``dp_shard`` (FSDP2; ``-1``, the default, takes
  the GPUs the others leave, as torchtitan's own ``-1``), ``dp_replicate`` (DDP / HSDP), ``tp`` (tensor), ``pp``
  (pipeline), ``cp`` (context) and ``ep`` (expert: MoE models only, 1 for llama3; it borrows its ranks from
  ``dp_shard x cp x tp``, so it must divide that and the routed experts). Checked before anything is submitted,
  each refused cell dropped with its reason, as torchtitan 0.3.0 would refuse it at start-up: every degree a whole
  number >= 1; ``dp_replicate x dp_shard x cp x tp x pp`` = the cell's GPUs; ``tp`` divides the heads it splits;
  the pipeline stages (``pp``, twice that where the flavor's config runs Interleaved1F1B) at most the layers + 2;
  ``seq_len`` at most the model's ``max_seq_len`` and a multiple of ``tp`` (x ``2 cp`` with context parallelism);
- the matrix's ``batch_size`` is torchtitan's ``local_batch_size``: sequences per data-parallel rank (the ranks of
  one tensor/context/pipeline group share them); ``global_batch`` (0: local x dp_replicate x dp_shard, no
  accumulation) must be a multiple of that, the rest is gradient accumulation; ``seq_len`` (tokens a sequence);
- ``activation_checkpointing``: ``selective``, ``full`` or ``none``;
- the ``xla`` axis: ``--compile.enable --compile.components model,loss`` (torch.compile of the model and the loss),
  off: nothing compiled;
- precision ``bf16`` (FSDP's bfloat16 parameters), ``fp32``, or ``fp8``: torchtitan's float8 config of the flavor
  (``llama3_debugmodel_float8``, ``deepseek_v3_671b_float8``, and ``llama3_405b``, which is Float8 only, compiled,
  with async tensor parallelism: its cells must be fp8 with xla on); an ``fp8`` cell of another flavor is dropped
  with that reason; torchao must be installed. Float8 needs a GPU of compute capability 8.9 or newer (H100, L40S,
  B200): torchtitan itself refuses it on any other at start-up ("float8 is only supported on NVIDIA SM89 or later").

The cell says the whole layout: an axis the matrix does not set is the suite's default above, not the value
torchtitan's config of the flavor has (llama3_70b's tensor parallel 8 and full checkpointing, deepseek_v3_16b's
expert parallel 8, its loss-only compile); the ``overrides`` option may add flags but not change one the suite sets.

Figures (from torchtitan's metrics line, ``torchtitan/components/metrics.py``, every step: ``--metrics.log-freq
1``): tokens/s over every GPU (the published figure: torchtitan's ``tps``, tokens per second per device, x GPUs;
the window's time flavour from the lines' millisecond stamps and the tokens a step takes), TFLOP/s per GPU and MFU
(torchtitan's own, against its own peak table, and the program's FLOPs per token held against the job's GPU),
torchtitan's memory (``memory:``, the device's peak reserved by torch's allocator). The program trains exactly
warm-up + measured steps, without checkpoints, validation, profiler or TensorBoard (the 8B-405B configs turn those
two on: a trace at step 100 would fall inside the window), and writes its outputs into the run's own folder. With
``pp > 1`` rank 0 is the first stage, whose line prints ``loss: -1.0`` (the last stage computes the loss): such a
run's loss is not checked for non-finite values.

Assets: torchtitan resolves its tokenizer (``hf_assets_path``) and its ``c4_test`` data set relative to the job's
working folder; options ``hf_assets_path`` and ``dataset_path`` name them absolutely (``dataset``: the data set's
name in torchtitan's registry; ``c4`` streams from the Hugging Face hub, which most compute nodes cannot reach:
``c4_test`` with ``dataset_path`` reads a local copy).
"""

from __future__ import annotations

import re
import shlex
from typing import Any, ClassVar, Iterable, Mapping, NamedTuple

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.suites import RUN_DIR, Suite, ranks_from_slurm, register
from dlperf_slurm.words import noun, plural

class Flavor(NamedTuple):
    """One of torchtitan's models of a family, as its registry builds it (``torchtitan/models/<module>/__init__.py``)
    and the configs torchtitan 0.3.0's ``config_registry.py`` has for it."""

    layers: int
    kv_heads: int  # the heads tensor parallelism splits: key/value heads (GQA), every head (MLA)
    experts: int  # routed experts (0: a dense model)
    config: str  # the config function's name (--config) of its bf16/fp32 training ("": it has none)
    float8: str = ""  # its float8 config ("": none)
    max_seq: int = 131072  # the model's max_seq_len: torchtitan refuses a longer training sequence
    stages_per_rank: int = 1  # pipeline stages a rank holds: 2 where its config's schedule is Interleaved1F1B
    compiled: bool = False  # its config turns on async tensor parallelism, which torchtitan runs only compiled


LLAMA3 = {"debugmodel": Flavor(6, 16, 0, "llama3_debugmodel", "llama3_debugmodel_float8", stages_per_rank=2),
          "8B": Flavor(32, 8, 0, "llama3_8b"), "70B": Flavor(80, 8, 0, "llama3_70b"),
          # llama3_405b is a Float8 config, compiled, with async tensor parallelism
          "405B": Flavor(126, 8, 0, "", "llama3_405b", compiled=True)}
DEEPSEEK_V3 = {"debugmodel": Flavor(6, 16, 8, "deepseek_v3_debugmodel", max_seq=16384),
               "16B": Flavor(27, 16, 64, "deepseek_v3_16b", max_seq=16384, stages_per_rank=2),
               "671B": Flavor(61, 128, 256, "deepseek_v3_671b", "deepseek_v3_671b_float8", max_seq=16384,
                              stages_per_rank=2)}
#: torchtitan 0.3.0's Qwen3 models (torchtitan/models/qwen3): the dense ones that have a training config, and its two
#: mixtures of experts (64 and 128 routed experts, top 8); none has a float8 config, none an interleaved schedule
QWEN3 = {"debugmodel": Flavor(8, 8, 0, "qwen3_debugmodel", max_seq=4096),
         "0.6B": Flavor(28, 8, 0, "qwen3_0_6b", max_seq=40960), "1.7B": Flavor(28, 8, 0, "qwen3_1_7b", max_seq=40960),
         "14B": Flavor(40, 8, 0, "qwen3_14b", max_seq=40960), "32B": Flavor(64, 8, 0, "qwen3_32b", max_seq=40960),
         "debugmodel_moe": Flavor(8, 8, 64, "qwen3_moe_debug", max_seq=4096),
         "30B-A3B": Flavor(48, 4, 128, "qwen3_30b_a3b", max_seq=40960)}
#: torchtitan 0.3.0's gpt-oss models (torchtitan/models/gpt_oss): mixtures of experts (top 4), 64 query and 8
#: key/value heads each
GPT_OSS = {"debugmodel": Flavor(4, 8, 8, "gpt_oss_debugmodel"), "20b": Flavor(24, 8, 32, "gpt_oss_20b"),
           "120b": Flavor(36, 8, 128, "gpt_oss_120b")}
#: flags the suite sets itself (as :func:`flag_key` writes them): an ``overrides`` option naming one would run
#: another cell than the one labelled, or another window (tests/test_torchtitan.py checks the program sets no other)
OWN_FLAGS = frozenset((
    "--module", "--config", "--training.steps", "--training.local-batch-size", "--training.global-batch-size",
    "--training.seq-len", "--training.mixed-precision-param", "--training.disable-cuda-graphs",
    "--parallelism.data-parallel-shard-degree", "--parallelism.data-parallel-replicate-degree",
    "--parallelism.tensor-parallel-degree", "--parallelism.pipeline-parallel-degree",
    "--parallelism.context-parallel-degree", "--parallelism.expert-parallel-degree", "--compile.enable",
    "--compile.components", "--profiler.enable-profiling", "--metrics.enable-tensorboard", "--metrics.log-freq",
    "--metrics.disable-color-printing", "--validator.enable", "--checkpoint.enable", "--dump-folder",
    "--dataloader.dataset", "--dataloader.dataset-path", "--hf-assets-path"))


def flag_key(word: str) -> str:
    """A tyro flag as one name: ``--a.b_c=1`` and ``--a.no-b-c`` are ``--a.b-c`` (tyro takes both spellings)."""
    flag = word.split("=", 1)[0].replace("_", "-")
    head, _, last = flag.rpartition(".")
    return f"{head}.{last.removeprefix('no-')}" if head else flag


CHECKPOINTING = ("selective", "full", "none")
DEGREES = ("dp_shard", "dp_replicate", "tp", "pp", "cp", "ep")


class _Torchtitan(Suite):
    framework = "torchtitan"
    imports = ("torchtitan",)
    launcher = "torchrun"
    launchers = ("torchrun", "srun")
    precisions: ClassVar[tuple[str, ...]] = ("bf16", "fp32", "fp8")
    supports_xla = True
    xla_name = "torch.compile"
    published = "speed"
    sample_unit = "tokens/s"
    module: ClassVar[str] = ""  # torchtitan's --module
    split_heads: ClassVar[str] = "key/value head"  # what tensor parallelism splits
    flavors: ClassVar[Mapping[str, Flavor]] = {}
    axes = {"flavor": (), "dp_shard": (), "dp_replicate": (), "tp": (), "pp": (), "cp": (), "ep": (),
            "global_batch": (), "seq_len": (), "activation_checkpointing": CHECKPOINTING}
    axis_defaults = {"flavor": "debugmodel", "dp_shard": -1, "dp_replicate": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1,
                     "global_batch": 0, "seq_len": 2048, "activation_checkpointing": "selective"}
    options = {"python": "python3", "entry": "torchtitan.train", "hf_assets_path": "", "dataset": "c4_test",
               "dataset_path": "", "overrides": ""}

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "overrides":
            try:
                words = shlex.split(value)
            except ValueError as err:
                return f"cannot be split into arguments: {err}"
            own = [w for w in words if flag_key(w) in OWN_FLAGS or w.startswith("activation-checkpoint:")]
            if own:
                return (f"{', '.join(own)}: set by the suite from the cell (its axes and [measure]); change the "
                        "matrix instead, so that the cell's label says what ran")
        if name == "dataset" and not value:
            return "must name a data set of torchtitan's registry (c4_test with dataset_path for a local copy)"
        if name == "entry" and not re.fullmatch(r"[A-Za-z_][\w.]*", str(value)):
            return "must be a Python module name (what `python -m` runs, torchtitan's own: torchtitan.train)"
        return None

    # ---- the cell's layout
    def degrees(self, cell: Cell) -> dict[str, int]:
        """The cell's parallel degrees, ``dp_shard`` -1 resolved to the GPUs the others leave (0 where they leave
        no whole number); ValueError or TypeError for a degree that is no number (a cell drop_reason refuses)."""
        d = {k: int(cell.param(k, self.axis_defaults[k])) for k in DEGREES}
        if d["dp_shard"] == -1:
            rest = d["dp_replicate"] * d["tp"] * d["pp"] * d["cp"]
            d["dp_shard"] = cell.devices // rest if rest > 0 and cell.devices % rest == 0 else 0
        return d

    def layout(self, cell: Cell) -> dict[str, int]:
        """Every degree (``dp_shard`` resolved), the data-parallel size, the micro and global batch in sequences,
        the accumulation steps and the sequence length of a cell that :meth:`drop_reason` accepted."""
        d = self.degrees(cell)
        dp = d["dp_shard"] * d["dp_replicate"]
        gb = self.global_batch(cell)
        return {**d, "dp": dp, "micro": cell.batch_size, "global": gb,
                "accumulation": gb // (cell.batch_size * dp) if dp and cell.batch_size else 0,
                "seq": int(cell.param("seq_len", 2048))}

    def layout_text(self, cell: Cell) -> str:
        lay = self.layout(cell)
        words = [f"{k}{lay[k]}" for k in DEGREES if lay[k] > 1 or k == "dp_shard"]
        return " ".join([*words, f"GA{lay['accumulation']}"])

    def global_batch(self, cell: Cell) -> int:
        """The ``global_batch`` axis, else the local batch x the data-parallel size (sequences a step)."""
        try:
            d = self.degrees(cell)
            gb = int(cell.param("global_batch", 0))
        except (TypeError, ValueError):
            return super().global_batch(cell)  # a cell drop_reason refuses
        return gb or cell.batch_size * d["dp_shard"] * d["dp_replicate"] or super().global_batch(cell)

    def drop_reason(self, cell: Cell) -> str | None:
        why = super().drop_reason(cell)
        if why:
            return why
        flavor = str(cell.param("flavor", "debugmodel"))
        if flavor not in self.flavors:
            return f"{self.name}: flavor {flavor!r} is none of torchtitan's configs ({', '.join(self.flavors)})"
        fl = self.flavors[flavor]
        if cell.precision == "fp8" and not fl.float8:
            fp8 = [f for f, v in self.flavors.items() if v.float8]
            return (f"torchtitan 0.3.0 has no float8 config for {self.module} {flavor} (it has one for "
                    f"{', '.join(fp8) or 'none'})")
        if cell.precision != "fp8" and not fl.config:
            return f"torchtitan 0.3.0's {fl.float8} config trains in Float8 only: precision fp8"
        if fl.compiled and not cell.xla:
            return (f"torchtitan 0.3.0's {fl.float8 or fl.config} config runs async tensor parallelism, which it "
                    "runs only compiled: xla = true")
        return self._layout_reason(cell, flavor, fl)

    def _layout_reason(self, cell: Cell, flavor: str, fl: Flavor) -> str | None:
        """Why torchtitan 0.3.0 would refuse the cell's parallel layout, sequence or batch at start-up (None: it
        would not)."""
        values = {k: cell.param(k, self.axis_defaults[k]) for k in (*DEGREES, "global_batch", "seq_len")}
        bad = [k for k, v in values.items() if isinstance(v, bool) or not isinstance(v, int)]
        if bad:
            return f"{self.name}: {bad[0]} = {values[bad[0]]!r}: a whole number is wanted"
        d = {k: int(values[k]) for k in DEGREES}
        gb, seq = int(values["global_batch"]), int(values["seq_len"])
        low = [k for k in DEGREES if d[k] < 1 and not (k == "dp_shard" and d[k] == -1)]
        if low:
            return (f"{self.name}: {low[0]} = {d[low[0]]}: a parallel degree is >= 1"
                    + (" (dp_shard -1: the GPUs the others leave)" if low[0] == "dp_shard" else ""))
        if not 1 <= seq <= fl.max_seq:
            return f"{self.module} {flavor}: seq_len {seq} is not in 1..{fl.max_seq:,} (the model's max_seq_len)"
        if gb < 0:
            return f"{self.name}: global_batch = {gb}: 0 (local batch x data-parallel size) or more"
        if d["ep"] != 1 and not fl.experts:
            return f"{self.module} {flavor} is a dense model: expert parallelism (ep) must be 1"
        others = d["dp_replicate"] * d["tp"] * d["pp"] * d["cp"]
        product = others * (d["dp_shard"] if d["dp_shard"] != -1 else 1)
        said = " x ".join(f"{k} {d[k]}" for k in ("dp_replicate", "dp_shard", "cp", "tp", "pp") if d[k] != -1)
        if d["dp_shard"] == -1 and cell.devices % others:
            return (f"{plural(cell.devices, 'GPU')} ({cell.shape}) {noun(cell.devices, 'is', 'are')} not a multiple of "
                    f"{said} = {others}: no whole dp_shard")
        if d["dp_shard"] != -1 and product != cell.devices:
            return f"{said} = {plural(product, 'rank')}, the cell has {plural(cell.devices, 'GPU')} ({cell.shape})"
        if fl.kv_heads % d["tp"]:
            return f"{self.module} {flavor}: {plural(fl.kv_heads, self.split_heads)} cannot be split over tp {d['tp']}"
        stages = d["pp"] * fl.stages_per_rank if d["pp"] > 1 else 1
        if stages > fl.layers + 2:  # the layers and the embedding and output as one each (pipeline_parallel.py)
            return (f"{self.module} {flavor}: {plural(stages, 'pipeline stage')} of pp {d['pp']}"
                    + (f" ({fl.stages_per_rank} a rank: Interleaved1F1B)" if fl.stages_per_rank > 1 else "")
                    + f", more than its {plural(fl.layers, 'layer')} + embedding + output")
        divisor = d["tp"] * (2 * d["cp"] if d["cp"] > 1 else 1)
        if seq % divisor:
            return (f"seq_len {seq} is not a multiple of tp {d['tp']}" + (f" x 2 x cp {d['cp']}" if d["cp"] > 1 else "")
                    + f" = {divisor} (torchtitan splits the sequence over them)")
        shard = self.degrees(cell)["dp_shard"]
        if fl.experts and (fl.experts % d["ep"] or (shard * d["cp"] * d["tp"]) % d["ep"]):
            return (f"ep {d['ep']} must divide the {plural(fl.experts, 'routed expert')} of {self.module} {flavor} and "
                    f"dp_shard x cp x tp = {shard * d['cp'] * d['tp']} (the ranks experts borrow)")
        dp = shard * d["dp_replicate"]
        if gb and gb % (cell.batch_size * dp):
            return (f"global_batch {gb} is not a multiple of local batch {cell.batch_size} x data-parallel size "
                    f"{dp} = {cell.batch_size * dp}")
        return None

    def steps(self, measure: Measure) -> int:
        return measure.warmup_steps + measure.measure_steps

    def program(self, cell: Cell, measure: Measure, options: Mapping[str, Any]) -> list[str]:
        lay = self.layout(cell)
        fl = self.flavors[str(cell.param("flavor", "debugmodel"))]
        argv = [options["python"], "-m", options["entry"], "--module", self.module,
                "--config", fl.float8 if cell.precision == "fp8" else fl.config,
                "--training.steps", str(self.steps(measure)), "--training.local-batch-size", str(lay["micro"]),
                "--training.global-batch-size", str(lay["global"]), "--training.seq-len", str(lay["seq"]),
                "--training.mixed-precision-param", "float32" if cell.precision == "fp32" else "bfloat16",
                "--parallelism.data-parallel-shard-degree", str(lay["dp_shard"]),
                "--parallelism.data-parallel-replicate-degree", str(lay["dp_replicate"]),
                "--parallelism.tensor-parallel-degree", str(lay["tp"]),
                "--parallelism.pipeline-parallel-degree", str(lay["pp"]),
                "--parallelism.context-parallel-degree", str(lay["cp"]),
                "--parallelism.expert-parallel-degree", str(lay["ep"]),
                *(("--compile.enable", "--compile.components", "model,loss") if cell.xla else ("--compile.no-enable",)),
                "--profiler.no-enable-profiling", "--metrics.no-enable-tensorboard",
                "--metrics.log-freq", "1", "--metrics.disable-color-printing", "--validator.no-enable",
                "--checkpoint.no-enable", "--dump-folder", RUN_DIR, "--dataloader.dataset", options["dataset"]]
        if lay["pp"] > 1 or lay["ep"] > 1:  # torchtitan 0.3.0 refuses its CUDA graphs with a pipeline ("do not
            # support pipeline parallelism yet") and with its default expert dispatcher ("support only ... without
            # CPU synchronization"): they go, as its errors say
            argv.append("--training.disable-cuda-graphs")
        if options["dataset_path"]:
            argv += ["--dataloader.dataset-path", options["dataset_path"]]
        if options["hf_assets_path"]:
            argv += ["--hf-assets-path", options["hf_assets_path"]]
        argv += shlex.split(options["overrides"])
        # tyro's subcommand for the activation checkpointing, after every flag
        argv.append(f"activation-checkpoint:{cell.param('activation_checkpointing', 'selective')}")
        return ranks_from_slurm(cell, argv)

    def launcher_args(self, cell: Cell) -> tuple[str, ...]:
        """torchtitan logs on every rank: torchrun shows each node's local rank 0 (``--local-ranks-filter 0``, as
        torchtitan's run_train.sh), each line labelled with its global rank (``--tee 3`` with :meth:`environment`'s
        prefix); srun labels every task's lines (``--label``). The parser reads rank 0's."""
        return ("--tee", "3", "--local-ranks-filter", "0") if cell.launcher == "torchrun" else ("--label",)

    def environment(self, cell: Cell, options: Mapping[str, Any]) -> dict[str, str]:
        # torchrun's own label is the *local* rank ([rank0]: on every node); this one is the global rank
        return {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[rank${rank}]:"} if cell.launcher == "torchrun" else {}

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return parse(lines, ctx)


@register
class Llama3(_Torchtitan):
    model = "llama3"
    module = "llama3"
    flavors = LLAMA3
    description = "torchtitan Llama 3 pre-training (FSDP2 / HSDP, tensor, pipeline and context parallel)"


@register
class Qwen3(_Torchtitan):
    model = "qwen3"
    module = "qwen3"
    flavors = QWEN3
    description = "torchtitan Qwen3 pre-training (dense 0.6B-32B and the 30B-A3B mixture of experts)"


@register
class GptOss(_Torchtitan):
    model = "gpt-oss"
    module = "gpt_oss"
    flavors = GPT_OSS
    description = "torchtitan gpt-oss pre-training (MoE: 20b, 120b; expert parallel beside FSDP2 and tensor parallel)"


@register
class DeepSeekV3(_Torchtitan):
    model = "deepseek-v3"
    module = "deepseek_v3"
    flavors = DEEPSEEK_V3
    split_heads = "head"  # multi-head latent attention: tensor parallelism splits the heads
    description = "torchtitan DeepSeek-V3 pre-training (MoE: expert parallel beside FSDP2, tensor and pipeline)"


# ------------------------------------------------------------------------------------------------- parsing

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_F = r"(" + lp.NUM + r"|nan|-?inf)"
#: the metrics line: ``[titan] 2026-12-01 22:05:05,588 - root - INFO - step:  1  loss:  7.98870  grad_norm:  1.7042
#: memory:  0.74GiB(3.14%)  tps: 99  tflops: 0.00  mfu: 0.00%`` (``[titan] `` since 2025, ``wps`` before
#: 2024-11, ``tflops`` since 2025-02, ``grad_norm`` since 2025-07; the validator's ``validate step:`` is not one)
_STEP = re.compile(r"^(?:\[titan\] )?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - \S+ - INFO - step:\s*(\d+)\s+loss:\s*"
                   + _F)
_MEM = re.compile(r"\bmemory:\s*(" + lp.NUM + r")GiB\((" + lp.NUM + r")%\)")
_TPS = re.compile(r"\b[tw]ps:\s*([\d,]+(?:\.\d+)?)")
_TFLOPS = re.compile(r"\btflops:\s*([\d,]+(?:\.\d+)?)")
_MFU = re.compile(r"\bmfu:\s*(" + lp.NUM + r")%")
#: ``Trainer is initialized with local batch size 2, global batch size 4, gradient accumulation steps 1, sequence
#: length 256, total steps 20 (warmup 2)`` (0.3.0); ``Training starts at step 1, with local batch size 8, global
#: batch size 64, sequence length 8192, total steps 1000 (warmup 200)`` (2025)
_BATCH = re.compile(r"local batch size (\d+), global batch size (\d+),.*?sequence length (\d+)")
_PEAK = re.compile(r"Peak FLOPS used for computing MFU: (" + lp.NUM + r")")
_DONE = "Training completed"
_SEQ_FLAG = re.compile(r"--training\.seq[-_]len[ =](\d+)")


#: every line the parser reads holds one (``tps:``/``mfu:``: the tail of a metrics line cut by buffering)
_NEEDLES = ("step:", "tps:", "wps:", "mfu:", "batch size", "Peak FLOPS", _DONE)


class _Reader:
    def __init__(self, ctx: ParseContext) -> None:
        self.window = lp.Window(ctx.warmup_steps, ctx.measure_steps)
        self.last_step: int | None = None
        self.duplicates = 0
        self.batch: tuple[int, int, int] | None = None  # (local, global, sequence length) as the log states them
        self.mem_gib: float | None = None
        self.tflops: list[tuple[float, float]] = []  # (tflops, tps) of the window's lines
        self.mfu: list[float] = []
        self.peak: float | None = None
        self.done = False
        self.clock = lp.IsoClock()

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        m = _STEP.search(text)
        if m is None:
            return self.other(text)
        if not final and "mfu:" not in text and "tps:" not in text and "wps:" not in text:
            return lp.FRAGMENT  # a line cut by buffering before its figures
        step = int(m.group(2))
        mem = _MEM.search(text, m.end())
        if mem:  # the highest over the ranks whose lines the log holds
            gib = float(mem.group(1))
            self.mem_gib = gib if self.mem_gib is None else max(self.mem_gib, gib)
        if step == self.last_step:  # every rank printing its line (a run without torchrun's rank filter): the
            self.duplicates += 1  # step is timed from its first copy
            return lp.CONSUMED
        self.last_step = step
        tps = _TPS.search(text, m.end())
        speed = lp.to_float(tps.group(1).replace(",", "")) if tps else None
        w = self.window
        if w.warmup < step <= w.end_step:
            tf = _TFLOPS.search(text, m.end())
            if tf and speed:
                self.tflops.append((float(tf.group(1).replace(",", "")), speed))
            mfu = _MFU.search(text, m.end())
            if mfu:
                self.mfu.append(float(mfu.group(1)))
        w.add(step, self.clock.seconds(m.group(1).replace(",", ".")), speed=speed, loss=lp.to_float(m.group(3)))
        return lp.CONSUMED

    def other(self, text: str) -> int:
        if self.batch is None:
            b = _BATCH.search(text)
            if b:
                self.batch = (int(b.group(1)), int(b.group(2)), int(b.group(3)))
                return lp.CONSUMED
        p = _PEAK.search(text)
        if p:
            self.peak = float(p.group(1))
            return lp.CONSUMED
        if _DONE in text:
            self.done = True
            return lp.CONSUMED
        return lp.NOT_MINE


def parse(lines: Iterable[str], ctx: ParseContext) -> RunResult:
    r = _Reader(ctx)
    facts = lp.Scanner(r.handler, needles=_NEEDLES, starts=lambda text: "- INFO - " in text).run(lines)
    x: dict[str, Any] = {}
    seq = r.batch[2] if r.batch else None
    gb = r.batch[1] if r.batch else None
    if seq is None:  # an older torchtitan: the launch command's --training.seq-len
        f = _SEQ_FLAG.search(str((facts.job or {}).get("command") or ""))
        seq = int(f.group(1)) if f else None
        x["tokens_basis"] = "the launch command's --training.seq-len" if seq else "the log states no sequence length"
    if gb is None:
        gb = ctx.global_batch
    if r.batch and r.batch[1] != ctx.global_batch:
        x["global_batch_mismatch"] = f"log {r.batch[1]}, matrix {ctx.global_batch}"
    if seq:
        x["seq_len"], x["tokens_per_step"] = seq, gb * seq
    if r.duplicates:
        x["duplicate_lines"] = r.duplicates
    if r.done:
        x["program_finished"] = True
    if r.tflops:
        x["reported_tflops_per_gpu_mean"] = sum(t for t, _ in r.tflops) / len(r.tflops)
        per = [t * 1e12 / s for t, s in r.tflops if t >= 1 and s > 0]  # 2 decimals: CPU figures (0.02) say nothing
        if per:
            x["flops_per_sample"] = sum(per) / len(per)
            x["flops_basis"] = "torchtitan's own TFLOP/s per GPU / its tokens/s per GPU (flops per token)"
    if r.mfu:
        x["reported_mfu_mean"] = sum(r.mfu) / len(r.mfu)
    if r.peak:
        x["program_peak_tflops"] = r.peak / 1e12  # what torchtitan's own MFU is held against
    # the time flavour: tokens a step over the stamps; the speed flavour: tps (per device) x GPUs
    res = lp.finish(r.window, facts, ctx, global_batch=float(gb * seq) if seq else None,
                    speed_scale=float(ctx.world_size), extra=x,
                    no_memory_reason="torchtitan reports torch's reserved memory (memory:), not the GPU's used")
    if not seq:  # without a sequence length, the stamps' figure is sequences/s: only torchtitan's tps is kept
        res.throughput = None
    if r.mem_gib and res.mem_allocator_mib is None:  # 0.00GiB on every line: its monitor read nothing
        res.mem_allocator_mib = r.mem_gib * 1024.0
    elif r.mem_gib == 0:
        res.mem_reason = "torchtitan printed memory: 0.00GiB on every line (its device memory monitor read nothing)"
    return res
