"""What is said of one run: by its scheduler (:class:`JobInfo`), to its parser (:class:`ParseContext`) and by
its parser (:class:`RunResult`: the log's verdict and figures)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from dlperf_slurm.model.cell import DEFAULT_MEASURE_STEPS, DEFAULT_WARMUP_STEPS
from dlperf_slurm.model.status import Status


@dataclass(frozen=True, kw_only=True)
class JobInfo:
    """What a scheduler says about one job (or one array task). ``status`` is the backend's mapping of its own
    state word (None: a word the backend does not know, never guessed)."""

    job_id: str  # '123' or '123_4' (Slurm), 'local-<token>_<i>' (local runner)
    status: Status | None
    state: str = ""  # the scheduler's own word, normalized (e.g. CANCELLED)
    reason: str = ""  # squeue's %r, sacct's Reason, "by 0" of 'CANCELLED by 0'
    exit_code: int | None = None
    raw_id: str = ""  # the unique job id of an array task
    nodes: str = ""
    source: str = ""  # squeue | sacct | local | ...
    disk_full: str = ""  # the disk holding the run's log was full while it ran: where, how full (storage.disk_full)
    energy_j: float | None = None  # sacct's ConsumedEnergyRaw: the job's joules, where a site's energy plugin counts


@dataclass(kw_only=True)
class ParseContext:
    """What a parser needs to know about the run whose log it reads."""

    nodes: int
    gpus_per_node: int
    batch_size: int  # per device, as in the matrix
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    measure_steps: int = DEFAULT_MEASURE_STEPS
    precision: str = "fp32"
    options: Mapping[str, Any] = field(default_factory=dict)  # the suite's [options] (e.g. batches_per_iter)
    program_batch: int = 0  # the cell's ``Cell.program_batch`` (0: world size x batch)

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def global_batch(self) -> int:
        return self.program_batch or self.world_size * self.batch_size


@dataclass(kw_only=True)
class RunResult:
    """What one run's log says, per method.md. Figures are None when the log does not give them."""

    status: Status
    reason: str = ""
    throughput: float | None = None  # samples/s, time flavour (primary)
    throughput_speed: float | None = None  # samples/s, speed flavour (mean of printed per-step figures)
    latency_ms: float | None = None  # measured wall time / measured steps
    steps_seen: int = 0
    mem_peak_mib: float | None = None  # max "used" over every GPU of every node (NVML)
    mem_gpu0_mib: float | None = None  # GPU 0 of the first node (DLPerf comparability)
    mem_allocator_mib: float | None = None  # framework allocator peak (torch max_memory_allocated), max over ranks
    mem_reason: str = ""  # why memory is missing (e.g. CPU run)
    gpu_util: float | None = None
    energy_j_per_step: float | None = None  # all GPUs (parsing.energy)
    power_w_per_gpu: float | None = None
    samples_per_joule: float | None = None  # samples (tokens) per joule: the global batch / J per step
    energy_basis: str = ""  # "nvml window" | "program" | "nvml program"; "" without a figure
    energy_reason: str = ""  # why an energy figure is missing
    loss_finite: bool | None = None
    tiny: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # what else a suite's parser says (flops_per_sample, ...)
    # what every log may hold besides the figures (parsing.finish) ...
    window: dict[str, Any] | None = None  # the measured window: start, end, steps, seconds, speed_points
    job: dict[str, Any] | None = None  # the :::DLPERF job event: the run's provenance
    health: dict[str, Any] | None = None  # the health gate's verdict, as the log reports it
    # ... and what deciding the run's status adds (outcome.apply, runparse)
    exit_code: int | None = None
    log_status: Status | None = None  # the log's own verdict, before the decision
    scheduler_state: str | None = None  # the status the manifest recorded
    manifest_reason: str | None = None  # the manifest's reason, where the decision says another
