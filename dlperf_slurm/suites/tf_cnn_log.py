"""Reading the synthetic baselines' logs (:mod:`.tf_cnn`): tf_cnn_benchmarks' step lines and its total images/sec,
Horovod's synthetic benchmarks' per-iteration and total img/sec.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing import evals as lp_evals

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
    """What tf_cnn_benchmarks printed besides its step lines, and the running figures of its last step; and its
    line handler (:meth:`handler`)."""

    window: lp.Window
    evals: lp_evals.Reader
    measure: int  # the steps the matrix times
    warmup: int  # the warm-up steps it ran ("Round up warm up steps to N")
    devices: int | None = None  # "Devices: [...]"
    batches: int | None = None  # "Num batches: N": the steps it timed
    epochs: float | None = None  # "Num epochs: E": the epochs those steps are (--num_epochs; the dataset's size)
    global_batch: int | None = None  # "Batch size: N global"
    model: str | None = None  # "Model:       vgg16"
    totals: list[float] = field(default_factory=list)  # "total images/sec: X"
    running: dict[int, list[float]] = field(default_factory=dict)  # the last step's images/sec, over the workers
    trained: bool = False  # "Done with training": the end of a run that evaluated during training (no total)

    def step_line(self, text: str, final: bool) -> int:
        """A step line (``100<TAB>images/sec: 226.3 +/- 0.1 (jitter = 0.7)<TAB>7.878``): its loss, and its running
        images/sec while it is the last step's."""
        m = _TFCNN_STEP.match(text)
        if not m:
            return lp.NOT_MINE if final else lp.FRAGMENT
        if not final and text.endswith(m.group(3)):  # the loss ends the line: it may be cut
            return lp.FRAGMENT
        k = int(m.group(1))
        self.window.add(self.warmup + k, loss=lp.to_float(m.group(3)))
        if k <= self.measure:
            v = lp.to_float(m.group(2))
            run = self.running
            if v is not None and (not run or k >= max(run)):
                if run and k > max(run):
                    run.clear()
                run.setdefault(k, []).append(v)
        return lp.CONSUMED

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        c = text[:1]
        if c.isdigit() and "images/sec:" in text:
            return self.step_line(text, final)
        if "total images/sec:" in text:
            m = _TFCNN_TOTAL.search(text)
            if not final:  # the figure ends the line: it may be cut short, read it with what follows
                return lp.FRAGMENT
            if not m:
                return lp.NOT_MINE
            v = lp.to_float(m.group(1))
            if v is not None and len(self.totals) < 4096:
                self.totals.append(v)
            return lp.CONSUMED
        if "Devices:" in text:
            m = _TFCNN_DEVICES.search(text)
            if m and self.devices is None:
                self.devices = max(1, len([d for d in m.group(1).split(",") if d.strip()]))
            return lp.CONSUMED
        if "Round up warm up steps" in text:
            m = _TFCNN_ROUND.search(text)
            if m:
                self.warmup = int(m.group(1))
            return lp.CONSUMED
        if "Num batches:" in text:
            m = _TFCNN_BATCHES.search(text)
            if m:
                self.batches = int(m.group(1))
            return lp.CONSUMED
        if "Num epochs:" in text:
            m = _TFCNN_EPOCHS.search(text)
            if m:
                self.epochs = float(m.group(1))
            return lp.CONSUMED
        if "Batch size:" in text and "global" in text:
            m = _TFCNN_BATCH.search(text)
            if m:
                self.global_batch = int(m.group(1))
            return lp.CONSUMED
        if text.startswith("Done with training"):  # the end of a run that evaluates during training
            self.trained = True
            return lp.CONSUMED
        if text.startswith("Model:"):
            self.model = _read_model(text, self.model)
            return lp.CONSUMED
        return lp.CONSUMED if self.evals.read(text) else lp.NOT_MINE


def parse_tf_cnn(lines: Iterable[str], ctx: ParseContext, evaluations: tuple[str, ...]) -> RunResult:
    st = _TfCnnLog(lp.Window(ctx.warmup_steps, ctx.measure_steps), lp_evals.Reader(evaluations), ctx.measure_steps,
                   warmup=ctx.warmup_steps)
    window, evals = st.window, st.evals
    facts = lp.Scanner(st.handler, starts=lambda t: bool(_TFCNN_STEP.match(t)) or t.startswith(_TFCNN_STARTS),
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
    """What the Horovod synthetic benchmark printed: its size, batch, per-iteration and total images/sec; and its
    line handler (:meth:`handler`)."""

    window: lp.Window
    warmup: int  # the warm-up batches
    bpi: int  # batches per iteration
    iters: int  # the iterations the window times
    size: int | None = None  # "Number of GPUs: N", or the total line's
    batch: int | None = None  # "Batch size: N"
    total: float | None = None  # "Total img/sec on N GPU(s): X"
    model: str | None = None  # "Model: resnet50"
    speeds: dict[int, float] = field(default_factory=dict)  # iteration -> "Iter #k: X img/sec per GPU"

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        if text.startswith("Iter #") or "Iter #" in text:
            m = _HVD_ITER.search(text)
            if not m:
                return lp.NOT_MINE if final else lp.FRAGMENT
            x = int(m.group(1))
            v = lp.to_float(m.group(2))
            self.window.add(self.warmup + (x + 1) * self.bpi)
            if x < self.iters and v is not None and x not in self.speeds:
                self.speeds[x] = v
            return lp.CONSUMED
        if "Total img/sec on" in text:
            m = _HVD_TOTAL.search(text)
            if not m:
                return lp.NOT_MINE if final else lp.FRAGMENT
            self.size = self.size or int(m.group(1))
            self.total = lp.to_float(m.group(2))
            return lp.CONSUMED
        if text.startswith("Number of"):
            m = _HVD_SIZE.match(text)
            if m:
                self.size = int(m.group(1))
            return lp.CONSUMED
        if text.startswith("Batch size:"):
            m = _HVD_BATCH.match(text)
            if m:
                self.batch = int(m.group(1))
            return lp.CONSUMED
        if text.startswith("Model:"):
            self.model = _read_model(text, self.model)
            return lp.CONSUMED
        return lp.NOT_MINE


def parse_horovod(lines: Iterable[str], ctx: ParseContext) -> RunResult:
    bpi = ctx.options.get("batches_per_iter", 10)
    bpi = bpi if isinstance(bpi, int) and not isinstance(bpi, bool) and bpi > 0 else 10
    iters = max(1, ctx.measure_steps // bpi)
    st = _HorovodLog(lp.Window(ctx.warmup_steps, iters * bpi), ctx.warmup_steps, bpi, iters)
    window = st.window
    facts = lp.Scanner(st.handler, starts=lambda t: t.startswith(("Iter #", "Img/sec", "Total img/sec")),
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
