"""Synthetic-data baselines: ``tf-cnn`` (tensorflow/benchmarks tf_cnn_benchmarks.py: ResNet-50 and VGG16) and
``horovod-synthetic`` (Horovod's examples ``*_synthetic_benchmark.py``) — the network sanity baseline of a scaling
study. With ``data = "real"`` tf_cnn_benchmarks also trains on ImageNet TFRecords, and runs the DDL study's accuracy
runs (``[measure] mode = "accuracy"``: its own --num_epochs, evaluation after each epoch and --stop_at_top_1_accuracy).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing import evals as lp_evals
from dlperf_slurm.suites import REPEAT, Suite, register


@register
class TfCnnResNet50(Suite):
    framework = "tf-cnn"
    imports = ("tensorflow",)
    model = "resnet50"
    description = "tf_cnn_benchmarks.py --model=resnet50 (synthetic unless data = real)"
    sample_unit = "img/s"
    launcher = "mpirun"
    launchers = ("mpirun", "horovodrun", "srun", "tf_config")
    precisions = ("fp32", "fp16", "amp")
    supports_xla = True
    evaluations = ("tf_cnn",)  # "Accuracy @ 1 = ... [N examples]" (--eval, --eval_during_training_every_n_*)
    # accuracy runs: --num_epochs of the real data, an evaluation of one pass of its validation set after each
    # epoch (--eval_during_training_every_n_epochs=1: after epochs 1..E-1, then its final evaluation), stopping at
    # a top-1 target (--stop_at_top_1_accuracy; a top-5 target has no flag: all epochs, collect reads it)
    accuracy = True
    # local_parameter_device: where replicated / parameter_server keep the shared variables (tf_cnn_benchmarks'
    # default gpu; Tensorpack's benchmark compares against --local_parameter_device=cpu)
    axes = {"variable_update": ("horovod", "replicated", "parameter_server"), "data": ("synthetic", "real"),
            "local_parameter_device": ("gpu", "cpu")}
    axis_defaults = {"variable_update": "horovod", "data": "synthetic", "local_parameter_device": "gpu"}
    # extra_args: more of tf_cnn_benchmarks' flags, after the suite's (split as a shell would, each one word): an
    # accuracy run's optimizer and learning-rate schedule (--optimizer=momentum --piecewise_learning_rate_schedule=...)
    options = {"workdir": "/workspace/benchmarks/scripts/tf_cnn_benchmarks", "data_dir": "/data/imagenet",
               "python": "python3", "extra_args": ""}

    def drop_reason(self, cell) -> str | None:
        if (why := super().drop_reason(cell)) is not None:
            return why
        update = cell.param("variable_update", "horovod")
        if update == "horovod":
            return "variable_update horovod is one rank per GPU: not under tf_config" \
                if cell.launcher == "tf_config" else None
        # replicated / parameter_server: one process per node drives its GPUs (--num_gpus)
        if cell.nodes > 1:
            return (f"variable_update {update} across nodes needs tf_cnn_benchmarks' --job_name/--ps_hosts/"
                    "--worker_hosts processes, which this suite does not start")
        if cell.launcher != "tf_config" and cell.gpus_per_node > 1:
            return (f"variable_update {update}: one process drives all of the node's GPUs (--num_gpus): launcher "
                    f"tf_config, not one per GPU under {cell.launcher}")
        return None

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        update = cell.param("variable_update", "horovod")
        length = (f"--num_epochs={measure.epochs}" if measure.accuracy  # tf_cnn: at most one of the two
                  else f"--num_batches={measure.measure_steps}")
        argv = [options["python"], f"{options['workdir']}/tf_cnn_benchmarks.py", f"--model={self.model}",
                f"--batch_size={cell.batch_size}", length,
                f"--num_warmup_batches={measure.warmup_steps}", f"--variable_update={update}",
                "--display_every=10", "--num_gpus=" + ("1" if update == "horovod" else str(cell.gpus_per_node))]
        if update != "horovod" and cell.param("local_parameter_device", "gpu") != "gpu":
            argv.append(f"--local_parameter_device={cell.param('local_parameter_device', 'gpu')}")
        if cell.precision in ("fp16", "amp"):
            argv.append("--use_fp16")
        if cell.xla:
            argv.append("--xla_compile")
        if cell.param("data", "synthetic") == "real":
            argv += [f"--data_dir={options['data_dir']}", "--data_name=imagenet"]
        if measure.accuracy:
            # --num_eval_epochs: one pass of the validation set (it defaults to --num_epochs passes)
            # each repeat its own seed (tf_cnn's default is the same 1234 for every run)
            argv += ["--eval_during_training_every_n_epochs=1", "--num_eval_epochs=1", f"--tf_random_seed={REPEAT}"]
            if measure.target is not None and measure.target.metric == "top1":
                argv.append(f"--stop_at_top_1_accuracy={measure.target.value:g}")
        return argv + shlex.split(options["extra_args"])

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "extra_args":
            try:
                shlex.split(value)
            except ValueError as err:
                return f"cannot be split into arguments: {err}"
        return None

    def accuracy_error(self, cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        if cell.param("data", "synthetic") != "real":
            return ("axes.data", 'an accuracy run evaluates on real data: set data = ["real"] in [axes] and '
                                 "data_dir in [options] (ImageNet TFRecords: train-* and validation-*)")
        return None

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse_tf_cnn(lines, ctx)


@register
class TfCnnVgg16(TfCnnResNet50):
    """VGG16 (tf_cnn_benchmarks' models/vgg_model.py, ImageNet only; 138,357,544 parameters, 528 MiB of fp32
    gradients a step: the DDL study's communication-bound model). Its program's defaults differ from ResNet-50's only
    inside the program (a constant learning rate of 0.005 where ResNet-50 has a warm-up and steps, unless
    --piecewise_learning_rate_schedule; no batch norm): the argv, the axes and the log are the same."""

    model = "vgg16"
    description = "tf_cnn_benchmarks.py --model=vgg16 (synthetic unless data = real)"


@register
class HorovodSyntheticResNet50(Suite):
    framework = "horovod-synthetic"
    imports = ("horovod",)
    model = "resnet50"
    description = "Horovod examples/pytorch/pytorch_synthetic_benchmark.py (or the tensorflow2 one) --model resnet50"
    sample_unit = "img/s"
    launcher = "horovodrun"
    launchers = ("horovodrun", "mpirun", "srun")
    precisions = ("fp32", "fp16")
    options = {"script": "/workspace/horovod/examples/pytorch/pytorch_synthetic_benchmark.py", "python": "python3",
               "batches_per_iter": 10}
    option_minimum = {"batches_per_iter": (1, "batches per timed iteration")}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        bpi = options["batches_per_iter"]
        argv = [options["python"], options["script"], "--model", "resnet50", "--batch-size", str(cell.batch_size),
                "--num-warmup-batches", str(measure.warmup_steps), "--num-batches-per-iter", str(bpi),
                "--num-iters", str(max(1, measure.measure_steps // bpi))]
        if cell.precision == "fp16":
            argv.append("--fp16-allreduce")
        return argv

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse_horovod(lines, ctx)


# ----------------------------------------------------------------------------------------------- parsing
# Neither log has timestamps, so the time flavour is the framework's own wall-clock measurement of the window.
#
# tf_cnn_benchmarks (benchmark_cnn.py; warm-up batches are run first and not numbered):
#   Running warm up / Done warm up / Step<TAB>Img/sec<TAB>total_loss
#   1<TAB>images/sec: 226.5 +/- 0.0 (jitter = 0.0)<TAB>7.756          step after warm-up, running mean per worker
#   100<TAB>images/sec: 226.3 +/- 0.1 (jitter = 0.7)<TAB>7.878
#   total images/sec: 226.26                                          num_workers x steps x batch / elapsed
# Time flavour: "total images/sec" (rank 0's wall clock over the measured batches, for all workers; the median if
# several ranks print it). Speed flavour: the last running mean printed inside the window x the workers.
#
# Horovod *_synthetic_benchmark.py (rank 0 prints):
#   Iter #0: 303.8 img/sec per GPU          one iteration = batches_per_iter batches after the warm-up batches
#   Img/sec per GPU: 304.0 +-0.5
#   Total img/sec on 16 GPU(s): 4864.6 +-8.6     = size x mean(iterations): the speed flavour, not a measurement
# Time flavour: size x n / sum(1 / s_i), i.e. the global batch over the summed iteration times.

_NUM = lp.NUM  # a number, nan or inf

_TFCNN_STEP = re.compile(r"(\d+)\s+images/sec: (" + _NUM + r")(?: \+/- \S+ \(jitter = \S+\))?\s+(\S+)")
_TFCNN_TOTAL = re.compile(r"total images/sec: (" + _NUM + r")\s*$")
_TFCNN_DEVICES = re.compile(r"Devices:\s+\[(.*)\]")
_TFCNN_ROUND = re.compile(r"Round up warm up steps to (\d+)")
_TFCNN_BATCHES = re.compile(r"Num batches:\s+(\d+)")
_TFCNN_EPOCHS = re.compile(r"Num epochs:\s+(\d+(?:\.\d+)?)")
_TFCNN_BATCH = re.compile(r"Batch size:\s+(\d+) global")
# the model the program says it ran: tf_cnn_benchmarks' header "Model:       vgg16" (its model's get_model_name()),
# Horovod's "Model: resnet50" (its --model); recorded as printed in extra["log_model"] (recognise.written_for)
_MODEL = re.compile(r"Model:\s+([^\s\"']+)\s*$")
# lines that follow a step line (whose cut loss would be glued to them): the dashes before the total, the total,
# evaluations, the end of training (glued to the dashes, the last step's loss read as "nan-----" is lost: a run whose
# last loss is nan read as OK)
_TFCNN_STARTS = ("-----", "total images/sec", "Running ", "Accuracy @ ", "Done with", "Resuming")


@dataclass(slots=True)
class _TfCnnLog:
    """What tf_cnn_benchmarks printed besides its step lines, and the running figures of its last step."""

    warmup: int  # the warm-up steps it ran ("Round up warm up steps to N")
    devices: int | None = None  # "Devices: [...]"
    batches: int | None = None  # "Num batches: N": the steps it timed
    epochs: float | None = None  # "Num epochs: E": the epochs those steps are (--num_epochs; the dataset's size)
    global_batch: int | None = None  # "Batch size: N global"
    model: str | None = None  # "Model:       vgg16"
    totals: list[float] = field(default_factory=list)  # "total images/sec: X"
    running: dict[int, list[float]] = field(default_factory=dict)  # the last step's images/sec, over the workers
    trained: bool = False  # "Done with training": the end of a run that evaluated during training (no total)


def _parse_tf_cnn(lines: Iterable[str], ctx: ParseContext) -> RunResult:
    st = _TfCnnLog(warmup=ctx.warmup_steps)
    window = lp.Window(ctx.warmup_steps, ctx.measure_steps)
    evals = lp_evals.Reader(TfCnnResNet50.evaluations)

    def handler(text: str, rank: int | None, final: bool) -> int:
        c = text[:1]
        if c.isdigit() and "images/sec:" in text:
            m = _TFCNN_STEP.match(text)
            if not m:
                return lp.NOT_MINE if final else lp.FRAGMENT
            if not final and text.endswith(m.group(3)):  # the loss ends the line: it may be cut
                return lp.FRAGMENT
            k = int(m.group(1))
            window.add(st.warmup + k, loss=lp.to_float(m.group(3)))
            if k <= ctx.measure_steps:
                v = lp.to_float(m.group(2))
                run = st.running
                if v is not None and (not run or k >= max(run)):
                    if run and k > max(run):
                        run.clear()
                    run.setdefault(k, []).append(v)
            return lp.CONSUMED
        if "total images/sec:" in text:
            m = _TFCNN_TOTAL.search(text)
            if not final:  # the figure ends the line: it may be cut short, read it with what follows
                return lp.FRAGMENT
            if not m:
                return lp.NOT_MINE
            v = lp.to_float(m.group(1))
            if v is not None and len(st.totals) < 4096:
                st.totals.append(v)
            return lp.CONSUMED
        if "Devices:" in text:
            m = _TFCNN_DEVICES.search(text)
            if m and st.devices is None:
                st.devices = max(1, len([d for d in m.group(1).split(",") if d.strip()]))
            return lp.CONSUMED
        if "Round up warm up steps" in text:
            m = _TFCNN_ROUND.search(text)
            if m:
                st.warmup = int(m.group(1))
            return lp.CONSUMED
        if "Num batches:" in text:
            m = _TFCNN_BATCHES.search(text)
            if m:
                st.batches = int(m.group(1))
            return lp.CONSUMED
        if "Num epochs:" in text:
            m = _TFCNN_EPOCHS.search(text)
            if m:
                st.epochs = float(m.group(1))
            return lp.CONSUMED
        if "Batch size:" in text and "global" in text:
            m = _TFCNN_BATCH.search(text)
            if m:
                st.global_batch = int(m.group(1))
            return lp.CONSUMED
        if text.startswith("Done with training"):  # the end of a run that evaluates during training
            st.trained = True
            return lp.CONSUMED
        if text.startswith("Model:"):
            st.model = _read_model(text, st.model)
            return lp.CONSUMED
        return lp.CONSUMED if evals.read(text) else lp.NOT_MINE

    facts = lp.Scanner(handler, starts=lambda t: bool(_TFCNN_STEP.match(t)) or t.startswith(_TFCNN_STARTS),
                       needles=("images/sec", "Devices:", "Round up", "Num batches:", "Num epochs:", "Batch size:",
                                "Done with", "Model:", *evals.needles)
                       ).run(lines)
    gb = float(ctx.global_batch)
    if st.batches and st.epochs:  # an evaluation at global step s (warm-up included) closes epoch (s - warm-up) / N
        per_epoch = st.batches / st.epochs
        evals.evals = [dataclasses.replace(e, epoch=max(1, round((e.step - st.warmup) / per_epoch)))
                       if e.epoch is None and e.step is not None else e for e in evals.evals]
    extra: dict[str, Any] = evals.extra()
    if st.model is not None:
        extra["log_model"] = st.model
    if st.global_batch is not None and st.global_batch != ctx.global_batch:
        extra["global_batch_mismatch"] = f"log {st.global_batch} global, expected {ctx.global_batch}"
    measured = st.batches or ctx.measure_steps
    if st.batches is not None and st.batches != ctx.measure_steps:
        extra["measured_batches"] = st.batches
    totals = [t for t in st.totals if lp.finite(t) and t > 0]
    fig = None
    complete = bool(st.totals) or st.trained
    workers = ctx.world_size / (st.devices or 1)
    speed = None
    if st.running:
        (k, vals), = st.running.items()
        speed = statistics.median(vals) * workers
        if not st.totals and st.trained:  # evaluating in training: the running mean of its first k steps
            measured = k
    if not st.totals and st.trained and speed is not None and lp.finite(speed) and speed > 0:
        # evaluating during training, tf_cnn_benchmarks prints no total ("both processing training and evaluation
        # images, so a singular images/sec value is meaningless"): its step lines' running mean stands for it
        totals = [speed]
        extra["time_flavour"] = "tf_cnn running images/sec of the step lines (no total: it evaluated in training)"
    if totals:
        thr = statistics.median(totals)
        fig = lp.WindowFigures(start=st.warmup, end=st.warmup + measured, seconds=measured * gb / thr, throughput=thr,
                               latency_ms=1000.0 * gb / thr, speed=speed, speed_points=1 if speed is not None else 0)
        if len(totals) > 1:
            extra["ranks_reporting_total"] = len(totals)
        extra.setdefault("time_flavour", "tf_cnn total images/sec (its own wall clock over the measured batches)")
    if window.max_step < st.warmup + measured and complete:
        window.max_step = st.warmup + measured  # display_every may skip the last step's line
    res = lp.finish(window, facts, ctx, global_batch=gb, figures=fig, complete=complete, extra=extra,
                    no_memory_reason="tf_cnn_benchmarks logs report no GPU memory")
    if complete and not totals and res.status == Status.OK:
        res.status, res.reason = Status.UNMEASURED, "total images/sec is not a positive number"
    return res


def _read_model(text: str, seen: str | None) -> str | None:
    """The model a ``Model:`` header line names (the first such line's: a restarted run prints it again)."""
    m = _MODEL.match(text)
    return seen if seen is not None or m is None else m.group(1)


_HVD_ITER = re.compile(r"Iter #(\d+): (" + _NUM + r") img/sec per (GPU|CPU)\s*$")
_HVD_TOTAL = re.compile(r"Total img/sec on (\d+) (?:GPU|CPU)\(s\): (" + _NUM + r") \+-")
_HVD_SIZE = re.compile(r"Number of (?:GPU|CPU)s: (\d+)")
_HVD_BATCH = re.compile(r"^Batch size: (\d+)\s*$")


@dataclass(slots=True)
class _HorovodLog:
    """What the Horovod synthetic benchmark printed: its size, batch, per-iteration and total images/sec."""

    size: int | None = None  # "Number of GPUs: N", or the total line's
    batch: int | None = None  # "Batch size: N"
    total: float | None = None  # "Total img/sec on N GPU(s): X"
    model: str | None = None  # "Model: resnet50"
    speeds: dict[int, float] = field(default_factory=dict)  # iteration -> "Iter #k: X img/sec per GPU"


def _parse_horovod(lines: Iterable[str], ctx: ParseContext) -> RunResult:
    bpi = ctx.options.get("batches_per_iter", 10)
    bpi = bpi if isinstance(bpi, int) and not isinstance(bpi, bool) and bpi > 0 else 10
    iters = max(1, ctx.measure_steps // bpi)
    st = _HorovodLog()
    window = lp.Window(ctx.warmup_steps, iters * bpi)

    def handler(text: str, rank: int | None, final: bool) -> int:
        if text.startswith("Iter #") or "Iter #" in text:
            m = _HVD_ITER.search(text)
            if not m:
                return lp.NOT_MINE if final else lp.FRAGMENT
            x = int(m.group(1))
            v = lp.to_float(m.group(2))
            window.add(ctx.warmup_steps + (x + 1) * bpi)
            if x < iters and v is not None and x not in st.speeds:
                st.speeds[x] = v
            return lp.CONSUMED
        if "Total img/sec on" in text:
            m = _HVD_TOTAL.search(text)
            if not m:
                return lp.NOT_MINE if final else lp.FRAGMENT
            st.size = st.size or int(m.group(1))
            st.total = lp.to_float(m.group(2))
            return lp.CONSUMED
        if text.startswith("Number of"):
            m = _HVD_SIZE.match(text)
            if m:
                st.size = int(m.group(1))
            return lp.CONSUMED
        if text.startswith("Batch size:"):
            m = _HVD_BATCH.match(text)
            if m:
                st.batch = int(m.group(1))
            return lp.CONSUMED
        if text.startswith("Model:"):
            st.model = _read_model(text, st.model)
            return lp.CONSUMED
        return lp.NOT_MINE

    facts = lp.Scanner(handler, starts=lambda t: t.startswith(("Iter #", "Img/sec", "Total img/sec")),
                       needles=("Iter #", "Total img/sec", "Number of", "Batch size:", "Model:")).run(lines)
    extra: dict[str, Any] = {"batches_per_iter": bpi}
    if st.model is not None:
        extra["log_model"] = st.model
    size = ctx.world_size
    if st.size is not None and st.size != ctx.world_size:
        extra["world_size_mismatch"] = f"log {st.size}, expected {ctx.world_size}"
    if st.batch is not None and st.batch != ctx.batch_size:
        extra["batch_mismatch"] = f"log {st.batch} per GPU, expected {ctx.batch_size}"
    speeds = [v for v in st.speeds.values() if lp.finite(v) and v > 0]
    complete = st.total is not None or len(st.speeds) >= iters
    gb = float(ctx.global_batch)
    fig = None
    if complete and speeds and len(speeds) == len(st.speeds):
        n = len(speeds)
        thr = size * n / sum(1.0 / v for v in speeds)
        fig = lp.WindowFigures(start=ctx.warmup_steps, end=ctx.warmup_steps + n * bpi, seconds=n * bpi * gb / thr,
                               throughput=thr, latency_ms=1000.0 * gb / thr, speed=size * sum(speeds) / n,
                               speed_points=n)
    if st.total is not None:
        extra["reported_throughput"] = st.total
    if complete:
        window.max_step = max(window.max_step, ctx.warmup_steps + iters * bpi)
    res = lp.finish(window, facts, ctx, global_batch=gb, figures=fig, complete=complete, extra=extra,
                    no_memory_reason="Horovod synthetic benchmarks report no GPU memory")
    if complete and fig is None and res.status == Status.OK:
        res.status = Status.UNMEASURED
        res.reason = "iteration throughputs missing or not positive"
    return res
