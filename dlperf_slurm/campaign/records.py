"""The manifest's typed records: :class:`ManifestRun` (one row of its runs table, as stored),
:class:`RunRecord` (one run as the manifest knows it, paths made absolute and its cell attached), :class:`CampaignInfo`
(a whole campaign, :func:`dlperf_slurm.campaign.manifest.load_campaign`) and :class:`Decision` (a run's status as
decided,
for :meth:`dlperf_slurm.campaign.manifest.Manifest.settle`). Nouns only, like :mod:`dlperf_slurm.model`, the one
package this
module imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from dlperf_slurm.model.cell import Cell
from dlperf_slurm.model.status import Status

if TYPE_CHECKING:
    import sqlite3


@dataclass(frozen=True, kw_only=True)
class ManifestRun:
    """One row of the manifest's ``runs`` table as stored (:meth:`dlperf_slurm.campaign.manifest.Manifest.runs`): paths
    relative to the campaign folder, the status and the log's verdict as the words recorded."""

    key: str
    cell_id: str
    repeat: int
    ord: int  # the run's place in matrix order
    script: str
    log: str
    marker: str
    status: str  # a Status word
    reason: str
    executor: str | None
    submission: str | None  # the token of the submission that last submitted it
    job_id: str | None
    array_job_id: str | None
    array_task: int | None
    attempt: int
    exit_code: int | None
    sched_state: str | None
    nodes: str | None
    created_at: float
    submitted_at: float | None
    ended_at: float | None
    updated_at: float
    cancel_requested_at: float | None
    time_limit_s: float | None
    log_status: str | None  # the log's verdict (a Status word) once a log was read
    slurm_out: str | None
    log_id: str | None
    #: the window it was (last) submitted with (None: a run recorded before windows were kept per run: the
    #: campaign's ``measure``)
    warmup_steps: int | None
    measure_steps: int | None
    slurm_energy_j: float | None = None  # sacct's ConsumedEnergyRaw when the run ended (None: none recorded)

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> ManifestRun:
        """The record of a row selected as :data:`RUN_SELECT` names its columns, as a plain tuple (the fast way:
        no name looked up a field)."""
        return cls(**dict(zip(_RUN_COLUMNS, values)))

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> ManifestRun:
        """The record of a row of the runs table (an ``sqlite3.Row`` with every column), field by column."""
        try:
            return cls(**{name: row[name] for name in _RUN_COLUMNS})
        except IndexError:  # an older schema's row, read without its upgrade (read-only): None for the newer columns
            have = set(row.keys())
            return cls(**{name: row[name] if name in have else None for name in _RUN_COLUMNS})  # type: ignore[arg-type]


_RUN_COLUMNS = tuple(f.name for f in fields(ManifestRun))
#: the runs table's columns in :class:`ManifestRun`'s order, for a SELECT read with :meth:`ManifestRun.from_values`;
#: bare names, never quoted: SQLite reads a double-quoted name no column has as a string, where a bare one is an
#: error ("no such column": an older schema's table, read the slow way)
RUN_SELECT = ", ".join(_RUN_COLUMNS)


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
    window: tuple[int, int] | None = None  # (warm-up, measured steps) it was submitted with; None: the campaign's
    slurm_energy_j: float | None = None  # sacct's ConsumedEnergyRaw of its job (a site's energy plugin)
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
    slurm_energy_j: float | None = None  # sacct's ConsumedEnergyRaw of the job, where the site's plugin counts
