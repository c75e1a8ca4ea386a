"""The manifest's typed records: :class:`RunRecord` (one run as the manifest knows it), :class:`CampaignInfo`
(a whole campaign, :func:`dlperf_slurm.manifest.load_campaign`) and :class:`Decision` (a run's status as decided,
for :meth:`dlperf_slurm.manifest.Manifest.settle`). Nouns only, like :mod:`dlperf_slurm.model`, the one module this
module imports; :mod:`dlperf_slurm.manifest` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf_slurm.model import Cell, Status


@dataclass(kw_only=True)
class RunRecord:
    """One run as the manifest knows it (paths are absolute)."""

    key: str
    cell_id: str
    repeat: int
    cell: Cell
    status: Status
    reason: str
    executor: str | None
    job_id: str | None  # '123_4' (array task), '123', or 'local-<token>_<i>'
    array_job_id: str | None
    array_task: int | None
    attempt: int  # how many times it was submitted
    exit_code: int | None
    nodes: str | None
    script: Path
    log: Path
    marker: Path
    submitted_at: float | None
    ended_at: float | None
    updated_at: float
    log_status: Status | None = None  # the log's verdict, once a log has been read (status or collect)
    log_id: str | None = None  # the log's identity when that verdict was read (storage.log_identity)
    sched_state: str | None = None  # the scheduler's own last word for the job (e.g. COMPLETED)
    slurm_out: Path | None = None  # the scheduler's own output file for this run (kill banners)
    previous: list[dict[str, Any]] = field(default_factory=list)  # earlier attempts, oldest first


@dataclass(kw_only=True)
class CampaignInfo:
    name: str
    dir: Path
    suite: str  # the suite's name (several: joined by ", ")
    measure: dict[str, int]  # repeats, warmup_steps, measure_steps
    options: dict[str, dict[str, Any]]  # suite name -> its options
    matrix_path: str
    matrix_copy: Path
    time_limit: str
    created_at: float | None
    cells: list[Cell]
    dropped: list[dict[str, Any]]
    runs: list[RunRecord]

    def options_for(self, suite: str) -> dict[str, Any]:
        """The options a suite of the campaign ran with."""
        return dict(self.options.get(suite, {}))


@dataclass(frozen=True, kw_only=True)
class Decision:
    """A run's status as decided from its evidence, for :meth:`Manifest.settle` and :meth:`Manifest.set_verdicts`."""

    key: str
    status: str
    reason: str
    exit_code: int | None
    log_status: str | None = None  # the log's verdict, when the log was read
    log_id: str | None = None  # the log's identity (size, mtime, inode) when it was read
    sched_state: str | None = None
    nodes: str | None = None
    ended_at: float | None = None
