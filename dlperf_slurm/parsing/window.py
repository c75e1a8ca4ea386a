"""The measurement window of method.md (skip ``warmup`` steps, time the next ``measure``) and :func:`finish`: a
run's :class:`~dlperf_slurm.model.result.RunResult` and its *log verdict* from the log alone. The run's final status,
which also weighs the scheduler's state and the exit marker, is decided in one place:
:mod:`dlperf_slurm.outcome.decision`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dlperf_slurm import events as ev
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing import energy as _energy
from dlperf_slurm.parsing import lines as _lines
from dlperf_slurm.parsing.lines import Facts, _clip, finite, to_float

# ------------------------------------------------------------------------------------------------ window


@dataclass(kw_only=True)
class WindowFigures:
    start: int  # the window's first boundary: end of this step (or start of training when 0)
    end: int
    seconds: float
    throughput: float  # time flavour
    latency_ms: float
    speed: float | None  # mean of the printed per-step (or per-interval) throughputs in (start, end]
    speed_points: int

    @property
    def steps(self) -> int:
        return self.end - self.start


class Window:
    """Where a run's steps fall relative to the window, kept in O(measure) memory.

    Feed every logged step in log order with :meth:`add`. A step's ``time`` is the wall time at its end; a line
    that also says how long the steps since ``span_from`` took (``span_seconds``) lets the window's start be
    recovered when the line for the boundary step itself is missing (warm-up 0, a coarse log, a garbled line).

    A timed step below the previous timed one, at a later time, starts another attempt (a restart in the same
    log: torchrun's restarts, a requeued job's appended output): the window is timed within one attempt, the
    first that ran through it, never across the gap between two. (A line merely out of place goes back in time
    too: no restart.)
    """

    COVERAGE = 0.9  # a window with fewer measured steps than this fraction of ``measure`` is not a measurement

    def __init__(self, warmup: int, measure: int):
        self.warmup = max(0, int(warmup))
        self.measure = max(1, int(measure))
        self.end_step = self.warmup + self.measure
        self.max_step = 0
        self.points = 0  # step lines seen
        self._start: tuple[int, float] | None = None  # first logged step >= warmup, with its time
        self._derived: tuple[int, float] | None = None  # start recovered from a span, (step, time)
        self._last: tuple[int, float] | None = None  # last logged step <= end, with its time
        self._speeds: dict[int, tuple[int, float]] = {}  # step -> (span_from, speed) for steps in (warmup, end]
        self.nonfinite: tuple[int, float] | None = None  # first (step, loss) not finite
        self.last_loss: float | None = None
        self.out_of_order = 0
        self.restarts = 0  # timed steps below the previous timed step: attempts after the first
        self._prev_timed: tuple[int, float] | None = None  # the last timed step, with its time
        self._attempt_max = 0  # the highest timed step of the current attempt
        self._kept = False  # an earlier attempt ran through the window: later attempts are not measured

    def add(self, step: int, time: float | None = None, *, speed: float | None = None, loss: float | None = None,
            span_from: int | None = None, span_seconds: float | None = None) -> None:
        self.points += 1
        if _lines.TRACE is not None:  # collect --explain
            _lines.TRACE.append((step, time, speed))
        if step < self.max_step:
            self.out_of_order += 1
        self.max_step = max(self.max_step, step)
        if loss is not None:
            self.last_loss = loss
            if not math.isfinite(loss) and self.nonfinite is None:
                self.nonfinite = (step, loss)
        if time is None or not math.isfinite(time):
            return
        if self._prev_timed is not None and step < self._prev_timed[0] and time >= self._prev_timed[1]:
            self.restarts += 1
            if not self._kept:
                if self._attempt_max >= self.end_step:
                    self._kept = True
                else:  # the attempt stopped inside the window: time the window in a later one
                    self._start = self._derived = self._last = None
                    self._speeds.clear()
                    self._attempt_max = 0
        self._prev_timed = (step, time)
        if self._kept:
            return
        self._attempt_max = max(self._attempt_max, step)
        if step >= self.warmup and self._start is None:
            self._start = (step, time)
        if step <= self.end_step and (self._last is None or step > self._last[0]):
            self._last = (step, time)
        if (span_from is not None and span_seconds is not None and finite(span_seconds) and span_seconds >= 0
                and span_from >= self.warmup and self._derived is None and span_from < step):
            self._derived = (span_from, time - span_seconds)
        if speed is not None and self.warmup < step <= self.end_step and step not in self._speeds:
            self._speeds[step] = (span_from if span_from is not None else step - 1, speed)

    @property
    def reached(self) -> bool:
        """The run went at least to the end of the window."""
        return self.max_step >= self.end_step

    def figures(self, global_batch: float) -> WindowFigures | None:
        """The window's throughput and latency, or None when the log does not cover it (see COVERAGE)."""
        start = self._start
        if self._derived is not None and (start is None or self._derived[0] < start[0]):
            start = self._derived
        last = self._last
        if start is None or last is None or last[0] <= start[0]:
            return None
        steps = last[0] - start[0]
        seconds = last[1] - start[1]
        if steps < self.COVERAGE * self.measure or not (seconds > 0) or not math.isfinite(seconds):
            return None
        speeds = [v for s, (f, v) in self._speeds.items() if f >= start[0] and s <= last[0] and finite(v)]
        return WindowFigures(start=start[0], end=last[0], seconds=seconds, throughput=global_batch * steps / seconds,
                             latency_ms=1000.0 * seconds / steps,
                             speed=sum(speeds) / len(speeds) if speeds else None, speed_points=len(speeds))

    def describe(self) -> str:
        """What the log covers, for a reason text."""
        s = self._start
        d = self._derived
        first = min(x[0] for x in (s, d) if x) if (s or d) else None
        return (f"logged steps reach {self.max_step}; window {self.warmup}->{self.end_step}; first timed step at or "
                f"after the warm-up: {first if first is not None else 'none'}; last timed step in the window: "
                f"{self._last[0] if self._last else 'none'}"
                + (f"; {self.restart_note()}" if self.restarts else ""))

    def restart_note(self) -> str:
        """What a run says of its restarts (its reason, and why a window was not timed)."""
        return (f"the step counter went back {self.restarts} time(s) (a restart): the window is timed within one "
                "attempt")


# ------------------------------------------------------------------------------------------------- finish


def _memory_fields(mems: Sequence[Mapping[str, Any]], host: Any = None) -> dict[str, Any]:
    """RunResult memory fields from the log's ``:::DLPERF`` memory events: one, or one per node where each node's
    sampler reports its own GPUs (``workloads.memwatch``). The peaks are the largest over every event (every GPU
    of every node), GPU 0 the batch host's (``host``, rank 0's node) else the first event's, the utilization
    the mean over the events."""
    out: dict[str, Any] = {"mem_peak_mib": None, "mem_gpu0_mib": None, "mem_allocator_mib": None, "gpu_util": None,
                           "mem_reason": ""}
    if not mems:
        return out

    def peak(obj: Any) -> float | None:
        if isinstance(obj, Mapping):
            vals = [v for v in (to_float(x) for x in obj.values()) if v is not None and math.isfinite(v)]
            return max(vals) if vals else None
        v = to_float(obj)
        return v if v is not None and math.isfinite(v) else None

    def each(key: str) -> list[float]:
        return [v for v in (peak(m.get(key)) for m in mems) if v is not None]

    def on_host(m: Mapping[str, Any]) -> bool:
        peaks = m.get(ev.NVML_PEAK_USED_MIB)
        return host is not None and isinstance(peaks, Mapping) and any(
            str(k).rpartition(":")[0] == str(host) for k in peaks)

    out["mem_peak_mib"] = max(each(ev.NVML_PEAK_USED_MIB), default=None)
    gpu0 = [(not on_host(m), i, v) for i, m in enumerate(mems) if (v := peak(m.get(ev.NVML_GPU0_MIB))) is not None]
    out["mem_gpu0_mib"] = min(gpu0)[2] if gpu0 else None
    out["mem_allocator_mib"] = max(each(ev.MAX_ALLOCATED_MIB), default=None)
    utils = each(ev.GPU_UTIL_MEAN)
    out["gpu_util"] = sum(utils) / len(utils) if utils else None
    out["mem_reason"] = "; ".join(dict.fromkeys(str(m[ev.REASON]) for m in mems if m.get(ev.REASON)))
    reserved = max(each(ev.MAX_RESERVED_MIB), default=None)
    if reserved is not None:
        out["_reserved"] = reserved
    return out


def _why(facts: Facts) -> str:
    for error in reversed(facts.errors):
        msg = error.get(ev.MESSAGE)
        if msg:
            return f"{error.get(ev.KIND, 'error')}: {_clip(str(msg))}"
    return facts.last_exception or facts.last_error or ""


def finish(window: Window, facts: Facts, ctx: ParseContext, *, global_batch: float | None = None,
           speed_scale: float = 1.0, tiny: bool = False, no_memory_reason: str = "",
           figures: WindowFigures | None = None, complete: bool | None = None,
           extra: dict[str, Any] | None = None, own_energy: tuple[float, float] | None = None) -> RunResult:
    """The run's result and status from its log alone (method.md, "A run's status").

    Order: OOM text, then a Slurm kill banner, then no step at all (LAUNCH_FAILED), a non-finite loss (NONFINITE),
    fewer steps than the window (INCOMPLETE), a window the log does not cover (UNMEASURED), else OK.
    ``figures``/``complete`` let a suite that measures itself (tf_cnn, Horovod) bypass the window arithmetic;
    ``own_energy``: the program's own J per iteration per GPU and W per GPU over the window, where it prints them
    (:mod:`dlperf_slurm.parsing.energy`).
    """
    gb = float(global_batch if global_batch else ctx.global_batch)
    fig = figures if figures is not None else window.figures(gb)
    reached = window.reached if complete is None else complete
    res = _result(window, facts, fig, dict(extra or {}), tiny=tiny, no_memory_reason=no_memory_reason,
                  speed_scale=speed_scale)
    if facts.memories or own_energy is not None:
        _set_energy(res, _energy.figures(_energy.counters(facts.memories), own_energy, devices=ctx.world_size,
                                         steps=fig.steps if fig is not None else None, global_batch=gb))
    _verdict(res, window, facts, fig, reached)
    if res.status not in (Status.OK, Status.NONFINITE):
        # only an OK run's figures are results; a NONFINITE run keeps them as evidence (method.md)
        if res.status != Status.OOM or not reached:
            res.throughput = res.throughput_speed = res.latency_ms = None
            res.energy_j_per_step = res.samples_per_joule = None
    return res


def _set_energy(res: RunResult, en: _energy.Energy) -> None:
    res.energy_j_per_step, res.power_w_per_gpu, res.samples_per_joule = en.j_per_step, en.w_per_gpu, en.per_joule
    res.energy_basis, res.energy_reason = en.basis, en.reason
    if en.program_over_nvml is not None:
        res.extra["energy_program_over_nvml"] = round(en.program_over_nvml, 4)


def _result(window: Window, facts: Facts, fig: WindowFigures | None, x: dict[str, Any], *, tiny: bool,
            no_memory_reason: str, speed_scale: float) -> RunResult:
    """The run's figures, memory and what the log says besides (``x``, the result's extra), status OK so far."""
    if facts.garbled:
        x["garbled_lines"] = facts.garbled
    if facts.ranks:
        x["ranks_seen"] = len(facts.ranks)
    if window.out_of_order:
        x["steps_out_of_order"] = window.out_of_order
    if window.restarts:
        x["restarts"] = window.restarts
    mem = _memory_fields(facts.memories, (facts.job or {}).get(ev.HOSTNAME))
    reserved = mem.pop("_reserved", None)
    if reserved is not None:
        x["mem_reserved_mib"] = reserved
    if not mem["mem_reason"] and mem["mem_peak_mib"] is None:
        mem["mem_reason"] = no_memory_reason or "the log reports no GPU memory"
    res = RunResult(status=Status.OK, steps_seen=window.max_step, tiny=tiny,
                    loss_finite=None if window.last_loss is None and window.nonfinite is None
                    else window.nonfinite is None, extra=x, health=facts.health or None,
                    job={**(facts.job or {}), **({ev.PER_NODE: facts.nodes} if facts.nodes else {})} or None,
                    **mem)
    if fig is not None:
        res.throughput = fig.throughput
        res.latency_ms = fig.latency_ms
        res.throughput_speed = fig.speed * speed_scale if fig.speed is not None else None
        res.window = {"start": fig.start, "end": fig.end, "steps": fig.steps, "seconds": fig.seconds,
                      "speed_points": fig.speed_points}
    return res


def _verdict(res: RunResult, window: Window, facts: Facts, fig: WindowFigures | None, reached: bool) -> None:
    """The log verdict: ``res``'s status and reason, in :func:`finish`'s order."""
    x = res.extra
    where = f"at step {window.max_step} of {window.end_step}"
    why = _why(facts)
    if facts.oom is not None:
        rank = f" (rank {facts.oom_rank})" if facts.oom_rank is not None else ""
        res.status, res.reason = Status.OOM, f"out of memory {where}{rank}: {facts.oom}"
    elif facts.slurm is not None:
        res.status, res.reason = facts.slurm, f"Slurm ended the step {where}: {facts.slurm_line}"
    elif window.points == 0 and fig is None:
        res.status = Status.LAUNCH_FAILED
        res.reason = "no training step in the log" + (f"; last error: {why}" if why else "")
        if facts.lines == 0:
            res.reason = "empty log: no training step"
        setup = next((e for e in facts.errors if e.get(ev.KIND) == ev.KIND_SETUP), None)
        if setup is not None:  # the job script's set-up failed: that step is the reason
            res.reason = _clip(str(setup.get(ev.MESSAGE) or "set-up failed"))
    elif window.nonfinite is not None:
        step, loss = window.nonfinite
        res.status, res.reason = Status.NONFINITE, (f"loss is {loss} at step {step}: a throughput with a " \
                                                   "non-finite loss is not a result")
    elif not reached:
        res.status = Status.INCOMPLETE
        res.reason = f"the log stops {where}" + (f"; last error: {why}" if why else "")
        x["window_needs"] = window.end_step  # what a run that ended well falls short of (outcome says so)
    elif fig is None:
        res.status = Status.UNMEASURED
        res.reason = f"the log does not time the window: {window.describe()}"
    else:
        res.reason = ""
        if fig.steps != window.measure:
            res.reason = f"measured steps {fig.start}->{fig.end} ({fig.steps} of {window.measure}): " \
                         "the log times no step nearer the window's ends"
        if window.restarts:
            res.reason = "; ".join(x for x in (res.reason, window.restart_note()) if x)
