"""GPT pre-training, DLPerf's GPT report (Megatron-LM, DeepSpeed, OneFlow-GPT): ``megatron/gpt`` (NVIDIA
Megatron-LM ``pretrain_gpt.py``), ``deepspeed/gpt`` (microsoft/Megatron-DeepSpeed ``pretrain_gpt.py`` with a
DeepSpeed config, ZeRO stage from the matrix) and ``oneflow/gpt`` (OneFlow's LiBai ``tools/train_net.py`` on
``configs/gpt2_pretrain.py``).

Extra axes (beyond DLPerf's shape, batch and precision):

- ``model_size``: a preset of layers x hidden x heads (:data:`PRESETS`), or ``"LxHxA"`` (e.g. ``"24x2304x24"``,
  DLPerf's 4-node case);
- ``tensor_parallel`` and ``pipeline_parallel``: the data-parallel size is derived, GPUs / (tp x pp); a cell whose
  GPUs tp x pp does not divide is dropped with the reason;
- the matrix's ``batch_size`` is the micro batch per GPU; ``global_batch`` (0: micro batch x data-parallel size, no
  accumulation) must be a multiple of micro batch x data-parallel size (the rest is gradient accumulation);
- ``seq_length``; ``activation_checkpointing`` (``full``, DLPerf's ``--checkpoint-activations``; ``selective``;
  ``none``); ``zero_stage`` (``deepspeed/gpt`` only); precision ``fp16``, ``bf16`` or ``fp32``.
- ``megatron/gpt`` only, as Megatron-LM (2025+) takes them: ``context_parallel`` (``--context-parallel-size``: the
  data-parallel size becomes GPUs / (tp x pp x cp), and the sequence must split into 2 x cp chunks);
  ``virtual_pipeline`` (``--num-virtual-stages-per-pipeline-rank``, the interleaved schedule: pp > 1, the layers
  splitting into pp x vpp stages, and the micro batches a step (accumulation) a multiple of pp, at least pp);
  ``num_experts`` (0: a dense model; else ``--num-experts``, a mixture of experts with Megatron's default top-2
  router) and ``expert_parallel`` (``--expert-model-parallel-size``: it divides the experts, and tp x ep x pp
  divides the GPUs, Megatron's expert grid). Each is checked before submission: a cell that does not divide is
  dropped with the reason; a default value adds no flag (an older Megatron-LM runs as before).

Figures (:mod:`.gpt_log`): samples/s (the published throughput) and tokens/s, ms per iteration (latency), TFLOP/s
per GPU and MFU (the program's own TFLOP/s where it prints it, else the Megatron paper's formula on the model's
size), the programs' own memory figures. Every program logs every iteration (``--log-interval 1``,
``steps_per_print 1``, ``train.log_period=1``) and trains exactly warm-up + measured iterations.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any, ClassVar, Iterable, Mapping

from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.suites import RUN_DIR, Suite, gpt_flops, gpt_log, ranks_from_slurm, register
from dlperf_slurm.words import noun, plural

#: name -> (layers, hidden, heads): GPT-2 345M (Megatron's example), GPT-3 sizes as Megatron-DeepSpeed's examples
PRESETS: dict[str, tuple[int, int, int]] = {
    "125M": (12, 768, 12), "345M": (24, 1024, 16), "760M": (24, 1536, 16), "1.3B": (24, 2048, 16),
    "2.7B": (32, 2560, 32), "6.7B": (32, 4096, 32), "13B": (40, 5120, 40)}
_CUSTOM = re.compile(r"^(\d+)x(\d+)x(\d+)$")
CHECKPOINTING = ("full", "selective", "none")


def model_dims(preset: str) -> tuple[int, int, int] | None:
    """(layers, hidden, heads) of a preset name or an ``LxHxA`` string; None for anything else."""
    if preset in PRESETS:
        return PRESETS[preset]
    m = _CUSTOM.match(str(preset))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


class _GPT(Suite):
    model = "gpt"
    precisions: ClassVar[tuple[str, ...]] = ("fp16", "bf16", "fp32")
    published = "time"
    sample_unit = "samples/s"
    axes = {"model_size": (), "tensor_parallel": (), "pipeline_parallel": (), "global_batch": (), "seq_length": (),
            "activation_checkpointing": CHECKPOINTING}
    axis_defaults = {"model_size": "345M", "tensor_parallel": 1, "pipeline_parallel": 1, "global_batch": 0,
                     "seq_length": 2048, "activation_checkpointing": "full"}
    memory_note = ""

    # ---- the cell's layout
    def layout(self, cell: Cell) -> dict[str, int]:
        """tp, pp, cp, dp, vpp, experts, ep, micro batch, global batch, accumulation steps, layers, hidden, heads,
        seq of a cell (which :meth:`drop_reason` accepted)."""
        tp, pp, cp = _degrees(cell)
        dp = cell.devices // (tp * pp * cp)
        mb = cell.batch_size
        gb = self.global_batch(cell)
        layers, hidden, heads = model_dims(str(cell.param("model_size", "345M"))) or (0, 0, 0)
        return {"tp": tp, "pp": pp, "cp": cp, "dp": dp, "vpp": int(cell.param("virtual_pipeline", 1)),
                "experts": int(cell.param("num_experts", 0)), "ep": int(cell.param("expert_parallel", 1)),
                "micro": mb, "global": gb, "accumulation": gb // (mb * dp),
                "layers": layers, "hidden": hidden, "heads": heads, "seq": int(cell.param("seq_length", 2048))}

    def layout_text(self, cell: Cell) -> str:
        lay = self.layout(cell)
        return layout_words(lay, ("tp", "pp", "cp", "dp", "vpp", "ep")) + (f" experts{lay['experts']}"
                                                                             if lay["experts"] else "")

    def global_batch(self, cell: Cell) -> int:
        """The ``global_batch`` axis, else micro batch x data-parallel size (GPUs / (tp x pp x cp)): the batch the
        program's ``--global-batch-size`` (``train_batch_size``, ``train.global_batch_size``) is given."""
        try:
            tp, pp, cp = _degrees(cell)
            gb = int(cell.param("global_batch", 0))
        except (TypeError, ValueError):
            return super().global_batch(cell)  # a cell drop_reason refuses
        return gb or cell.batch_size * (cell.devices // max(1, tp * pp * cp))

    def drop_reason(self, cell: Cell) -> str | None:
        why = super().drop_reason(cell)
        if why:
            return why
        preset = str(cell.param("model_size", "345M"))
        dims = model_dims(preset)
        if dims is None:
            return f"{self.name}: model_size {preset!r} is no preset ({', '.join(PRESETS)}) nor layers x hidden x heads"
        layers, hidden, heads = dims
        names = ", ".join(n for n in _INTEGERS if n in self.axes)
        try:
            tp, pp, cp = _degrees(cell)
            gb, seq = int(cell.param("global_batch", 0)), int(cell.param("seq_length", 2048))
            vpp, experts, ep = (int(cell.param(n, d)) for n, d in (("virtual_pipeline", 1), ("num_experts", 0),
                                                                     ("expert_parallel", 1)))
        except (TypeError, ValueError):
            return f"{self.name}: {names} must be integers"
        if min(tp, pp, cp, seq, vpp, ep) < 1 or gb < 0 or experts < 0:
            return f"{self.name}: {names} must be >= 1 (global_batch and num_experts >= 0)"
        model = tp * pp * cp
        if cell.devices % model:
            factors = "tensor_parallel x pipeline_parallel" + (" x context_parallel" if cp > 1 else "")
            values = f"{tp} x {pp}" + (f" x {cp}" if cp > 1 else "")
            return (f"{plural(cell.devices, 'GPU')} ({cell.shape}) {noun(cell.devices, 'is', 'are')} not a multiple of "
                    f"{factors} = {values} = {model}: no whole data-parallel size")
        if heads % tp or hidden % heads:
            return f"{preset}: {plural(heads, 'head')} over hidden {hidden} cannot be split over tensor_parallel {tp}"
        if layers % pp:
            return f"{preset}: {plural(layers, 'layer')} cannot be split into pipeline_parallel {plural(pp, 'stage')}"
        dp = cell.devices // model
        per_step = cell.batch_size * dp
        if gb and gb % per_step:
            return (f"global_batch {gb} is not a multiple of micro batch {cell.batch_size} x data-parallel size "
                    f"{dp} = {per_step}")
        return _llm_axes_reason(preset, layers, seq, tp, pp, cp, vpp, experts, ep, cell.devices,
                                (gb or per_step) // per_step)

    def steps(self, measure: Measure) -> int:
        return measure.warmup_steps + measure.measure_steps

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return gpt_log.parse(lines, ctx, no_memory_reason=self.memory_note)


def layout_words(lay: Mapping[str, int], names: Iterable[str]) -> str:
    """``tp4 pp8 cp1 dp2 GA128``: the layout's degrees named (vpp and ep only where above 1), then its gradient
    accumulation steps."""
    words = [f"{n}{lay[n]}" for n in names if n in lay and (lay[n] > 1 or n not in ("vpp", "ep", "etp"))]
    return " ".join([*words, f"GA{lay['accumulation']}"])


_INTEGERS = ("tensor_parallel", "pipeline_parallel", "context_parallel", "virtual_pipeline", "num_experts",
             "expert_parallel", "global_batch", "seq_length")


def _degrees(cell: Cell) -> tuple[int, int, int]:
    """The cell's tensor, pipeline and context parallel degrees (context 1 where the suite has no such axis)."""
    return (int(cell.param("tensor_parallel", 1)), int(cell.param("pipeline_parallel", 1)),
            int(cell.param("context_parallel", 1)))


def _llm_axes_reason(preset: str, layers: int, seq: int, tp: int, pp: int, cp: int, vpp: int, experts: int, ep: int,
                     gpus: int, micro_batches: int) -> str | None:
    """Why Megatron-LM would refuse a cell's context, virtual-pipeline or expert layout at start-up (its own
    checks: ``megatron/training/arguments.py`` validate_args, ``parallel_state``, the interleaved schedule), or
    None."""
    if cp > 1 and seq % (2 * cp):
        return f"seq_length {seq} is not a multiple of 2 x context_parallel = {2 * cp} (Megatron-LM's load balance)"
    if vpp > 1:
        if pp < 2:
            return f"virtual_pipeline > 1 ({vpp}) needs pipeline_parallel > 1 (the interleaved schedule)"
        if layers % (pp * vpp):
            return (f"{preset}: {plural(layers, 'layer')} cannot be split into pipeline_parallel x virtual_pipeline "
                    f"= {pp} x {vpp} = {plural(pp * vpp, 'stage')}")
        if micro_batches < pp or micro_batches % pp:
            return (f"the interleaved schedule needs the micro batches of a step ({micro_batches}: global_batch / "
                    f"(micro batch x data-parallel size)) to be a multiple of pipeline_parallel {pp}")
    if ep > 1 and not experts:
        return f"expert_parallel > 1 ({ep}) needs num_experts > 0 (a mixture-of-experts model)"
    if experts and experts % ep:
        return f"num_experts {experts} is not a multiple of expert_parallel {ep}"
    if ep > 1 and gpus % (tp * ep * pp):
        return (f"{plural(gpus, 'GPU')} {noun(gpus, 'is', 'are')} not a multiple of tensor_parallel x expert_parallel "
                f"x pipeline_parallel = {tp} x {ep} x {pp} = {tp * ep * pp} (Megatron's expert grid)")
    return None


def _megatron_common(s: "_GPT", cell: Cell, measure: Measure, options: Mapping[str, Any]) -> list[str]:
    """The flags Megatron-LM and Megatron-DeepSpeed share (``--log-interval 1``: every iteration logged)."""
    lay = s.layout(cell)
    argv = [options["python"], f"{options['workdir']}/{options['script']}",
            "--tensor-model-parallel-size", str(lay["tp"]), "--pipeline-model-parallel-size", str(lay["pp"]),
            "--num-layers", str(lay["layers"]), "--hidden-size", str(lay["hidden"]),
            "--num-attention-heads", str(lay["heads"]), "--seq-length", str(lay["seq"]),
            "--max-position-embeddings", str(lay["seq"]), "--micro-batch-size", str(lay["micro"]),
            "--global-batch-size", str(lay["global"]), "--train-iters", str(s.steps(measure)),
            "--lr", "0.00015", "--min-lr", "1.0e-5", "--lr-decay-style", "cosine", "--lr-warmup-fraction", "0.01",
            "--weight-decay", "1e-2", "--clip-grad", "1.0", "--log-interval", "1", "--eval-iters", "0",
            "--eval-interval", str(s.steps(measure) + 1), "--save-interval", str(s.steps(measure) + 1)]
    if cell.precision in ("fp16", "bf16"):
        argv.append(f"--{cell.precision}")
    if options["data_path"]:
        argv += ["--data-path", options["data_path"], "--vocab-file", options["vocab_file"],
                 "--merge-file", options["merge_file"], "--tokenizer-type", "GPT2BPETokenizer", "--split", "949,50,1"]
    return argv


_DATA_OPTIONS = {"data_path": "/data/gpt/gpt_sample_dataset_text_document", "vocab_file": "/data/gpt/gpt2-vocab.json",
                 "merge_file": "/data/gpt/gpt2-merges.txt"}


@register
class MegatronGPT(_GPT):
    framework = "megatron"
    imports = ("torch",)
    description = "NVIDIA Megatron-LM pretrain_gpt.py: tensor/pipeline/data parallel GPT pre-training"
    launcher = "torchrun"
    launchers = ("torchrun", "srun")
    # log_energy: Megatron-LM's --log-energy (2025+ builds; an older one refuses the flag): its own J/iter/GPU and
    # W/GPU on each iteration line, the run's energy where no NVML reading covers the window (parsing.energy)
    options = {"python": "python3", "workdir": "/workspace/megatron-lm", "script": "pretrain_gpt.py",
               "log_energy": False, **_DATA_OPTIONS}
    memory_note = "Megatron reports torch's allocator (report_memory), not the GPU's used memory"
    axes = {**_GPT.axes, "context_parallel": (), "virtual_pipeline": (), "num_experts": (), "expert_parallel": ()}
    axis_defaults = {**_GPT.axis_defaults, "context_parallel": 1, "virtual_pipeline": 1, "num_experts": 0,
                     "expert_parallel": 1}

    def program(self, cell: Cell, measure: Measure, options: Mapping[str, Any]) -> list[str]:
        argv = _megatron_common(self, cell, measure, options)
        lay = self.layout(cell)
        if lay["cp"] > 1:
            argv += ["--context-parallel-size", str(lay["cp"])]
        if lay["vpp"] > 1:
            argv += ["--num-virtual-stages-per-pipeline-rank", str(lay["vpp"])]
        if lay["experts"]:
            argv += ["--num-experts", str(lay["experts"]), "--expert-model-parallel-size", str(lay["ep"])]
        ckpt = cell.param("activation_checkpointing", "full")
        if ckpt == "full":  # --checkpoint-activations before Megatron-LM 23.04; the same since
            argv += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
        elif ckpt == "selective":
            argv.append("--recompute-activations")
        if not options["data_path"]:
            argv += ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", str(gpt_flops.GPT2_VOCAB)]
        # --log-throughput: 2024+ builds print "throughput per GPU (TFLOP/s/GPU)"
        return ranks_from_slurm(cell, argv + ["--log-throughput"] + (["--log-energy"] if options["log_energy"] else []))

    def environment(self, cell: Cell, options: Mapping[str, Any]) -> dict[str, str]:
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}  # Megatron's examples: needed to overlap TP communication


@register
class DeepSpeedGPT(_GPT):
    framework = "deepspeed"
    imports = ("deepspeed",)
    description = "microsoft/Megatron-DeepSpeed pretrain_gpt.py with a DeepSpeed config (ZeRO stage from the matrix)"
    launcher = "deepspeed"
    launchers = ("deepspeed", "srun")
    axes = {**_GPT.axes, "zero_stage": (0, 1, 2, 3)}
    axis_defaults = {**_GPT.axis_defaults, "zero_stage": 1}
    options = {"python": "python3", "workdir": "/workspace/Megatron-DeepSpeed", "script": "pretrain_gpt.py",
               **_DATA_OPTIONS}
    memory_note = "Megatron-DeepSpeed reports torch's allocator (report_memory), not the GPU's used memory"

    def drop_reason(self, cell: Cell) -> str | None:
        why = super().drop_reason(cell)
        if why is None and int(cell.param("zero_stage", 1)) > 1 and int(cell.param("pipeline_parallel", 1)) > 1:
            return "DeepSpeed's pipeline engine runs with ZeRO stage 0 or 1 only (stage 2/3 partition gradients)"
        return why

    def ds_config(self, cell: Cell) -> dict[str, Any]:
        """The DeepSpeed config: batch sizes, ZeRO stage, precision, and the engine's throughput lines every step
        (``steps_per_print`` 1 and ``log_level`` info: without it DeepSpeed 0.19 prints none)."""
        lay = self.layout(cell)
        cfg: dict[str, Any] = {
            "train_batch_size": lay["global"], "train_micro_batch_size_per_gpu": lay["micro"],
            "gradient_accumulation_steps": lay["accumulation"], "steps_per_print": 1, "log_level": "info",
            "gradient_clipping": 1.0, "zero_optimization": {"stage": int(cell.param("zero_stage", 1))},
            "wall_clock_breakdown": False}
        if cell.precision == "fp16":
            cfg["fp16"] = {"enabled": True, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2,
                           "min_loss_scale": 1, "initial_scale_power": 12}
        elif cell.precision == "bf16":
            cfg["bf16"] = {"enabled": True}
        return cfg

    def files(self, cell: Cell, measure: Measure, options: Mapping[str, Any]) -> dict[str, str]:
        return {"ds_config.json": json.dumps(self.ds_config(cell), indent=1, sort_keys=True) + "\n"}

    def program(self, cell: Cell, measure: Measure, options: Mapping[str, Any]) -> list[str]:
        lay = self.layout(cell)
        argv = _megatron_common(self, cell, measure, options)
        ckpt = cell.param("activation_checkpointing", "full")
        if ckpt == "full":
            argv += ["--checkpoint-activations", "--deepspeed-activation-checkpointing"]
        elif ckpt == "selective":
            argv += ["--recompute-granularity", "selective"]
        if lay["pp"] == 1:
            argv.append("--no-pipeline-parallel")  # else Megatron-DeepSpeed runs DeepSpeed's pipeline engine
        return ranks_from_slurm(cell, argv + ["--deepspeed", "--deepspeed_config", f"{RUN_DIR}/ds_config.json",
                                               "--zero-stage", str(int(cell.param("zero_stage", 1)))])


@register
class OneFlowGPT(_GPT):
    framework = "oneflow"
    imports = ("oneflow",)
    description = "OneFlow LiBai tools/train_net.py, configs/gpt2_pretrain.py (GPT-2 pre-training, 3D parallel)"
    launcher = "oneflow"
    launchers = ("oneflow",)
    precisions = ("fp16", "fp32")  # LiBai's train.amp is fp16
    options = {"python": "python3", "workdir": "/workspace/libai", "script": "tools/train_net.py",
               "config_file": "configs/gpt2_pretrain.py", "data_prefix": "/data/gpt/loss_compara_content_sentence",
               "vocab_file": "/data/gpt/gpt2-vocab.json", "merge_file": "/data/gpt/gpt2-merges.txt",
               "device": "cuda",  # train.dist.device_type: cuda, cpu (npu, xpu with OneFlow's plug-ins)
               "overrides": ""}  # more LiBai key=value overrides, after this suite's (split as a shell would)
    memory_note = "LiBai's log reports no GPU memory"

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "device" and value not in ("cuda", "cpu", "npu", "xpu"):
            return "must be cuda, cpu, npu or xpu (LiBai's train.dist.device_type)"
        if name == "overrides":
            try:
                words = shlex.split(value)
            except ValueError as err:
                return f"cannot be split into arguments: {err}"
            bad = [w for w in words if "=" not in w]
            if bad:
                return f"LiBai's overrides are key=value: {bad}"
        return None

    def program(self, cell: Cell, measure: Measure, options: Mapping[str, Any]) -> list[str]:
        lay = self.layout(cell)
        ckpt = cell.param("activation_checkpointing", "full")
        # LiBai's GPT config names the depth hidden_layers (an unknown key such as num_layers is added to the
        # config and ignored); gpt2_pretrain.py copies max_seq_length into the data set when it is loaded, so the
        # data set's own max_seq_length is overridden too (else it cuts 1024-token samples for a shorter model)
        over = {"model.cfg.hidden_layers": lay["layers"], "model.cfg.hidden_size": lay["hidden"],
                "model.cfg.ffn_hidden_size": 4 * lay["hidden"], "model.cfg.num_attention_heads": lay["heads"],
                "model.cfg.max_seq_length": lay["seq"], "dataloader.train.dataset.0.max_seq_length": lay["seq"],
                "train.train_micro_batch_size": lay["micro"],
                "train.global_batch_size": lay["global"], "train.num_accumulation_steps": lay["accumulation"],
                "train.train_iter": self.steps(measure), "train.log_period": 1,
                "train.dist.data_parallel_size": lay["dp"], "train.dist.tensor_parallel_size": lay["tp"],
                "train.dist.pipeline_parallel_size": lay["pp"], "train.dist.pipeline_num_layers": lay["layers"],
                "train.dist.device_type": options["device"],
                "train.amp.enabled": cell.precision == "fp16", "model.cfg.amp_enabled": cell.precision == "fp16",
                "train.activation_checkpoint.enabled": ckpt != "none", "train.evaluation.enabled": False,
                "train.checkpointer.period": self.steps(measure) + 1, "train.output_dir": RUN_DIR,
                "tokenization.tokenizer.vocab_file": options["vocab_file"],
                "tokenization.tokenizer.merges_file": options["merge_file"],
                "dataloader.train.dataset.0.data_prefix": options["data_prefix"],
                "dataloader.train.dataset.0.indexed_dataset.data_prefix": options["data_prefix"],
                # LiBai builds the test loader even with evaluation off: it must find the data too
                "dataloader.test.0.dataset.data_prefix": options["data_prefix"],
                "dataloader.test.0.dataset.indexed_dataset.data_prefix": options["data_prefix"],
                "dataloader.test.0.dataset.max_seq_length": lay["seq"]}
        if options["device"] == "cpu":  # gpt.py's fused CUDA ops (OneFlow 0.9.0 has no CPU kernel for them)
            over.update({f"model.cfg.{k}_fusion": False for k in ("scale_mask_softmax", "bias_gelu", "bias_dropout")})
        return [options["python"], f"{options['workdir']}/{options['script']}", "--config-file",
                f"{options['workdir']}/{options['config_file']}",
                *(f"{k}={v}" for k, v in over.items()), *shlex.split(options["overrides"])]

    def drop_reason(self, cell: Cell) -> str | None:
        why = super().drop_reason(cell)
        if why is None and cell.param("activation_checkpointing", "full") == "selective":
            return "LiBai checkpoints whole transformer layers only: activation_checkpointing is full or none"
        return why
