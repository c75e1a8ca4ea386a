"""The scheduler protocol: what a backend (Slurm, the local runner, a PBS or Flux one) must do, and the neutral
description of what a run asks for.

A backend is one module with one :class:`Scheduler` subclass registered by name
(:func:`dlperf_slurm.schedulers.register`). It

- writes the job script's **preamble** from neutral :class:`Resources` (ReFrame's ``emit_preamble``): the
  ``#SBATCH`` lines, or nothing at all for the local runner; what it writes is what it submits;
- **submits** a :class:`Group` (runs with the same resources) as one unit, returning one job id per run;
- **finds** the jobs of a submission an interrupted ``submit`` left unrecorded (by the group's name);
- **queries** job states in one batched call, mapping its own state words to :class:`~dlperf_slurm.model.status.Status`;
- **settles** what its controller says against what the runs' exit markers say (ghost re-runs, holds it placed);
- **cancels**; and knows its job-id grammar, its largest group and its output files.

The submit journal (``submit.py``) drives the order: record intent, write the scripts, ``submit``, record ids.
"""

from __future__ import annotations

import os
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Sequence

from dlperf_slurm.model.cell import Matrix, Run
from dlperf_slurm.model.config import time_to_minutes
from dlperf_slurm.model.result import JobInfo
from dlperf_slurm.words import plural


def new_token() -> str:
    """A short unique token that names one submission (job name, output files, runner queue)."""
    return uuid.uuid4().hex[:10]


def array_spec(n: int, throttle: int | None) -> str:
    """The ``--array`` of ``n`` tasks: ``0-41``, throttled (``0-41%8``) only where the throttle lets fewer than ``n``
    run at once; '' for one task."""
    if n <= 1:
        return ""
    return f"0-{n - 1}" + (f"%{throttle}" if throttle and throttle < n else "")


@dataclass(frozen=True, kw_only=True)
class Resources:
    """What one run asks of a scheduler, in no scheduler's words."""

    job_name: str
    nodes: int
    tasks_per_node: int
    gpus_per_node: int
    gpu_request: str = "gpus-per-node"  # how GPUs are asked for: gpus-per-node, gres or none
    time: str = "00:30:00"  # Slurm time syntax (the matrix's)
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    mem: str | None = None
    cpus_per_task: int | None = None
    exclusive: bool = False
    extra: tuple[str, ...] = ()  # the site's own scheduler options, as written
    exclude: tuple[str, ...] = ()  # nodes not to run on (a retry of a run whose health gate blamed them)
    output: str = ""  # where the scheduler writes the job's own output (kill banners): a path or pattern
    array: str = ""  # array spec of a group (e.g. 0-5%2); empty for one run

    @property
    def time_limit_s(self) -> float:
        return time_to_minutes(self.time) * 60

    def key(self) -> tuple:
        """What runs must share to be submitted as one group (everything but the name, output and array)."""
        gpus = self.gpus_per_node if self.gpu_request != "none" else 0
        return (self.nodes, self.tasks_per_node, gpus, self.gpu_request, self.time, self.partition,
                self.account, self.qos, self.constraint, self.mem, self.cpus_per_task, self.exclusive, self.extra,
                self.exclude)


def resources(matrix: Matrix, run: Run, tasks_per_node: int, *, job_name: str | None = None,
              output: str = "", array: str = "", exclude: tuple[str, ...] = ()) -> Resources:
    """A run's resources from its matrix (``tasks_per_node`` comes from the cell's launcher)."""
    cell, s = run.cell, matrix.slurm
    return Resources(job_name=job_name or f"dlperf.{cell.id}", nodes=cell.nodes, tasks_per_node=tasks_per_node,
                     gpus_per_node=cell.gpus_per_node, gpu_request=s.gpu_request, time=s.time,
                     partition=s.partition, account=s.account, qos=s.qos, constraint=s.constraint, mem=s.mem,
                     cpus_per_task=s.cpus_per_task, exclusive=s.exclusive, extra=tuple(s.extra_directives),
                     output=output, array=array, exclude=exclude)


@dataclass(kw_only=True)
class Group:
    """Runs submitted together: one job array (Slurm), one runner (local)."""

    token: str
    name: str  # the job name; carries the token, so an interrupted submit can find its jobs
    runs: list[Run]
    resources: Resources  # the group's, with its name, output pattern and array spec
    throttle: int | None = None  # at most this many of the group's runs at a time
    outputs: list[str] = field(default_factory=list)  # each run's scheduler output file, in run order

    @property
    def size(self) -> int:
        return len(self.runs)


@dataclass
class Settlement:
    """What :meth:`Scheduler.settle` did, for the status line."""

    cancelled_ghosts: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)


class Scheduler(ABC):
    """A scheduler backend. ``campaign_dir`` holds the campaign's manifest; backends keep their own state
    beneath it."""

    name: ClassVar[str]
    #: what one submission is called in messages ("job array", "local runner")
    group_word: ClassVar[tuple[str, str]] = ("job array", "job arrays")
    call_word: ClassVar[tuple[str, str]] = ("submission", "submissions")
    submit_command: ClassVar[str] = "submit"  # the key of ``calls`` that counts submissions

    def __init__(self, campaign_dir: str | os.PathLike, **options: Any):
        self.campaign_dir = Path(campaign_dir).resolve()
        self.calls: dict[str, int] = {}  # commands run, by name (tests, bench)

    def count(self, what: str) -> None:
        self.calls[what] = self.calls.get(what, 0) + 1

    # -- this machine
    @classmethod
    def available(cls) -> bool:
        """Can this machine submit to this scheduler?"""
        return True

    def preflight(self, matrix: Matrix | None = None) -> None:  # noqa: B027 - an optional hook
        """Raise a UserError when submitting cannot work now (no client, controller down), or cannot work at all
        for this campaign (a request the cluster has no such resource for)."""

    def submit_room(self, matrix: Matrix) -> tuple[int, str] | None:
        """How many more jobs this user may submit now, and the limit's words; None: no limit known."""
        return None

    # -- planning
    def site_lines(self, matrix: Matrix) -> list[str]:
        """What the site leaves out that this scheduler needs (no partition where the cluster has no default, no
        account where it requires one), one line each, for ``plan`` and ``submit --dry-run``."""
        return []

    def skip_reason(self, matrix: Matrix, run: Run) -> str | None:
        """Why this scheduler cannot run this run (None if it can)."""
        return None

    def max_group_size(self) -> int:
        return 1 << 30

    def group_name(self, campaign: str, token: str) -> str:
        return f"dlperf.{campaign}.{token}"

    def output_path(self, token: str, index: int, size: int) -> str:
        """Where run ``index`` of a group of ``size`` finds its scheduler output ('' when there is none)."""
        return ""

    def output_pattern(self, token: str, size: int) -> str:
        """The output directive of a group ('' when the scheduler writes none)."""
        return ""

    def preamble(self, res: Resources) -> list[str]:
        """The job script's first lines after the shebang: the directives this scheduler submits with."""
        return []

    def describe(self, group: Group) -> str:
        """One line for --dry-run."""
        return f"{self.name}: {plural(group.size, 'run')}"

    def group_label(self, job_ids: Sequence[str]) -> str:
        return ", ".join(job_ids[:3]) + (" ..." if len(job_ids) > 3 else "")

    def array_parts(self, job_id: str) -> tuple[str | None, int | None]:
        """``(array id, task index)`` of a job id, ``(None, None)`` when it is no array task."""
        return None, None

    # -- submission
    @abstractmethod
    def submit(self, group: Group) -> list[str]:
        """Submit the group's scripts (already written) as one unit; one job id per run, in run order."""

    def holds(self, res: Resources) -> bool:
        """Does :meth:`submit` place a hold (released by the journal once the ids are recorded)?"""
        return False

    def release(self, job_ids: Iterable[str]) -> None:  # noqa: B027 - only a backend that holds releases
        """Release a hold :meth:`submit` placed."""

    def find(self, group: str, token: str, since: float | None = None) -> dict[int, str] | None:
        """Jobs of an interrupted submission: {index in group: job id}, {} if none, None if this cannot tell."""
        return None

    def adopt(self, found: dict[int, str], token: str, scripts: dict[int, Path]) -> dict[int, str]:
        """Finish an interrupted submission whose jobs were found (``{index in group: job id}``; ``scripts``: the
        run script of each index), e.g. put in place what the job needs and release a hold this tool placed.
        Returns the jobs kept (a job that can never start is cancelled here and left out, to be resubmitted)."""
        return found

    # -- tracking
    @abstractmethod
    def query(self, job_ids: Iterable[str], since: float | None = None) -> dict[str, JobInfo] | None:
        """The state of the given jobs (one batched call); None when the scheduler cannot be asked."""

    def settle(self, ended: dict[str, JobInfo], held: dict[str, JobInfo]) -> Settlement:
        """Bring the controller in line with the runs: ``ended`` are jobs whose exit marker shows they ended
        though the controller still holds them (ghosts of a controller restart): cancel them; ``held`` are
        jobs held by a hold this tool placed and has recorded as released: release them."""
        return Settlement()

    @abstractmethod
    def cancel(self, job_ids: Iterable[str]) -> None:
        """End the given jobs (queued or running)."""

    def notes(self) -> list[str]:
        """What the status display should say about the sources it used."""
        return []

    def auto_note(self) -> str:
        """What ``submit --executor auto`` tells the user when it picked this backend ('' for nothing)."""
        return ""
