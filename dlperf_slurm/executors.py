"""Executors: where a campaign's rendered scripts run.

* :class:`SlurmExecutor` submits through **submitit**: the rendered script is the payload
  (``CommandFunction(["bash", script])``, ``use_srun=False`` since our scripts start their own
  ``srun``/``mpirun``), the ``#SBATCH`` resources become submitit parameters (from ``render.directives``),
  and every group of runs with the same resources is **one job array** (``executor.batch()``), chunked
  to the cluster's ``MaxArraySize`` and throttled with the matrix's ``array_throttle`` (``%N``).
* :class:`LocalExecutor` runs the same scripts on this machine, N at a time, in a detached runner
  process so ``submit`` returns at once; it records pid, start, end and exit code of every run.

Both share one template method, :meth:`Executor.submit`: for every group, ``journal.before_submit``
(the intent is recorded before anything is submitted), ``_submit_group`` (one sbatch / one runner), then
``journal.after_submit`` with the job ids, or ``journal.submit_failed`` and a :class:`SubmitAborted`.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Protocol, Sequence

from dlperf_slurm import render
from dlperf_slurm.files import atomic_write
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix import Matrix, Run, time_to_minutes
from dlperf_slurm.scheduler import JobInfo, SchedulerError, Slurm, explain, split_job_id

SUBMITIT_DIR = ".submitit"
LOCAL_DIR = ".local"


def new_token() -> str:
    """A short unique token that names one submission (job name / runner queue file)."""
    return uuid.uuid4().hex[:10]


@dataclass
class Group:
    """Runs submitted together: one job array (Slurm) or one runner (local)."""

    token: str
    name: str  # job name (carries the token, so an interrupted submit can find its jobs)
    runs: list[Run]
    directives: dict[str, Any]  # render.directives without job-name
    extra: tuple[str, ...] = ()  # the matrix's extra_directives
    throttle: int | None = None  # %N of the array
    time_limit: str = "00:30:00"

    @property
    def size(self) -> int:
        return len(self.runs)

    def sbatch_options(self) -> list[str]:
        opts = render.directive_lines({"job-name": self.name, **self.directives}, self.extra)
        if self.size > 1:
            opts.append(f"--array=0-{self.size - 1}%{self.throttle or self.size}")
        return opts


class Journal(Protocol):
    """What the executor tells the campaign manifest around each submission."""

    def before_submit(self, executor: "Executor", group: Group) -> None: ...

    def after_submit(self, executor: "Executor", group: Group, job_ids: list[str]) -> None: ...

    def submit_failed(self, executor: "Executor", group: Group, error: Exception) -> None: ...


class SubmitAborted(UserError):
    """A submission failed half-way; what was submitted before stays recorded."""

    def __init__(self, cause: Exception, submitted_runs: int, remaining_runs: int):
        self.cause, self.submitted_runs, self.remaining_runs = cause, submitted_runs, remaining_runs
        super().__init__(f"{cause} -- submission stopped: {submitted_runs} runs were submitted and are recorded, "
                         f"{remaining_runs} were not (run submit again once the cause is fixed)")


class Executor:
    """Base class: grouping, the submit template method, and the scheduler-facing queries."""

    name = "base"

    def __init__(self, campaign_dir: str | os.PathLike):
        self.campaign_dir = Path(campaign_dir).resolve()
        self.calls: Counter[str] = Counter()  # submissions made (e.g. sbatch calls), for tests and bench

    # -- planning
    def skip_reason(self, matrix: Matrix, run: Run) -> str | None:
        """Why this executor cannot run this run (None if it can)."""
        return None

    def max_group_size(self) -> int:
        return 1 << 30

    def group_name(self, matrix: Matrix, token: str) -> str:
        return f"dlperf.{matrix.name}.{token}"

    def plan(self, matrix: Matrix, runs: Sequence[Run]) -> tuple[list[Group], list[tuple[Run, str]]]:
        """Runs -> groups (same resources, chunked) and the runs this executor must skip, with the reason.

        Within a group the order is repeat-major (r0 of every cell, then r1, ...) so a throttled array
        spreads any drift of the machine over all cells instead of running one cell's repeats back to back."""
        skipped = [(r, why) for r in runs if (why := self.skip_reason(matrix, r))]
        skip_keys = {r.key for r, _ in skipped}
        by_resources: dict[str, list[Run]] = {}
        for r in runs:
            if r.key in skip_keys:
                continue
            d = render.directives(matrix, r)
            d.pop("job-name", None)
            by_resources.setdefault(json.dumps(d, sort_keys=True), []).append(r)
        groups = []
        limit = max(1, self.max_group_size())
        order = {cell: i for i, cell in enumerate(matrix.cells)}
        for key, members in by_resources.items():
            members.sort(key=lambda r: (r.repeat, order[r.cell]))
            for i in range(0, len(members), limit):
                token = new_token()
                groups.append(Group(token, self.group_name(matrix, token), members[i:i + limit], json.loads(key),
                                    tuple(matrix.slurm.extra_directives), matrix.slurm.array_throttle,
                                    matrix.slurm.time))
        return groups, skipped

    def describe(self, group: Group) -> str:
        """One line for --dry-run."""
        return " ".join(["sbatch", *group.sbatch_options()])

    # -- submission (template method)
    def submit(self, groups: Sequence[Group], journal: Journal) -> list[list[str]]:
        done: list[list[str]] = []
        for i, group in enumerate(groups):
            journal.before_submit(self, group)
            try:
                ids = self._submit_group(group)
            except Exception as err:  # noqa: BLE001 - recorded, then re-raised with context
                journal.submit_failed(self, group, err)
                cause = err if isinstance(err, UserError) else SchedulerError(f"{type(err).__name__}: {err}")
                raise SubmitAborted(cause, sum(len(g.runs) for g in groups[:i]),
                                    sum(len(g.runs) for g in groups[i:])) from err
            if len(ids) != group.size:
                raise RuntimeError(f"executor returned {len(ids)} job ids for {group.size} runs")
            journal.after_submit(self, group, ids)
            done.append(ids)
        return done

    def _submit_group(self, group: Group) -> list[str]:
        raise NotImplementedError

    # -- scheduler side
    def find(self, name: str, token: str, since: float | None = None) -> dict[int, str] | None:
        """Jobs of an interrupted submission: {index in group: job id}, {} if none, None if we cannot tell."""
        raise NotImplementedError

    def adopt(self, found: dict[int, str], runs: Sequence[Any]) -> None:
        """Finish an interrupted submission whose jobs were found (``runs``: the group's runs, in order)."""

    def query(self, job_ids: Iterable[str], since: float | None = None) -> dict[str, JobInfo] | None:
        """State of the given jobs (one batched call); None if the scheduler cannot be asked."""
        raise NotImplementedError

    def cancel(self, job_ids: Iterable[str]) -> None:
        raise NotImplementedError

    def notes(self) -> list[str]:
        """What the status display should say about the sources it used."""
        return []


# ================================================================================================ Slurm


def submitit_parameters(group: Group) -> dict[str, Any]:
    """submitit ``SlurmExecutor.update_parameters`` arguments for a group: the same options as the
    rendered ``#SBATCH`` lines (both come from ``render.directives``)."""
    d = dict(group.directives)
    extra: dict[str, Any] = {}
    p: dict[str, Any] = {
        "job_name": group.name,
        "nodes": int(d.pop("nodes", 1)),
        "ntasks_per_node": int(d.pop("ntasks-per-node", 1)),
        "use_srun": False,  # the payload starts its own srun/mpirun/torchrun
        "stderr_to_stdout": True,
        "wckey": None,  # no --wckey=submitit: clusters that track wckeys would reject it
        "array_parallelism": group.throttle or max(1, group.size),
    }
    limit = d.pop("time", group.time_limit)
    p["time"] = max(1, math.ceil(time_to_minutes(limit)))  # submitit wants minutes...
    extra["time"] = limit  # ...the exact Slurm syntax wins (seconds are kept)
    names = {"gpus-per-node": "gpus_per_node", "gres": "gres", "partition": "partition", "account": "account",
             "qos": "qos", "constraint": "constraint", "mem": "mem", "cpus-per-task": "cpus_per_task",
             "exclusive": "exclusive"}
    for k, v in d.items():
        if k in names:
            p[names[k]] = v
        else:
            extra[k] = v
    for opt in group.extra:
        key, _, value = opt.lstrip("-").partition("=")
        extra[key] = value if value else True
    p["additional_parameters"] = extra
    return p


def _submitit_slurm_executor_class():
    """submitit's SlurmExecutor, minus the ``--signal=USR2@90`` it always adds: with ``use_srun=False``
    that signal would reach our launchers' srun steps 90 s before the time limit and turn a TIMEOUT into
    a FAILED. (Imported lazily: submitit is only needed when submitting to Slurm.)"""
    import submitit

    from submitit.core import utils as sutils
    from submitit.slurm.slurm import SlurmJob

    class _Executor(submitit.SlurmExecutor):
        def _make_submission_file_text(self, command: str, uid: str) -> str:
            text = super()._make_submission_file_text(command, uid)
            return "\n".join(line for line in text.splitlines() if not line.startswith("#SBATCH --signal=")) + "\n"

        def _internal_process_submissions(self, delayed_submissions):
            # submitit 1.5's array path, except that the array is submitted by this class (submitit
            # builds a plain SlurmExecutor there, which would bring --signal back)
            if len(delayed_submissions) == 1:
                return super()._internal_process_submissions(delayed_submissions)
            folder = sutils.JobPaths.get_first_id_independent_folder(self.folder)
            folder.mkdir(parents=True, exist_ok=True)
            timeout_min = self.parameters.get("time", 5)
            pickle_paths = []
            for d in delayed_submissions:
                pickle_path = folder / f"{uuid.uuid4().hex}.pkl"
                d.set_timeout(timeout_min, self.max_num_timeout)
                d.dump(pickle_path)
                pickle_paths.append(pickle_path)
            n = len(delayed_submissions)
            array_ex = type(self)(self.folder, self.max_num_timeout)
            array_ex.update_parameters(**self.parameters)
            array_ex.parameters["map_count"] = n
            first_job = array_ex._submit_command(self._submitit_command_str)
            tasks_ids = list(range(first_job.num_tasks))
            jobs = [SlurmJob(folder=self.folder, job_id=f"{first_job.job_id}_{a}", tasks=tasks_ids) for a in range(n)]
            for job, pickle_path in zip(jobs, pickle_paths):
                job.paths.move_temporary_file(pickle_path, "submitted_pickle")
            return jobs

    return _Executor


class SlurmExecutor(Executor):
    name = "slurm"

    def __init__(self, campaign_dir: str | os.PathLike, slurm: Slurm | None = None,
                 max_array_size: int | None = None):
        super().__init__(campaign_dir)
        self.slurm = slurm or Slurm()
        self._max_array = max_array_size

    def max_group_size(self) -> int:
        if self._max_array is None:
            self._max_array = self.slurm.max_array_size()  # read once from `scontrol show config`
        return self._max_array

    def preflight(self) -> None:
        if not Slurm.available():
            raise UserError("sbatch is not on PATH: this machine has no Slurm client (use --executor local)")
        self.slurm.ping()

    def _submit_group(self, group: Group) -> list[str]:
        import submitit
        from submitit.core.utils import FailedJobError

        ex = _submitit_slurm_executor_class()(folder=self.campaign_dir / SUBMITIT_DIR / "%j")
        params = submitit_parameters(group)
        user_hold = "hold" in params["additional_parameters"]
        # Submitted held: submitit moves each task's pickle into place only after sbatch returns, and a
        # task that starts before that fails. Released right after; an interrupted submit leaves the array
        # held, and the next submit repairs the pickles and releases it (see adopt()).
        params["additional_parameters"]["hold"] = True
        ex.update_parameters(**params)
        jobs = []
        self.calls["sbatch"] += 1
        try:
            with ex.batch():
                for run in group.runs:
                    jobs.append(ex.submit(submitit.helpers.CommandFunction(["bash", str(run.script)], verbose=False)))
        except FailedJobError as err:
            raise explain(["sbatch"], str(err)) from None
        except OSError as err:
            raise SchedulerError(f"sbatch could not be run: {err}") from None
        ids = [str(j.job_id) for j in jobs]
        if not user_hold:
            try:
                self.slurm.release(ids[:1])
            except SchedulerError as err:  # the jobs exist: record them; they wait until released
                print(f"dlperf-slurm: warning: {err}; array {ids[0].split('_')[0]} stays held: "
                      f"`scontrol release {ids[0].split('_')[0]}` or run submit again", file=sys.stderr)
        return ids

    def adopt(self, found: dict[int, str], runs: Sequence[Any]) -> None:
        """Put back the task pickles an interrupted submit left unmoved, then release the held array."""
        from submitit.core.utils import DelayedSubmission, JobPaths

        root = self.campaign_dir / SUBMITIT_DIR
        orphans: dict[str, Path] = {}
        for pkl in sorted(root.glob("*.pkl"), key=lambda p: p.stat().st_mtime):
            try:
                command = DelayedSubmission.load(pkl).function.command
            except Exception:  # noqa: BLE001 - not one of ours
                continue
            orphans[str(command[-1])] = pkl
        for i, jid in found.items():
            paths = JobPaths(root / "%j", job_id=jid)
            if i < len(runs) and not paths.submitted_pickle.exists() and str(runs[i].script) in orphans:
                paths.folder.mkdir(parents=True, exist_ok=True)
                os.replace(orphans.pop(str(runs[i].script)), paths.submitted_pickle)
        if found:
            self.slurm.release(sorted({split_job_id(j)[0] for j in found.values()}))

    def find(self, name: str, token: str, since: float | None = None) -> dict[int, str] | None:
        """Jobs named ``name`` (the job name carries the submission token): squeue, else sacct.
        None when neither can tell (sacct missing and the job may have left squeue)."""
        infos = self.slurm.squeue(names=[name])
        if not infos:
            infos = self.slurm.sacct(names=[name], since=since)
            if not infos and not self.slurm.sacct_available():
                return None
        found: dict[int, str] = {}
        for jid in infos:
            base, tasks = split_job_id(jid)
            found[tasks[0] if tasks else 0] = jid
        return found

    def query(self, job_ids: Iterable[str], since: float | None = None) -> dict[str, JobInfo] | None:
        if not Slurm.available():
            return None
        return self.slurm.query(list(job_ids), since)

    def cancel(self, job_ids: Iterable[str]) -> None:
        self.slurm.cancel(job_ids)

    def notes(self) -> list[str]:
        used = "squeue"
        if self.slurm.calls.get("sacct"):
            used += ", sacct" if self.slurm.sacct_available() else ""
        if self.slurm.sacct_problem:
            return [f"scheduler: {used} + exit markers (sacct unavailable: {self.slurm.sacct_problem})"]
        return [f"scheduler: {used} + exit markers"]


# ================================================================================================ local

_LOCAL_ID = re.compile(r"^local-(?P<token>[0-9a-f]+)_(?P<index>\d+)$")


def local_job_id(token: str, index: int) -> str:
    return f"local-{token}_{index}"


def parse_local_id(job_id: str) -> tuple[str, int]:
    m = _LOCAL_ID.match(job_id)
    if not m:
        raise ValueError(f"not a local job id: {job_id!r}")
    return m.group("token"), int(m.group("index"))


def _write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=1))


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def _pid_alive(pid: int | None, token: str | None = None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if token:  # guard against pid reuse: the runner's command line names its queue file
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return True
        if token not in cmdline:
            return False
    try:  # a zombie is not alive
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class LocalExecutor(Executor):
    """Runs rendered scripts on this machine, ``jobs`` at a time, in a detached runner per submission.

    A submission is a queue file ``<campaign>/.local/<token>.json`` (written before the runner starts) that
    the runner keeps up to date: for every run its state, pid, start, end, exit code. Job ids are
    ``local-<token>_<index>``. Cells that need srun (several nodes, the srun launcher, pyxis) are skipped
    with the reason."""

    name = "local"
    START_GRACE_S = 10.0

    def __init__(self, campaign_dir: str | os.PathLike, jobs: int = 1):
        super().__init__(campaign_dir)
        self.jobs = max(1, int(jobs))
        self.state_dir = self.campaign_dir / LOCAL_DIR

    def skip_reason(self, matrix: Matrix, run: Run) -> str | None:
        cell = run.cell
        if cell.nodes > 1:
            return f"needs {cell.nodes} nodes (srun across nodes): the local executor runs on this machine only"
        if cell.launcher == "srun":
            return "the srun launcher needs a Slurm allocation: the local executor cannot run it"
        if matrix.environment.container.type == "pyxis":
            return "pyxis containers start through srun: the local executor cannot run them"
        return None

    def group_name(self, matrix: Matrix, token: str) -> str:
        return f"local.{matrix.name}.{token}"

    def describe(self, group: Group) -> str:
        return f"local runner ({self.jobs} at a time, time limit {group.time_limit} each): {group.size} scripts"

    def queue_file(self, token: str) -> Path:
        return self.state_dir / f"{token}.json"

    def _submit_group(self, group: Group) -> list[str]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        limit_s = time_to_minutes(group.time_limit) * 60
        tasks = [{"run": r.key, "script": str(r.script), "log": str(r.log), "time_limit_s": limit_s,
                  "state": "PENDING"} for r in group.runs]
        _write_json(self.queue_file(group.token), {"token": group.token, "jobs": self.jobs, "created": time.time(),
                                                  "campaign_dir": str(self.campaign_dir), "tasks": tasks})
        self.calls["runner"] += 1
        self._spawn(group.token)
        return [local_job_id(group.token, i) for i in range(group.size)]

    def _spawn(self, token: str) -> int:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
        log = open(self.state_dir / f"{token}.runner.log", "ab")
        try:
            p = subprocess.Popen([sys.executable, "-m", "dlperf_slurm.executors", "local-runner",
                                  str(self.queue_file(token))], stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                 cwd=str(self.campaign_dir), env=env)
        finally:
            log.close()
        return p.pid

    def find(self, name: str, token: str, since: float | None = None) -> dict[int, str] | None:
        q = self.queue_file(token)
        if not q.exists():
            return {}
        state = _read_json(q)
        runner = state.get("runner") or {}
        if not _pid_alive(runner.get("pid"), token) and any(t["state"] in ("PENDING",) for t in state["tasks"]):
            if not runner and time.time() - q.stat().st_mtime < self.START_GRACE_S:
                time.sleep(self.START_GRACE_S)  # a runner being started by the interrupted submit
                state = _read_json(q)
                runner = state.get("runner") or {}
            if not _pid_alive(runner.get("pid"), token):
                self._spawn(token)  # the queue was written but its runner never ran (or died): start it
        return {i: local_job_id(token, i) for i in range(len(state["tasks"]))}

    def query(self, job_ids: Iterable[str], since: float | None = None) -> dict[str, JobInfo] | None:
        by_token: dict[str, list[tuple[int, str]]] = {}
        for jid in job_ids:
            try:
                token, index = parse_local_id(jid)
            except ValueError:
                continue
            by_token.setdefault(token, []).append((index, jid))
        out: dict[str, JobInfo] = {}
        for token, items in by_token.items():
            q = self.queue_file(token)
            if not q.exists():
                continue
            state = _read_json(q)
            runner_alive = _pid_alive((state.get("runner") or {}).get("pid"), token)
            started = bool(state.get("runner"))
            for index, jid in items:
                if index >= len(state["tasks"]):
                    continue
                t = state["tasks"][index]
                st, reason = t["state"], t.get("reason", "")
                if st in ("PENDING", "RUNNING") and not runner_alive:
                    if not started and time.time() - q.stat().st_mtime < self.START_GRACE_S:
                        pass  # runner still starting
                    elif st == "RUNNING" and _pid_alive(t.get("pid")):
                        reason = "its runner died; the script is still running"
                    elif st == "RUNNING":
                        continue  # unknown to the "scheduler": the exit marker decides
                    else:
                        st, reason = "CANCELLED", "the local runner died before starting it"
                rc = t.get("rc")
                out[jid] = JobInfo(jid, st, reason, "" if rc is None else f"{rc}:0", "", "localhost", "local")
        return out

    def cancel(self, job_ids: Iterable[str]) -> None:
        by_token: dict[str, list[int]] = {}
        for jid in job_ids:
            token, index = parse_local_id(jid)
            by_token.setdefault(token, []).append(index)
        for token, indices in by_token.items():
            with open(self.state_dir / f"{token}.cancel", "a") as f:  # the runner reads this every 0.2 s
                f.write("".join(f"{i}\n" for i in indices))
            q = self.queue_file(token)
            if not q.exists():
                continue
            state = _read_json(q)
            if _pid_alive((state.get("runner") or {}).get("pid"), token):
                continue
            for i in indices:  # runner gone: stop orphaned scripts ourselves
                t = state["tasks"][i] if i < len(state["tasks"]) else {}
                if t.get("state") == "RUNNING" and _pid_alive(t.get("pid")):
                    try:
                        os.killpg(t["pid"], signal.SIGTERM)
                    except OSError:
                        pass

    def notes(self) -> list[str]:
        return ["scheduler: local runner state + exit markers"]


# ------------------------------------------------------------------------------------------ the runner

KILL_WAIT_S = 5.0


def _acquire_slot(state_dir: Path, jobs: int, held: dict[int, Any]) -> int | None:
    """One of ``jobs`` machine-wide slots of this campaign (flock), so concurrent runners share the limit."""
    for i in range(jobs):
        if i in held:
            continue
        f = open(state_dir / f"slot-{i}.lock", "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        held[i] = f
        return i
    return None


def run_local_queue(queue_path: str | os.PathLike) -> int:
    """The detached runner: run every PENDING script of the queue file, ``jobs`` at a time."""
    q = Path(queue_path)
    state = _read_json(q)
    token = state["token"]
    state["runner"] = {"pid": os.getpid(), "started": time.time()}
    _write_json(q, state)
    cancel_file = q.with_name(f"{token}.cancel")
    stop = {"flag": False}

    def on_signal(signum, frame):  # cancel everything
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    slots: dict[int, Any] = {}
    running: dict[int, dict[str, Any]] = {}  # index -> {proc, slot, deadline, killed_at, why}
    tasks = state["tasks"]
    out = open(q.with_name(f"{token}.runner.log"), "ab")

    while True:
        changed = False
        cancelled: set[int] = set()
        if cancel_file.exists():
            cancelled = {int(x) for x in cancel_file.read_text().split() if x.strip().isdigit()}
        if stop["flag"]:
            cancelled |= set(range(len(tasks)))
        now = time.time()
        for i, t in enumerate(tasks):
            if t["state"] == "PENDING" and i in cancelled:
                t.update(state="CANCELLED", reason="cancelled before it started", end=now)
                changed = True
        for i, r in running.items():
            why = "cancelled" if i in cancelled else ("time limit" if now > r["deadline"] else None)
            if why and r["killed_at"] is None:
                r["why"], r["killed_at"] = why, now
                try:
                    os.killpg(r["proc"].pid, signal.SIGTERM)  # like Slurm: TERM to every process of the run
                except OSError:
                    pass
            elif r["killed_at"] is not None and now - r["killed_at"] > KILL_WAIT_S:
                try:
                    os.killpg(r["proc"].pid, signal.SIGKILL)
                except OSError:
                    pass
        for i in list(running):
            r = running[i]
            rc = r["proc"].poll()
            if rc is None:
                continue
            t = tasks[i]
            if r["why"] == "cancelled":
                st, reason = "CANCELLED", "cancelled while running"
            elif r["why"] == "time limit":
                st, reason = "TIMEOUT", f"killed at the time limit ({t['time_limit_s']:.0f} s)"
            elif rc == 0:
                st, reason = "COMPLETED", ""
            else:
                st, reason = "FAILED", (f"exit code {rc}" if rc > 0 else f"killed by signal {-rc}")
            t.update(state=st, reason=reason, rc=rc, end=time.time())
            slots.pop(r["slot"]).close()
            del running[i]
            changed = True
        for i, t in enumerate(tasks):
            if t["state"] != "PENDING" or i in running:
                continue
            slot = _acquire_slot(q.parent, int(state.get("jobs", 1)), slots)
            if slot is None:
                break
            env = dict(os.environ, DLPERF_LOCAL_JOB=local_job_id(token, i))
            proc = subprocess.Popen(["bash", t["script"]], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env)
            t.update(state="RUNNING", pid=proc.pid, start=time.time())
            running[i] = {"proc": proc, "slot": slot, "deadline": time.time() + float(t["time_limit_s"]),
                          "killed_at": None, "why": None}
            changed = True
        if changed:
            _write_json(q, state)
        if not running and not any(t["state"] == "PENDING" for t in tasks):
            break
        time.sleep(0.2)
    state["runner"]["ended"] = time.time()
    _write_json(q, state)
    return 0


def _main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "local-runner":
        return run_local_queue(argv[1])
    print("usage: python -m dlperf_slurm.executors local-runner QUEUE.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
