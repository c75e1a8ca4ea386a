"""The timed training loop and its summary, independent of torch so it can be tested with a fake step."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

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
) -> LoopResult:
    """Run ``step()`` ``total_steps`` times. On rank 0, after each step: ``sync()``, take ``time.time()``, read the
    loss and log a step event. A non-finite loss is logged once as an error event and training goes on, so the
    window is still timed; the summary then says ``nonfinite_loss: true``."""
    result = LoopResult()
    if warmup_steps == 0:
        on_window_start()
    if rank0:
        sync()
        result.times.append(time.time())
    for k in range(1, total_steps + 1):
        loss = step()
        if rank0:
            sync()
            now = time.time()
            value = loss_value(loss)
            step_time = now - result.times[-1]
            result.times.append(now)
            result.losses.append(value)
            log("step", step=k, time=now, samples=global_batch, loss=value, step_time=step_time,
                throughput=global_batch / step_time if step_time > 0 else None, tiny=tiny)
            if not math.isfinite(value):
                if not result.nonfinite_steps:
                    log("error", kind="nonfinite_loss", step=k, loss=value, tiny=tiny,
                        message="loss is not finite; training continues, the run is NONFINITE")
                result.nonfinite_steps.append(k)
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
    fields: dict[str, Any] = {"steps": result.steps, "warmup_steps": warmup_steps, "measure_steps": measure_steps}
    if measure_steps > 0 and len(t) > end and t[end] > t[warmup_steps]:
        elapsed = t[end] - t[warmup_steps]
        throughput = global_batch * measure_steps / elapsed
        speeds = [global_batch / (t[k] - t[k - 1]) for k in range(warmup_steps + 1, end + 1) if t[k] > t[k - 1]]
        fields.update(throughput=throughput, latency_ms=1000.0 * elapsed / measure_steps,
                      throughput_mean=statistics.fmean(speeds) if speeds else None, measured_seconds=elapsed)
    else:
        fields.update(throughput=None, latency_ms=None, throughput_mean=None, measured_seconds=None)
    tflops = (fields["throughput"] * flops_per_sample / 1e12
              if fields["throughput"] is not None and flops_per_sample else None)
    fields.update(nonfinite_loss=bool(result.nonfinite_steps), nonfinite_steps=len(result.nonfinite_steps),
                  tflops=tflops, peak_tflops=peak_tflops_total,
                  mfu=tflops / peak_tflops_total if tflops is not None and peak_tflops_total else None)
    return fields
