"""Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge): its performance recipes, the LLM pre-training runs NVIDIA publishes
in its performance summary: ``megatron-bridge/llama3`` (Llama 3 8B, 70B, Llama 3.1 405B), ``megatron-bridge/qwen3``
(Qwen3 30B-A3B, 235B-A22B), ``megatron-bridge/deepseek-v3`` and ``megatron-bridge/gpt-oss`` (gpt-oss 120B): mixtures
of experts but the first.

The launch is the one NeMo-Run's Slurm executor makes from ``scripts/performance/setup_experiment.py``, without
NeMo-Run: one task per GPU under srun, each running the recipe's rank-local entry point of the container's
Megatron-Bridge checkout (option ``workdir``, the NeMo container's ``/opt/Megatron-Bridge``) with the recipe's own
command line, ``python scripts/performance/bootstrap.py -m <family> -mr <recipe> -g <gpu> -ng <GPUs> -gn <GPUs a
node> -c <precision> -tp .. -pp .. -cp .. -vp .. -ep .. -mb .. -gb .. -sl .. -ms <steps>`` and Hydra-style overrides
(``logger.log_interval=1``). ``bootstrap.py`` (Megatron-Bridge 0.6.0+, after 0.5.1) installs the recipe's process
environment, then runs ``run_script.py``; with an older container (0.4-0.5: the 26.04 and 26.06 containers; 26.04.01
is 0.4.2) set option ``script`` to ``scripts/performance/run_script.py``: the same flags, and the suite adds the
manual garbage collection NeMo-Run's PerfEnvPlugin gives every run, but not that plugin's environment
(CUDA_DEVICE_MAX_CONNECTIONS, NVTE_*_LAYERNORM_SM_MARGIN, HybridEP's NVLINK_DOMAIN_SIZE and the like, which depend on
the recipe's dispatcher and overlap): the matrix's ``env`` gives them. Megatron-Bridge before 0.4
(``--model_name/--model_size``) is not supported. Hugging Face: every recipe reads its model's config from the hub
(:meth:`_Bridge.environment`); a gated one (meta-llama) needs HF_TOKEN in the job's environment, or option
``offline`` with a prefetched HF_HOME the container sees. With pyxis, give the container ``--container-writable``
(NeMo-Run always does) and mount the logs folder.

Extra axes (beyond the shape, batch and precision):

- ``recipe``: the ``-mr`` recipe of the suite's family (:data:`LLAMA3`, :data:`QWEN3`, :data:`DEEPSEEK_V3`,
  :data:`GPT_OSS`);
- the parallel layout, as Megatron-core takes it: ``tensor_parallel``, ``pipeline_parallel``, ``context_parallel``,
  ``virtual_pipeline`` (1: no interleaving, ``-vp None``), ``expert_parallel`` and ``expert_tensor_parallel``
  (mixtures of experts only), ``megatron_fsdp`` (Megatron's FSDP: ``--use_megatron_fsdp true``; off, also
  ``ddp.use_megatron_fsdp=false``, since the flag only turns it on); the data-parallel size is GPUs / (tp x pp x cp).
  The cell says the whole layout: every degree is given to the program, so a recipe's own layout (which it chose for
  its GPU count) never runs under another cell's label (with bootstrap.py, Megatron-Bridge then recomputes
  CUDA_DEVICE_MAX_CONNECTIONS from the degrees given, as for any user's -tp / -cp / -pp). Checked before submission
  as Megatron-core checks it at start-up (each refused cell dropped with the reason): tp x pp x cp x dp = GPUs; tp
  divides the attention heads and the key/value groups; tp (sequence parallelism) x 2 cp divides the sequence; the
  layers (+ embedding + loss where the recipe counts them: Llama 3.1 405B, Qwen3 235B) split evenly into pp x vp
  stages, or DeepSeek-V3's (pp, vp) is one its recipe has a layout for; the interleaved schedule's pp > 1 and its
  micro batches a multiple of pp; ep divides the experts, and etp x ep x pp the GPUs (the expert grid);
- the matrix's ``batch_size`` is the micro batch (MBS); ``global_batch`` (GBS; 0: micro batch x dp, no
  accumulation) must be a multiple of micro batch x dp, the rest is gradient accumulation (GA); ``seq_length``;
- ``gpu``: the GPU whose recipe runs (``-g``: ``h100``, ``b200``, ``gb200``, ``b300``, ``gb300``, ``r100``,
  ``vr200``): Megatron-Bridge keeps one tuned recipe per GPU, so it is a condition of the cell (the job's real GPU
  is the provenance's);
- precision, as the recipe's compute dtype (``-c``): ``bf16``; ``fp8``: FP8 with current scaling (``fp8_cs``, the
  tables' "FP8" and "FP8-CS"); ``mxfp8`` (``fp8_mx``) and ``nvfp4``, which need a Blackwell GPU (b200, gb200, b300,
  gb300 or newer): a cell of either with ``gpu = "h100"`` is dropped, in one line. FP8 runs on H100 and newer,
  every GPU Megatron-Bridge's recipes name. (Its FP8 sub-channel scaling, ``fp8_sc``, is not an axis value yet.)

What the recipe sets beyond these (recomputation, CUDA graphs, communication overlap, the optimizer, the mock data
set and NullTokenizer) stays the recipe's for that GPU and precision; option ``overrides`` adds flags or Hydra
overrides of one's own, but none the suite sets.

Figures (:mod:`.gpt_log`, the same reader as ``megatron/gpt``: Megatron-core's iteration line, with Megatron-Bridge's
stamp to the second, and its ``Step Time : ... MODEL_TFLOP/s/GPU`` line): tokens/s over every GPU (the published
figure is that per GPU: the iteration line's global batch x the sequence length over its timed iterations), TFLOP/s
per GPU and MFU from the program's own model TFLOP/s, its energy with option ``log_energy``
(``logger.log_energy=true``, Megatron-Bridge 0.2+: J/iter/GPU and W/GPU on the iteration line), and torch's
allocator memory where it reports it. The program trains exactly warm-up + measured steps (``-ms``), logging every
one, with no checkpoint or evaluation; its configuration is saved in the run's own folder.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, ClassVar, Iterable, Mapping, NamedTuple

from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.suites import RUN_DIR, Suite, gpt_log, ranks_from_slurm, register
from dlperf_slurm.suites.gpt import layout_words
from dlperf_slurm.workloads.peaks import precision_reason
from dlperf_slurm.words import noun, plural


class Recipe(NamedTuple):
    """A model of a family as Megatron-Bridge's providers build it (the Hugging Face configs it converts)."""

    layers: int
    heads: int  # attention heads
    groups: int  # key/value groups (GQA; = heads for multi-head and latent attention)
    experts: int = 0  # routed experts (0: a dense model)
    seq: int = 8192  # the sequence length of its performance recipes
    split_extra: int = 0  # 2 where its recipe counts the embedding and the loss as a layer each in the pipeline split
    #: the (pp, vp) pairs its recipe has a pipeline layout for (None: any that divides its layers)
    layouts: frozenset[tuple[int, int]] | None = None


LLAMA3 = {"llama3_8b": Recipe(32, 32, 8), "llama3_70b": Recipe(80, 64, 8),
          "llama31_405b": Recipe(126, 128, 8, split_extra=2)}  # account_for_{embedding,loss}_in_pipeline_split
QWEN3 = {"qwen3_30b_a3b": Recipe(48, 32, 4, 128, 4096),
         "qwen3_235b_a22b": Recipe(94, 64, 4, 128, 4096, split_extra=2)}
#: DeepSeek-V3's 61 layers (a prime) split only by the layouts its recipe writes (set_deepseek_v3_pipeline_model_
#: parallel_layout, and "Et|(tt|)*30mL" for pp 8 x vp 4)
DEEPSEEK_V3 = {"deepseek_v3": Recipe(61, 128, 128, 256, 4096, layouts=frozenset(
    {(1, 1), (4, 1), (8, 1), (4, 2), (16, 1), (8, 2), (4, 4), (8, 4)}))}
GPT_OSS = {"gpt_oss_120b": Recipe(36, 64, 8, 128, 4096)}

#: the matrix's precision -> Megatron-Bridge's compute dtype (-c)
COMPUTE_DTYPES = {"bf16": "bf16", "fp8": "fp8_cs", "mxfp8": "fp8_mx", "nvfp4": "nvfp4"}
#: the GPUs Megatron-Bridge's performance scripts know (``-g``; NUM_GPUS_PER_NODE_MAP)
GPUS = ("h100", "b200", "gb200", "b300", "gb300", "r100", "vr200")
#: the flags the suite sets from the cell (an ``overrides`` option naming one would run another cell than the one
#: labelled, or another window), long and short spellings, and the Hydra keys it sets
OWN_FLAGS = frozenset((
    "-m", "--model_family_name", "-mr", "--model_recipe_name", "-g", "--gpu", "-ng", "--num_gpus", "-gn",
    "--gpus_per_node", "-c", "--compute_dtype", "-tp", "--tensor_model_parallel_size", "-pp",
    "--pipeline_model_parallel_size", "-cp", "--context_parallel_size", "-vp", "--virtual_pipeline_model_parallel_size",
    "-ep", "--expert_model_parallel_size", "-et", "--expert_tensor_parallel_size", "-mb", "--micro_batch_size", "-gb",
    "--global_batch_size", "-sl", "--seq_length", "-ms", "--max_steps", "--use_megatron_fsdp", "--save_config_filepath",
    "--task", "--use_recipes", "-d", "--dryrun", "-hf", "--hf_token",
    # flags that change the model or the data without the cell's label saying so
    "--num_layers", "--hidden_size", "--num_moe_experts", "--pipeline_model_parallel_layout", "--first_k_dense_replace",
    "-cv", "--config_variant", "--data", "--dataset_paths", "--use_tokendrop", "--domain"))
OWN_KEYS = frozenset(("logger.log_interval", "logger.log_throughput", "logger.log_energy", "train.train_iters",
                      "train.global_batch_size", "train.micro_batch_size"))
_DEGREES = ("tensor_parallel", "pipeline_parallel", "context_parallel", "virtual_pipeline", "expert_parallel",
            "expert_tensor_parallel", "global_batch", "seq_length")


def _axes(recipes: Mapping[str, Recipe]) -> tuple[dict[str, tuple], dict[str, Any]]:
    """A family's axes and their defaults: its first recipe at that recipe's sequence length, no parallelism; the
    expert degrees only for a mixture of experts."""
    moe = any(r.experts for r in recipes.values())
    experts = ("expert_parallel", "expert_tensor_parallel") if moe else ()
    first = next(iter(recipes))
    axes = {"recipe": tuple(recipes), "gpu": GPUS, "tensor_parallel": (), "pipeline_parallel": (),
            "context_parallel": (), "virtual_pipeline": (), **{k: () for k in experts}, "megatron_fsdp": (False, True),
            "global_batch": (), "seq_length": ()}
    defaults = {"recipe": first, "gpu": "h100", "tensor_parallel": 1, "pipeline_parallel": 1, "context_parallel": 1,
                "virtual_pipeline": 1, **{k: 1 for k in experts}, "megatron_fsdp": False, "global_batch": 0,
                "seq_length": recipes[first].seq}
    return axes, defaults


def own_setting(word: str) -> str | None:
    """The flag or Hydra key of an ``overrides`` word that the suite sets itself (``-tp``, ``--max_steps=5``,
    ``train.train_iters=5``, ``+logger.log_energy=true``), or None."""
    flag = word.split("=", 1)[0]
    if flag in OWN_FLAGS:
        return flag
    if flag.startswith("--") and len(flag) > 2:  # argparse takes a long flag's unique prefix as the flag itself
        for own in OWN_FLAGS:
            if own.startswith(flag):
                return own
    key = flag.lstrip("+~")
    return key if key in OWN_KEYS else None


class _Bridge(Suite):
    framework = "megatron-bridge"
    imports = ("megatron.bridge",)
    launcher = "srun"  # NeMo-Run's Slurm executor: one task per GPU
    launchers = ("srun", "torchrun")
    precisions: ClassVar[tuple[str, ...]] = tuple(COMPUTE_DTYPES)
    published = "time"
    sample_unit = "tokens/s"
    family: ClassVar[str] = ""  # -m
    recipes: ClassVar[Mapping[str, Recipe]] = {}
    options = {"python": "python3", "workdir": "/opt/Megatron-Bridge", "script": "scripts/performance/bootstrap.py",
               "log_energy": False, "offline": False, "overrides": ""}

    @property
    def moe(self) -> bool:
        return any(r.experts for r in self.recipes.values())

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "overrides":
            try:
                words = shlex.split(value)
            except ValueError as err:
                return f"cannot be split into arguments: {err}"
            own = [w for w in words if own_setting(w)]
            if own:
                return (f"{', '.join(own)}: set by the suite from the cell (its axes and [measure]); change the "
                        "matrix instead, so that the cell's label says what ran")
        return None

    # ---- the cell's layout
    def _param(self, cell: Cell, name: str) -> Any:
        return cell.param(name, self.axis_defaults.get(name, 1))

    def layout(self, cell: Cell) -> dict[str, int]:
        """tp, pp, cp, vpp, ep, etp, dp, the micro and global batch, the accumulation steps and the sequence length
        of a cell that :meth:`drop_reason` accepted."""
        d = {k: int(self._param(cell, k)) for k in _DEGREES}
        tp, pp, cp = d["tensor_parallel"], d["pipeline_parallel"], d["context_parallel"]
        dp = cell.devices // (tp * pp * cp)
        gb = self.global_batch(cell)
        return {"tp": tp, "pp": pp, "cp": cp, "vpp": d["virtual_pipeline"], "ep": d["expert_parallel"],
                "etp": d["expert_tensor_parallel"], "dp": dp, "micro": cell.batch_size, "global": gb,
                "accumulation": gb // (cell.batch_size * dp), "seq": d["seq_length"]}

    def layout_text(self, cell: Cell) -> str:
        fsdp = " fsdp" if self._param(cell, "megatron_fsdp") else ""
        return layout_words(self.layout(cell), ("tp", "pp", "cp", "dp", "vpp", "ep", "etp")) + fsdp

    def global_batch(self, cell: Cell) -> int:
        """The ``global_batch`` axis, else micro batch x data-parallel size: the ``-gb`` the program is given."""
        try:
            model = int(self._param(cell, "tensor_parallel")) * int(self._param(cell, "pipeline_parallel")) * int(
                self._param(cell, "context_parallel"))
            gb = int(self._param(cell, "global_batch"))
        except (TypeError, ValueError):
            return super().global_batch(cell)  # a cell drop_reason refuses
        return gb or (cell.batch_size * (cell.devices // model) if model > 0 else 0) or super().global_batch(cell)

    def drop_reason(self, cell: Cell) -> str | None:
        why = super().drop_reason(cell)
        if why:
            return why
        name = str(self._param(cell, "recipe"))
        recipe = self.recipes.get(name)
        if recipe is None:
            return (f"{self.name}: recipe {name!r} is none of the suite's Megatron-Bridge recipes of family "
                    f"{self.family}: {', '.join(self.recipes)}")
        gpu = str(self._param(cell, "gpu"))
        if gpu not in GPUS:
            return f"{self.name}: gpu {gpu!r} is none of Megatron-Bridge's recipe GPUs (-g: {', '.join(GPUS)})"
        why = precision_reason(cell.precision, gpu)  # the one table of what each GPU's tensor cores have
        if why:
            return why
        if not isinstance(self._param(cell, "megatron_fsdp"), bool):
            return f"{self.name}: megatron_fsdp is true or false"
        values = {k: self._param(cell, k) for k in _DEGREES}
        bad = [k for k, v in values.items() if isinstance(v, bool) or not isinstance(v, int)]
        if bad:
            return f"{self.name}: {bad[0]} = {values[bad[0]]!r}: a whole number is wanted"
        return _layout_reason(name, recipe, cell, {k: int(v) for k, v in values.items()})

    def steps(self, measure: Measure) -> int:
        return measure.warmup_steps + measure.measure_steps

    def program(self, cell: Cell, measure: Measure, options: Mapping[str, Any]) -> list[str]:
        lay = self.layout(cell)
        argv = [options["python"], f"{options['workdir']}/{options['script']}",
                "-m", self.family, "-mr", str(self._param(cell, "recipe")), "-g", str(self._param(cell, "gpu")),
                "-ng", str(cell.devices), "-gn", str(cell.gpus_per_node), "-c", COMPUTE_DTYPES[cell.precision],
                "-tp", str(lay["tp"]), "-pp", str(lay["pp"]), "-cp", str(lay["cp"]),
                "-vp", str(lay["vpp"]) if lay["vpp"] > 1 else "None"]
        if self.moe:
            argv += ["-ep", str(lay["ep"]), "-et", str(lay["etp"])]
        argv += ["-mb", str(lay["micro"]), "-gb", str(lay["global"]), "-sl", str(lay["seq"]),
                 "-ms", str(self.steps(measure)),
                 "--use_megatron_fsdp", "true" if self._param(cell, "megatron_fsdp") else "false",
                 "--save_config_filepath", f"{RUN_DIR}/ConfigContainer.yaml",
                 "logger.log_interval=1", "logger.log_throughput=true"]
        if not self._param(cell, "megatron_fsdp"):  # the flag only turns FSDP on: a recipe's own FSDP goes by Hydra
            argv.append("ddp.use_megatron_fsdp=false")
        if options["script"].endswith("run_script.py"):  # NeMo-Run's PerfEnvPlugin adds them to every run; with
            argv += ["train.manual_gc=true", "train.manual_gc_interval=100"]  # bootstrap.py the recipe sets them
        if options["log_energy"]:
            argv.append("logger.log_energy=true")
        return ranks_from_slurm(cell, argv + shlex.split(options["overrides"]))

    def environment(self, cell: Cell, options: Mapping[str, Any]) -> dict[str, str]:
        """As NeMo-Run's launch of the performance scripts (utils/executors.py): Transformers offline (the recipes'
        NullTokenizer needs no download) but the Hugging Face hub online, for the model config each recipe reads
        from it (``AutoBridge.from_hf_pretrained``; meta-llama's are gated: HF_TOKEN in the job's environment, set
        where it is submitted, never in a matrix); option ``offline``: the hub offline too, for nodes without
        internet, from a prefetched HF_HOME the container sees."""
        return {"TRANSFORMERS_OFFLINE": "1", "HF_HUB_OFFLINE": "1" if options["offline"] else "0",
                "TOKENIZERS_PARALLELISM": "False"}

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return parse(lines, ctx)


def _layout_reason(name: str, r: Recipe, cell: Cell, d: dict[str, int]) -> str | None:
    """Why Megatron-core would refuse the cell's layout at start-up (``megatron/core/parallel_state.py``, the model
    config's and the interleaved schedule's checks), or None."""
    tp, pp, cp, vpp = d["tensor_parallel"], d["pipeline_parallel"], d["context_parallel"], d["virtual_pipeline"]
    ep, etp, gb, seq = d["expert_parallel"], d["expert_tensor_parallel"], d["global_batch"], d["seq_length"]
    low = [k for k in _DEGREES if k != "global_batch" and d[k] < 1]
    if low:
        return f"{low[0]} = {d[low[0]]}: a parallel degree (and seq_length) is >= 1"
    if gb < 0:
        return f"global_batch = {gb}: 0 (micro batch x data-parallel size) or more"
    model = tp * pp * cp
    if cell.devices % model:
        return (f"{plural(cell.devices, 'GPU')} ({cell.shape}) {noun(cell.devices, 'is', 'are')} not a multiple of "
                f"tensor_parallel x pipeline_parallel x context_parallel = {tp} x {pp} x {cp} = {model}: no whole "
                "data-parallel size")
    if r.heads % tp or r.groups % tp:
        return (f"{name}: {plural(r.heads, 'attention head')} and {plural(r.groups, 'key/value group')} cannot be "
                f"split over tensor_parallel {tp}")
    divisor = tp * (2 * cp if cp > 1 else 1)  # tp > 1: sequence parallelism splits the sequence over tp too
    if seq % divisor:
        return (f"seq_length {seq} is not a multiple of "
                + " x ".join(x for x in (f"tensor_parallel {tp}" if tp > 1 else "",
                                         f"2 x context_parallel {cp}" if cp > 1 else "") if x)
                + f" = {divisor} (Megatron-core splits the sequence over them)")
    dp = cell.devices // model
    per_step = cell.batch_size * dp
    if gb and gb % per_step:
        return (f"global_batch {gb} is not a multiple of micro batch {cell.batch_size} x data-parallel size {dp} = "
                f"{per_step}")
    micro_batches = (gb or per_step) // per_step
    if vpp > 1 and pp < 2:
        return f"virtual_pipeline > 1 ({vpp}) needs pipeline_parallel > 1 (the interleaved schedule)"
    if vpp > 1 and micro_batches % pp:
        return (f"the interleaved schedule needs the micro batches of a step ({micro_batches}: global_batch / "
                f"(micro batch x data-parallel size)) to be a multiple of pipeline_parallel {pp}")
    if r.layouts is not None:
        if (pp, vpp) not in r.layouts:
            pairs = ", ".join(f"({a}, {b})" for a, b in sorted(r.layouts))
            return (f"{name}: its recipe has a pipeline layout of its {plural(r.layers, 'layer')} for "
                    f"(pipeline_parallel, virtual_pipeline) in {pairs} only, not ({pp}, {vpp})")
    elif (r.layers + r.split_extra) % (pp * vpp):
        counted = plural(r.layers, "layer") + (" + embedding + loss" if r.split_extra else "")
        return (f"{name}: {counted} do not split into pipeline_parallel x virtual_pipeline = {pp} x {vpp} = "
                f"{plural(pp * vpp, 'stage')} evenly (Megatron-core's pipeline split)")
    if not r.experts:
        return None
    if r.experts % ep:
        return f"{name}: its {plural(r.experts, 'expert')} are not a multiple of expert_parallel {ep}"
    grid = etp * ep * pp
    if cell.devices % grid:
        return (f"{plural(cell.devices, 'GPU')} {noun(cell.devices, 'is', 'are')} not a multiple of "
                f"expert_tensor_parallel x expert_parallel x pipeline_parallel = {etp} x {ep} x {pp} = {grid} "
                "(Megatron-core's expert grid)")
    return None


_SEQ = re.compile(r"(?:^|\s)(?:-sl|--seq_length)[ =](\d+)(?=\s|$)")


def parse(lines: Iterable[str], ctx: ParseContext) -> RunResult:
    """The Megatron reader's run (:func:`.gpt_log.parse`) in tokens: its samples (sequences) x the sequence length
    the job's command gave (``-sl``), every figure per sample made per token."""
    res = gpt_log.parse(lines, ctx, no_memory_reason="Megatron-Bridge reports torch's allocator, not the GPU's "
                                                     "used memory")
    x = res.extra
    m = _SEQ.search(str((res.job or {}).get("command") or ""))
    seq = int(m.group(1)) if m else None
    if seq is None:
        x["tokens_basis"] = "none: the job's command gives no -sl (sequence length); the figures stay samples/s"
        return res
    x["seq_length"], x["tokens_basis"] = seq, f"samples x -sl {seq} of the job's command"
    for name in ("throughput", "throughput_speed", "samples_per_joule"):
        value = getattr(res, name)
        if value is not None:
            setattr(res, name, value * seq)
    if "flops_per_sample" in x:
        x["flops_per_sample"] /= seq  # per token, the unit's sample
    x.pop("tokens_per_s", None)  # the throughput itself now
    return res


@register
class Llama3(_Bridge):
    model = "llama3"
    family = "llama"
    recipes = LLAMA3
    axes, axis_defaults = _axes(LLAMA3)
    description = "Megatron-Bridge performance recipes: Llama 3 8B / 70B, Llama 3.1 405B pre-training"


@register
class Qwen3(_Bridge):
    model = "qwen3"
    family = "qwen"
    recipes = QWEN3
    axes, axis_defaults = _axes(QWEN3)
    description = "Megatron-Bridge performance recipes: Qwen3 30B-A3B / 235B-A22B (MoE) pre-training"


@register
class DeepSeekV3(_Bridge):
    model = "deepseek-v3"
    family = "deepseek"
    recipes = DEEPSEEK_V3
    axes, axis_defaults = _axes(DEEPSEEK_V3)
    description = "Megatron-Bridge performance recipes: DeepSeek-V3 (MoE, 671B) pre-training"


@register
class GptOss(_Bridge):
    model = "gpt-oss"
    family = "gpt_oss"
    recipes = GPT_OSS
    axes, axis_defaults = _axes(GPT_OSS)
    description = "Megatron-Bridge performance recipes: gpt-oss 120B (MoE) pre-training"
