"""The typed rows ``collect`` builds and ``report`` writes: :class:`RunRow` (one run) and :class:`CellRow` (one
cell). A row's fields are its table's columns, in order: the CSV, JSON and markdown writers take the columns from
here (:func:`columns`), so no column list elsewhere can disagree with the rows.

Kept apart from :mod:`dlperf_slurm.model.cell` to keep that module of nouns short; like it, this module imports no
other dlperf_slurm module but ``model``.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from dlperf_slurm.model.status import Status


@dataclass(kw_only=True)
class CellKey:
    """The columns that say which cell a row belongs to: the first columns of both tables."""

    campaign: str
    suite: str
    framework: str
    model: str
    cell_id: str
    shape: str  # DLPerf's device shape, e.g. 2n8g
    nodes: int
    gpus_per_node: int
    devices: int
    batch_size: int  # per device
    global_batch: int
    precision: str
    xla: bool
    launcher: str
    variant: str  # "k=v, ..." of the cell's params, env and launcher_args; "" for none


@dataclass(kw_only=True)
class RunRow(CellKey):
    """One run: its log read by its suite's parser and its status decided (``runparse.parse_run``)."""

    repeat: int
    run: str  # the run key
    job_id: str | None
    hosts: str  # the nodes it ran on, as the job saw them (a Slurm host list, or this machine's name)
    status: Status
    reason: str
    throughput: float | None  # the suite's published flavour: throughput_time or throughput_speed
    throughput_time: float | None
    throughput_speed: float | None
    published: str  # "time" | "speed"
    unit: str  # e.g. samples/s
    latency_ms: float | None
    steps_seen: int
    window_start: int | None
    window_end: int | None
    window_steps: int | None
    mem_peak_mib: float | None
    mem_gpu0_mib: float | None
    mem_allocator_mib: float | None
    mem_reason: str
    gpu_util: float | None
    loss_finite: bool | None
    tiny: bool
    exit_code: int | None
    scheduler_state: str | None
    garbled_lines: int
    log: str
    log_bytes: int | None
    parse_seconds: float
    provenance: dict[str, Any]  # the job event's job_id, nodelist, hostname, gpus, versions, ...
    extra: dict[str, Any]  # what else the parser and the decision said (log_status, flops_per_sample, ...)
    health: str  # the health gate's verdict ("ok, busbw 1.2 GB/s", "failed: ..."); "" when no gate ran
    health_busbw_gbs: float | None  # its all-reduce bus bandwidth (nccl-tests' busbw)
    # energy (parsing.energy), last so the columns read by position keep their place
    energy_j_per_step: float | None = None  # all GPUs
    power_w_per_gpu: float | None = None
    samples_per_joule: float | None = None  # in the unit's samples (tokens) per joule
    energy_basis: str = ""  # "nvml window" | "program" | "nvml program"; "" without a figure
    energy_reason: str = ""  # why the run has no energy figure


@dataclass(kw_only=True)
class CellRow(CellKey):
    """One cell: statistics over its OK runs, its status, flags, speedup and efficiency (``cells.cells_of``)."""

    status: Status
    display: str | None  # what the cell reads without an OK run ("OOM", "pending 3/7"); None with one
    n: int  # runs planned (or found)
    n_ok: int
    median: float | None
    min: float | None
    max: float | None
    mean: float | None
    stdev: float | None
    cv: float | None
    median_time: float | None
    median_speed: float | None
    published: str
    unit: str
    speedup: float | None  # median / median of the baseline cell
    efficiency: float | None  # speedup / devices
    baseline: str | None  # the 1n1g cell's id
    latency_ms: float | None
    mem_peak_mib: float | None
    mem_gpu0_mib: float | None
    mem_allocator_mib: float | None
    mem_reason: str
    gpu_util: float | None
    tflops_per_gpu: float | None
    mfu: float | None
    flags: list[str]
    tiny: bool
    statuses: dict[Status, int]  # runs per status
    reason: str  # the most frequent reason among the failed runs
    # (last, so the columns users' scripts read by position keep their place)
    ci_low: float | None  # the median's distribution-free confidence interval (stats.median_interval)
    ci_high: float | None
    ci_coverage: float | None  # its exact coverage: >= 95 % from 6 OK runs on
    ceiling_tflops: float | None  # the campaign's measured matmul ceiling per device (dlperf_slurm.probes.ceiling)
    mfu_ceiling: float | None  # tflops_per_gpu / ceiling_tflops
    searched: str  # the cell is the largest value a ``search`` found: "max 96 (batch_size, 9 probes)"; else ""
    # energy over the OK runs (parsing.energy): samples (tokens) per joule with its interval, as the throughput's
    samples_per_joule: float | None = None  # median
    samples_per_joule_ci_low: float | None = None
    samples_per_joule_ci_high: float | None = None
    power_w_per_gpu: float | None = None  # median
    energy_j_per_step: float | None = None  # median, all GPUs
    energy_basis: str = ""  # the OK runs' basis ("nvml window", ...; "mixed" where they differ)
    energy_reason: str = ""  # why the cell has no energy figure (its OK runs' most frequent reason)
    layout: str = ""  # its parallel layout as the program was given it (``tp4 pp8 cp1 dp2 GA128``; LLM suites)


def per_joule_unit(unit: str) -> str:
    """The unit a row's energy figure reads in, from its throughput's: samples/s -> samples/J, tokens/s -> tokens/J."""
    return unit[:-2] + "/J" if unit.endswith("/s") else f"{unit} x s/J"


@functools.cache
def columns(cls: type) -> tuple[str, ...]:
    """The columns of a row type: its fields' names, in order."""
    return tuple(f.name for f in dataclasses.fields(cls))


def as_dict(row: Any) -> dict[str, Any]:
    """A row as a dict in column order: ``dataclasses.asdict`` without its deep copy (the writers copy)."""
    cols = columns(type(row))  # type: ignore[arg-type]  # a class is hashable
    d = row.__dict__
    if len(d) == len(cols):  # what __init__ set, every field in field order and nothing else: copied in C
        return dict(d)
    return {name: getattr(row, name) for name in cols}
