"""The timed training loop and its summary, independent of torch so it can be tested with a fake step."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from dlperf_slurm import events as ev

Log = Callable[..., Any]  # emit(event, **fields)


@dataclass
class LoopResult:
    times: list[float] = field(default_factory=list)  # times[0] = start, times[k] = end of step k (rank 0)
    losses: list[float] = field(default_factory=list)
    nonfinite_steps: list[int] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.times) - 1 if self.times else 0


def _noop() -> None:
    pass


@dataclass
class _Steps:
    """What rank 0 does after each step, in both loops: ``sync()``, take ``time.time()``, read the loss, log the
    step event (and a non-finite loss's one error event), call the heartbeat."""

    result: LoopResult
    global_batch: int
    log: Log
    sync: Callable[[], None]
    loss_value: Callable[[Any], float]
    tiny: bool
    heartbeat: Callable[[float], None] | None
    beat_at: float = 0.0

    def record(self, k: int, loss: Any, began: float, epoch: int | None) -> float:
        """Step ``k``, begun at ``began``, has ended with ``loss``: record it; returns when it ended."""
        self.sync()
        now = time.time()
        value = self.loss_value(loss)
        step_time = now - began
        result, log, tiny = self.result, self.log, self.tiny
        result.times.append(now)
        result.losses.append(value)
        if self.heartbeat is not None and k >= 2 and now - self.beat_at >= 1.0:
            self.beat_at = now
            self.heartbeat(statistics.median(b - a for a, b in zip(result.times[1:], result.times[2:])))
        log(ev.EV_STEP, **{ev.STEP: k, ev.TIME: now, ev.SAMPLES: self.global_batch, ev.LOSS: value,
                           ev.STEP_TIME: step_time, ev.EPOCH: epoch,
                           ev.THROUGHPUT: self.global_batch / step_time if step_time > 0 else None, ev.TINY: tiny})
        if not math.isfinite(value):
            if not result.nonfinite_steps:
                log(ev.EV_ERROR, **{ev.KIND: ev.KIND_NONFINITE_LOSS, ev.STEP: k, ev.LOSS: value, ev.TINY: tiny,
                                    ev.MESSAGE: "loss is not finite; training continues, the run is NONFINITE"})
            result.nonfinite_steps.append(k)
        return now


def timed_loop(
    step: Callable[[], Any],
    total_steps: int,
    warmup_steps: int,
    global_batch: int,
    *,
    rank0: bool,
    log: Log,
    sync: Callable[[], None] = _noop,
    loss_value: Callable[[Any], float] = float,
    on_window_start: Callable[[], None] = _noop,
    on_window_end: Callable[[], None] = _noop,
    tiny: bool = False,
    heartbeat: Callable[[float], None] | None = None,
) -> LoopResult:
    """Run ``step()`` ``total_steps`` times. On rank 0, after each step: ``sync()``, take ``time.time()``, read the
    loss and log a step event. A non-finite loss is logged once as an error event and training goes on, so the
    window is still timed; the summary then says ``nonfinite_loss: true``.

    ``heartbeat(median_step_s)``: called on rank 0 at most once a second from the second step on, with the median
    step time so far (the first step, with its compilation and autotuning, left out): the job script's hang
    watchdog takes its bound from it."""
    result = LoopResult()
    steps = _Steps(result, global_batch, log, sync, loss_value, tiny, heartbeat)
    if warmup_steps == 0:
        on_window_start()
    if rank0:
        sync()
        result.times.append(time.time())
    for k in range(1, total_steps + 1):
        loss = step()
        if rank0:
            steps.record(k, loss, result.times[-1], None)
        if k == warmup_steps:
            on_window_start()
    on_window_end()
    return result


def summarize(result: LoopResult, warmup_steps: int, measure_steps: int, global_batch: int,
              flops_per_sample: float | None, peak_tflops_total: float | None) -> dict[str, Any]:
    """Fields of the summary event (rank 0). Throughput is the time flavour over the measured window; the mean
    of the per-step throughputs over the same window (the speed flavour) is given as ``throughput_mean``."""
    t = result.times
    end = warmup_steps + measure_steps
    fields: dict[str, Any] = {ev.STEPS: result.steps, ev.WARMUP_STEPS: warmup_steps, ev.MEASURE_STEPS: measure_steps,
                              ev.EPOCHS: None}
    throughput = None
    if measure_steps > 0 and len(t) > end and t[end] > t[warmup_steps]:
        elapsed = t[end] - t[warmup_steps]
        throughput = global_batch * measure_steps / elapsed
        speeds = [global_batch / (t[k] - t[k - 1]) for k in range(warmup_steps + 1, end + 1) if t[k] > t[k - 1]]
        fields.update({ev.THROUGHPUT: throughput, ev.LATENCY_MS: 1000.0 * elapsed / measure_steps,
                       ev.THROUGHPUT_MEAN: statistics.fmean(speeds) if speeds else None,
                       ev.MEASURED_SECONDS: elapsed})
    else:
        fields.update({ev.THROUGHPUT: None, ev.LATENCY_MS: None, ev.THROUGHPUT_MEAN: None, ev.MEASURED_SECONDS: None})
    tflops = throughput * flops_per_sample / 1e12 if throughput is not None and flops_per_sample else None
    fields.update({ev.NONFINITE_LOSS: bool(result.nonfinite_steps), ev.NONFINITE_STEPS: len(result.nonfinite_steps),
                   ev.TFLOPS: tflops, ev.PEAK_TFLOPS: peak_tflops_total,
                   ev.MFU: tflops / peak_tflops_total if tflops is not None and peak_tflops_total else None})
    return fields


@dataclass
class Evaluation:
    epoch: int
    step: int
    time: float  # unix wall clock when the evaluation ended
    top1: float  # fractions
    top5: float
    examples: int


def meets(target: tuple[str, float] | None, top1: float, top5: float) -> bool:
    """Whether an evaluation reaches ``target`` (metric, value); never without one."""
    if target is None:
        return False
    metric, value = target
    return (top1 if metric == "top1" else top5) >= value


def accuracy_loop(
    step: Callable[[], Any],
    steps_per_epoch: int,
    epochs: int,
    global_batch: int,
    *,
    rank0: bool,
    log: Log,
    evaluate: Callable[[], tuple[float, float, int]],
    target: tuple[str, float] | None = None,
    agree: Callable[[bool], bool] = lambda stop: stop,
    sync: Callable[[], None] = _noop,
    loss_value: Callable[[Any], float] = float,
    tiny: bool = False,
    heartbeat: Callable[[float], None] | None = None,
    printer: Callable[[str], None] = print,
) -> tuple[LoopResult, list[Evaluation]]:
    """Train ``epochs`` epochs of ``steps_per_epoch`` steps (step events as :func:`timed_loop` logs them, numbered
    across epochs); after each, rank 0 evaluates (``evaluate``: top-1, top-5, samples), prints the torchvision /
    pytorch-examples line `` * Acc@1 97.222 Acc@5 100.000`` and logs an eval event; ``agree(stop)`` (rank 0's
    word broadcast to every rank) ends training at the first evaluation that reaches ``target``."""
    result = LoopResult()
    steps = _Steps(result, global_batch, log, sync, loss_value, tiny, heartbeat)
    evals: list[Evaluation] = []
    prev = 0.0  # when the next step begins: the last step's end, or the evaluation's
    if rank0:
        sync()
        prev = time.time()
        result.times.append(prev)
    k = 0
    for epoch in range(1, epochs + 1):
        for _ in range(steps_per_epoch):
            k += 1
            loss = step()
            if rank0:
                prev = steps.record(k, loss, prev, epoch)
        stop = False
        if rank0:
            top1, top5, n = evaluate()
            now = time.time()
            evals.append(Evaluation(epoch, k, now, top1, top5, n))
            printer(f" * Acc@1 {100 * top1:.3f} Acc@5 {100 * top5:.3f}")
            log(ev.EV_EVAL, **{ev.EPOCH: epoch, ev.STEP: k, ev.TIME: now, ev.TOP1: top1, ev.TOP5: top5,
                               ev.EXAMPLES: n, ev.TINY: tiny})
            stop = meets(target, top1, top5)
            prev = time.time()  # the next step's time starts after the evaluation
        if agree(stop):
            break
    return result, evals
