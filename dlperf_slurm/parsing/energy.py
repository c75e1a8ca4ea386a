"""A run's energy from what its log holds (docs/method.md, "Energy"): J per step (all GPUs), W per GPU and samples
(or tokens) per joule, with the basis each came from:

- ``nvml window``: every GPU's NVML energy counter read at the measured window's two ends (the built-in workloads'
  sampler, :mod:`dlperf_slurm.workloads.gpumem`): J per step = the joules of all GPUs / the window's steps, samples
  per joule = the global batch / J per step, W per GPU = the mean over the GPUs of each one's joules / its seconds;
- ``program``: the program's own energy lines over the window (Megatron-LM's ``--log-energy``: ``energy per GPU
  (J/iter/GPU)`` and ``power per GPU (W/GPU)`` of each interval in the window, weighted by its iterations);
- ``nvml program``: the counters read when a wrapped third-party program started and ended
  (:mod:`dlperf_slurm.workloads.memwatch`): the mean W per GPU over the whole program, start-up included, and no
  J per step or samples per joule (the wrapper does not see where the window lies in time).

The first basis a run has is its figure; where the program's own and an NVML reading both exist, their ratio is
kept (``energy_program_over_nvml``: J per step against the window's, or W per GPU against the program's). A figure
from fewer GPUs than the run's devices is no figure (the missing GPUs' share is unknown): its reason says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dlperf_slurm import events as ev
from dlperf_slurm.words import plural

BASIS_WINDOW = "nvml window"
BASIS_PROGRAM = "program"
BASIS_PROGRAM_SPAN = "nvml program"


@dataclass(frozen=True, kw_only=True)
class Energy:
    """A run's energy figures (None where its basis cannot give one) and where they came from."""

    j_per_step: float | None = None  # all GPUs
    w_per_gpu: float | None = None
    per_joule: float | None = None  # samples (tokens, as the suite counts) per joule
    basis: str = ""  # BASIS_*, "" with no figure
    reason: str = ""  # why a figure is missing
    program_over_nvml: float | None = None  # the program's own figure / the NVML reading of the same quantity


@dataclass(frozen=True)
class Counters:
    """One memory event's energy readings: joules and seconds per GPU (``host:index``), and on what span."""

    joules: dict[str, float]
    seconds: dict[str, float]
    basis: str  # BASIS_WINDOW or BASIS_PROGRAM_SPAN
    reason: str


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def counters(mems: Sequence[Mapping[str, Any]]) -> Counters | None:
    """The energy readings of a log's memory events (one per node or one merged), None when none carries any."""
    joules: dict[str, float] = {}
    seconds: dict[str, float] = {}
    bases, reasons = [], []
    for m in mems:
        if m.get(ev.ENERGY_REASON):
            reasons.append(str(m[ev.ENERGY_REASON]))
        j, s = m.get(ev.ENERGY_J), m.get(ev.ENERGY_S)
        if not isinstance(j, Mapping) or not isinstance(s, Mapping):
            continue
        for key, value in j.items():
            jv, sv = _finite(value), _finite(s.get(key))
            if jv is not None and jv >= 0 and sv is not None and sv > 0:
                joules[str(key)], seconds[str(key)] = jv, sv
        bases.append(str(m.get(ev.ENERGY_BASIS) or BASIS_WINDOW))
    if not joules and not reasons:
        return None
    basis = BASIS_WINDOW if bases and all(b == BASIS_WINDOW for b in bases) else BASIS_PROGRAM_SPAN
    return Counters(joules, seconds, basis, "; ".join(dict.fromkeys(reasons)))


def figures(read: Counters | None, own: tuple[float, float] | None, *, devices: int, steps: int | None,
            global_batch: float) -> Energy:
    """The run's :class:`Energy` from its NVML readings (``read``) and the program's own window means (``own``:
    J per iteration per GPU, W per GPU), for a run of ``devices`` GPUs whose window held ``steps`` steps of
    ``global_batch`` samples each."""
    nvml, nvml_reason = _nvml(read, devices, steps, global_batch)
    mine = _own(own, devices, global_batch)
    if nvml is not None and nvml.basis == BASIS_WINDOW:
        ratio = (mine.j_per_step / nvml.j_per_step if mine and mine.j_per_step and nvml.j_per_step else None)
        return Energy(**{**nvml.__dict__, "program_over_nvml": ratio})
    if mine is not None:
        ratio = mine.w_per_gpu / nvml.w_per_gpu if nvml is not None and mine.w_per_gpu and nvml.w_per_gpu else None
        return Energy(**{**mine.__dict__, "program_over_nvml": ratio})
    if nvml is not None:
        return nvml
    return Energy(reason=nvml_reason or "the log reports no energy")


def _nvml(read: Counters | None, devices: int, steps: int | None,
          global_batch: float) -> tuple[Energy | None, str]:
    if read is None:
        return None, ""
    if not read.joules:
        return None, read.reason or "no GPU's energy counter was read"
    if devices > 0 and len(read.joules) < devices:
        return None, (f"energy read on {len(read.joules)} of the run's {plural(devices, 'GPU')}: no figure"
                      + (f" ({read.reason})" if read.reason else ""))
    w_per_gpu = sum(read.joules[k] / read.seconds[k] for k in read.joules) / len(read.joules)
    if read.basis != BASIS_WINDOW:
        return Energy(w_per_gpu=w_per_gpu, basis=read.basis,
                      reason="energy over the whole program (start-up included): W per GPU only"), ""
    if not steps or steps <= 0:
        return Energy(w_per_gpu=w_per_gpu, basis=read.basis, reason="the window was not timed: no J per step"), ""
    j_per_step = sum(read.joules.values()) / steps
    return Energy(j_per_step=j_per_step, w_per_gpu=w_per_gpu, basis=read.basis,
                  per_joule=global_batch / j_per_step if j_per_step > 0 and global_batch > 0 else None), ""


def _own(own: tuple[float, float] | None, devices: int, global_batch: float) -> Energy | None:
    if own is None or devices <= 0:
        return None
    j_gpu_iter, w_gpu = own
    j_per_step = j_gpu_iter * devices
    return Energy(j_per_step=j_per_step if j_per_step > 0 else None, w_per_gpu=w_gpu if w_gpu > 0 else None,
                  per_joule=global_batch / j_per_step if j_per_step > 0 and global_batch > 0 else None,
                  basis=BASIS_PROGRAM)
