"""The Slurm backend: the ``#SBATCH`` preamble, submission through submitit's public API, and tracking through
one batched squeue (+ sacct) per query (:mod:`.slurmctl`).

**What runs is what was rendered.** One function, :func:`options`, turns a run's neutral resources into sbatch
options. The job script's ``#SBATCH`` lines are those options, and the same options are what submitit submits
(named parameters where submitit has them, ``additional_parameters`` for the rest, which submitit applies after
its own defaults): the job name, nodes, tasks, time limit (to the second), GPUs, output file and every site
directive. Two of submitit's defaults are replaced: ``--output`` (its own folder) by the run's output file
under ``<campaign>/.slurm/``, where ``status`` and ``collect`` read the kill banners; and ``--signal=USR2@90``
by an inert ``B:CONT@1``: USR2 would reach every job step 90 s before the limit (our launchers' ``srun``
steps die of it, a TIMEOUT turned FAILED), and submitit's own handler for it requeues the job. And
``--no-requeue`` (unless the matrix's ``slurm.extra`` says ``--requeue``): a run on a node that failed is
recorded NODE_FAIL, for ``submit --retry-failed``, instead of starting again unseen.

**Holds.** Every group is one job array (chunked to MaxArraySize, throttled with ``%N``), submitted held:
submitit moves each task's pickle into place only after sbatch returns, and a task must not start before.
The release is recorded by the journal; a hold this tool placed is released again whenever the controller
shows it (an interrupted submit, or a controller restarted from a state saved before the release).

Only submitit's public API is used (``SlurmExecutor``, ``update_parameters``, ``batch``, ``submit``,
``helpers.CommandFunction``, ``SlurmJob(...).paths``); tested with submitit 1.5.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from dlperf_slurm.errors import SchedulerError, UserError
from dlperf_slurm.model.cell import Matrix, Run
from dlperf_slurm.model.config import time_to_minutes
from dlperf_slurm.model.result import JobInfo
from dlperf_slurm.schedulers import register, slurmlimits
from dlperf_slurm.schedulers.base import Group, Resources, Scheduler, Settlement, array_spec, resources
from dlperf_slurm.schedulers.slurmctl import Slurm, explain, split_job_id
from dlperf_slurm.schedulers.slurmlimits import Limits, asks_gpus, cell_refusal, gpu_gres_refusal

SUBMITIT_DIR = ".submitit"
OUTPUT_DIR = ".slurm"
_PLAIN = re.compile(r"[\w@%+=:,./\[\]-]*", re.ASCII)  # values written as they are in #SBATCH lines
INERT_SIGNAL = "B:CONT@1"  # replaces submitit's USR2@90 (see the module docstring)


def options(res: Resources) -> dict[str, Any]:
    """sbatch options of a run or group (``{option: value}``, True for a bare flag), in script order."""
    d: dict[str, Any] = {"job-name": res.job_name, "nodes": res.nodes, "ntasks-per-node": res.tasks_per_node,
                         "time": res.time}
    if res.gpu_request == "gpus-per-node":
        d["gpus-per-node"] = res.gpus_per_node
    elif res.gpu_request == "gres":
        d["gres"] = f"gpu:{res.gpus_per_node}"
    for key in ("partition", "account", "qos", "constraint", "mem"):
        if getattr(res, key):
            d[key] = getattr(res, key)
    if res.cpus_per_task:
        d["cpus-per-task"] = res.cpus_per_task
    if res.exclude:
        d["exclude"] = ",".join(res.exclude)
    if res.exclusive:
        d["exclusive"] = True
    if res.output:
        d["output"] = res.output
        d["open-mode"] = "append"
    d["signal"] = INERT_SIGNAL
    if not any(x.lstrip("-").split("=")[0] in ("requeue", "no-requeue") for x in res.extra):
        d["no-requeue"] = True  # a node failure is recorded (NODE_FAIL), not silently run again
    if res.array:
        d["array"] = res.array
    for opt in res.extra:
        key, _, value = opt.lstrip("-").partition("=")
        d[key] = value if value else True
    return d


def option_words(d: dict[str, Any]) -> list[str]:
    """``--key=value`` words, a value with a space or a quote quoted as submitit quotes its own (sbatch reads
    quotes in ``#SBATCH`` lines; a campaign folder such as ``/data/my runs`` stays one value)."""
    words = []
    for k, v in d.items():
        if v is True:
            words.append(f"--{k}")
            continue
        s = str(v)
        if "\n" in s or "\r" in s:  # it would end the #SBATCH line and run the rest as a command
            raise UserError(f"sbatch --{k}: {s!r} holds a line break, which no #SBATCH line can carry")
        words.append(f"--{k}={s if _PLAIN.fullmatch(s) else shlex.quote(s)}")
    return words


#: the submission token in the environment of the sbatch a ``submit`` runs (see :func:`wait_for_sbatch`)
SUBMISSION_ENV = "DLPERF_SUBMISSION"
#: how long sbatch may still be retrying after its ``submit`` died (it retries a busy controller for minutes)
SBATCH_WAIT_S = 300.0


def in_flight(token: str) -> list[int]:
    """This user's processes that carry ``token`` as :data:`SUBMISSION_ENV` (an orphaned sbatch; Linux's /proc)."""
    needle = f"{SUBMISSION_ENV}={token}".encode()
    pids = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if int(d.name) != os.getpid() and needle in (d / "environ").read_bytes().split(b"\0"):
                pids.append(int(d.name))
        except (OSError, ValueError):  # another user's process, or one that just ended
            continue
    return pids


def wait_for_sbatch(token: str, limit_s: float = SBATCH_WAIT_S) -> None:
    """Wait until no sbatch of submission ``token`` runs any more: a ``submit`` killed by PID leaves its sbatch
    running, and a job it makes after an interrupted submission was looked up would be submitted twice."""
    deadline = time.time() + limit_s
    told = False
    while pids := in_flight(token):
        if time.time() > deadline:
            raise SchedulerError(f"the sbatch of interrupted submission {token} (pid {pids[0]}) is still running "
                                 f"after {limit_s:.0f} s; run the command again once it has ended")
        if not told:
            print(f"dlperf-slurm: waiting for the sbatch of interrupted submission {token} (pid {pids[0]}) to end",
                  file=sys.stderr, flush=True)
            told = True
        time.sleep(0.1)


# submitit's named parameters for the sbatch options it has a name for
_NAMED = {"job-name": "job_name", "nodes": "nodes", "ntasks-per-node": "ntasks_per_node", "gpus-per-node":
          "gpus_per_node", "gres": "gres", "partition": "partition", "account": "account", "qos": "qos",
          "constraint": "constraint", "mem": "mem", "cpus-per-task": "cpus_per_task", "exclusive": "exclusive",
          "exclude": "exclude"}


def submitit_parameters(res: Resources, size: int, throttle: int | None, hold: bool = True) -> dict[str, Any]:
    """``SlurmExecutor.update_parameters`` arguments that make submitit's batch file carry exactly
    :func:`options` (plus ``--array`` for a group, which submitit writes itself, and ``--hold``)."""
    d = options(res)
    d.pop("array", None)
    p: dict[str, Any] = {"use_srun": False, "stderr_to_stdout": True, "wckey": None,
                         "time": max(1, math.ceil(time_to_minutes(res.time))),  # submitit wants minutes...
                         "array_parallelism": throttle or max(1, size)}
    extra: dict[str, Any] = {"time": res.time}  # ...the exact time limit wins (seconds kept)
    for k, v in d.items():
        if k in _NAMED:
            p[_NAMED[k]] = v
        elif k != "time":
            extra[k.replace("-", "_")] = v  # submitit writes '_' as '-'; same keys as its own, so they replace
    if size > 1:  # submitit's own spec carries a throttle as large as the array (0-41%42): this one says none
        extra["array"] = array_spec(size, throttle)
    if hold:
        extra["hold"] = True
    p["additional_parameters"] = extra
    return p


def _command(script: Path):
    """What each task runs: the rendered script, under bash (the same for submit and for adopt). ``verbose``:
    whatever the script prints before it sends its output to the run's log (the ghost guard's line) streams to
    the task's Slurm output file instead of a buffer submitit drops when the script exits 0."""
    import submitit

    return submitit.helpers.CommandFunction(["bash", str(script)], verbose=True)


@register
class SlurmScheduler(Scheduler):
    name = "slurm"
    group_word = ("job array", "job arrays")
    submit_command = "sbatch"
    call_word = ("sbatch call", "sbatch calls")

    def __init__(self, campaign_dir, *, slurm: Slurm | None = None, max_array_size: int | None = None, **_: Any):
        super().__init__(campaign_dir)
        self.slurm = slurm or Slurm()
        self.limits = Limits(self.slurm)
        self.calls = self.slurm.calls  # one counter: the Slurm commands run
        self._max_array = max_array_size

    @classmethod
    def available(cls) -> bool:
        return Slurm.available()

    def preflight(self, matrix: Matrix | None = None) -> None:
        if not Slurm.available():
            raise UserError("sbatch is not on PATH: this machine has no Slurm client (use --executor local)")
        self.slurm.ping()
        if matrix is not None:
            why = gpu_gres_refusal(self.limits, asks_gpus(matrix))
            if why:
                raise UserError(why)

    def site_lines(self, matrix: Matrix) -> list[str]:
        """What the site leaves out that this cluster needs (a partition, an account), one line each."""
        return slurmlimits.site_lines(self.limits, matrix.slurm)

    def skip_reason(self, matrix: Matrix, run: Run) -> str | None:
        """A run this cluster can never start (its partition's size or MaxTime, its nodes' GPUs, the QOS's GPU
        limits): said per cell before anything is submitted."""
        from dlperf_slurm import launchers

        return cell_refusal(self.limits, resources(matrix, run, launchers.tasks_per_node(run.cell)))

    def submit_room(self, matrix: Matrix) -> tuple[int, str] | None:
        q = self.limits.qos(matrix.slurm.account, matrix.slurm.qos)
        if q is None or q.max_submit_per_user is None:
            return None
        queued = self.slurm.user_jobs(slurmlimits.user())
        if queued is None:
            return None
        return max(0, q.max_submit_per_user - queued), (
            f"QOS {q.name} allows a user {q.max_submit_per_user} submitted jobs at once (MaxSubmitJobsPerUser; "
            f"an array's tasks count one each), {queued} in the queue now")

    def max_group_size(self) -> int:
        if self._max_array is None:
            try:
                self._max_array = self.slurm.max_array_size()  # read once from `scontrol show config`
            except UserError as err:
                print(f"dlperf-slurm: warning: cannot read MaxArraySize ({err}); assuming 1001", file=sys.stderr)
                self._max_array = 1001
        return self._max_array

    # -- the script
    def output_path(self, token: str, index: int, size: int) -> str:
        return str(self.campaign_dir / OUTPUT_DIR / f"{token}_{index}.out")

    def output_pattern(self, token: str, size: int) -> str:
        return str(self.campaign_dir / OUTPUT_DIR / (f"{token}_%a.out" if size > 1 else f"{token}_0.out"))

    def preamble(self, res: Resources) -> list[str]:
        return [f"#SBATCH {w}" for w in option_words(options(res))]

    def describe(self, group: Group) -> str:
        return " ".join(["sbatch", *option_words(options(group.resources))])

    def group_label(self, job_ids) -> str:
        base = job_ids[0].split("_")[0] if job_ids else "?"
        return f"job {base}" if len(job_ids) == 1 and "_" not in job_ids[0] else \
            f"array {base}_[0-{len(job_ids) - 1}]"

    def array_parts(self, job_id: str) -> tuple[str | None, int | None]:
        try:
            base, tasks = split_job_id(job_id)
        except ValueError:
            return None, None
        return (base, tasks[0]) if tasks and len(tasks) == 1 else (None, None)

    # -- submission
    def submit(self, group: Group) -> list[str]:
        import submitit
        from submitit.core.utils import FailedJobError

        (self.campaign_dir / OUTPUT_DIR).mkdir(parents=True, exist_ok=True)
        ex = submitit.SlurmExecutor(folder=self.campaign_dir / SUBMITIT_DIR / "%j")
        ex.update_parameters(**submitit_parameters(group.resources, group.size, group.throttle,
                                                   hold=self.holds(group.resources)))
        jobs = []
        self.count("sbatch")
        os.environ[SUBMISSION_ENV] = group.token  # the sbatch carries it: see in_flight
        try:
            with ex.batch():
                for run in group.runs:
                    jobs.append(ex.submit(_command(run.script)))
        except FailedJobError as err:
            raise explain(["sbatch"], str(err)) from None
        except OSError as err:
            raise SchedulerError(f"sbatch could not be run: {err}") from None
        finally:
            os.environ.pop(SUBMISSION_ENV, None)
        return [str(j.job_id) for j in jobs]

    @staticmethod
    def user_hold(res: Resources) -> bool:
        return any(x.lstrip("-").split("=")[0] in ("hold", "H") for x in res.extra)

    def holds(self, res: Resources) -> bool:
        return not self.user_hold(res)

    def release(self, job_ids: Iterable[str]) -> None:
        """Release a hold this tool placed (one ``scontrol release`` for all)."""
        self.slurm.release(job_ids)

    def find(self, group: str, token: str, since: float | None = None) -> dict[int, str] | None:
        """Jobs named ``group`` (the job name carries the submission token): squeue, else sacct.
        None when neither can tell (sacct missing and the job may have left squeue). An sbatch of the submission
        still running (its ``submit`` was killed while sbatch talked to the controller) is waited for first: the
        controller may hand it a job after it was asked."""
        wait_for_sbatch(token)
        infos = self.slurm.squeue(names=[group])
        if not infos:
            infos = self.slurm.sacct(names=[group], since=since)
            if not infos and not self.slurm.sacct_available():
                return None
        found: dict[int, str] = {}
        for jid in infos:
            _base, tasks = split_job_id(jid)
            found[tasks[0] if tasks else 0] = jid
        return found

    def adopt(self, found: dict[int, str], token: str, scripts: dict[int, Path]) -> dict[int, str]:
        """An interrupted submit's jobs: sbatch accepted the held array, but the submit may have died before
        submitit moved each task's pickle into place. The missing ones are written here, through submitit's
        public ``helpers.DelayedSubmission``, with the same command submit would have given them; then the hold
        is released. A task whose script is unknown cannot start right: it is cancelled, to be resubmitted."""
        import submitit

        keep: dict[int, str] = {}
        for i, jid in found.items():
            pickle = submitit.SlurmJob(self.campaign_dir / SUBMITIT_DIR / "%j", jid).paths.submitted_pickle
            if not pickle.exists() and i in scripts:
                pickle.parent.mkdir(parents=True, exist_ok=True)
                submitit.helpers.DelayedSubmission(_command(scripts[i])).dump(pickle)
            if pickle.exists():
                keep[i] = jid
        lost = [j for i, j in found.items() if i not in keep]
        if lost:
            self.slurm.cancel(lost)
        if keep:
            self.slurm.release_tasks(sorted(keep.values()))  # by task, never the whole array
        return keep

    # -- tracking
    def query(self, job_ids: Iterable[str], since: float | None = None) -> dict[str, JobInfo] | None:
        if not Slurm.available():
            return None
        return self.slurm.query(list(job_ids), since)

    def settle(self, ended: dict[str, JobInfo], held: dict[str, JobInfo]) -> Settlement:
        done = Settlement()
        if ended:
            self.slurm.cancel(sorted(ended))
            done.cancelled_ghosts = sorted(ended)
        if held:
            self.slurm.release_tasks(sorted(held))  # by task: the ended runs' tasks were cancelled above
            done.released = sorted(held)
        return done

    def cancel(self, job_ids: Iterable[str]) -> None:
        self.slurm.cancel(job_ids)

    def notes(self) -> list[str]:
        return self._query_note() + [
            f"node {n} is drained ({why}): a slurmctld restarted from an older saved state handed out again a job id "
            f"this node still held; no job starts there until an administrator resumes it (`scontrol update "
            f"nodename={n} state=resume`, once `squeue -w {n}` shows no job of before the restart); runs are not "
            "lost: `status` again, then `submit` (or `--retry-failed`) runs what did not end"
            for n, why in sorted(self.slurm.duplicate_drains().items())]

    def _query_note(self) -> list[str]:
        used = "squeue"
        if self.slurm.calls.get("sacct"):
            used += ", sacct" if self.slurm.sacct_available() else ""
        if self.slurm.sacct_problem:
            return [f"scheduler: {used} + exit markers (sacct unavailable: {self.slurm.sacct_problem})"]
        return [f"scheduler: {used} + exit markers"]
