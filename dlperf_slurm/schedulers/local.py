"""The local backend: runs a campaign's rendered scripts on this machine, N at a time, in a detached runner
process per submission (:mod:`.local_runner`), so ``submit`` returns at once.

A submission is a queue file ``<campaign>/.local/<token>.json`` (written before the runner starts) that the runner
keeps up to date: for every run its state, pid, start, end, exit code. Job ids are ``local-<token>_<index>``.
Cells that need srun (several nodes, the srun launcher, pyxis) are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from dlperf_slurm import launchers
from dlperf_slurm.disk import atomic_write
from dlperf_slurm.model.cell import Matrix, Run
from dlperf_slurm.model.result import JobInfo
from dlperf_slurm.model.status import Status
from dlperf_slurm.schedulers import register
from dlperf_slurm.schedulers.base import Group, Resources, Scheduler
from dlperf_slurm.words import plural

LOCAL_DIR = ".local"
# the runner's words for a task's state -> run status
_STATES = {"PENDING": Status.PENDING, "RUNNING": Status.RUNNING, "COMPLETED": Status.OK, "FAILED": Status.FAILED,
           "CANCELLED": Status.CANCELLED, "TIMEOUT": Status.TIMEOUT}

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


@register
class LocalScheduler(Scheduler):
    """Runs rendered scripts on this machine, ``jobs`` at a time, in a detached runner per submission.

    A submission is a queue file ``<campaign>/.local/<token>.json`` (written before the runner starts) that
    the runner keeps up to date: for every run its state, pid, start, end, exit code. Job ids are
    ``local-<token>_<index>``. Cells that need srun (several nodes, the srun launcher, pyxis) are skipped
    with the reason."""

    name = "local"
    group_word = ("local runner", "local runners")
    submit_command = "runner"
    call_word = ("local runner", "local runners")
    START_GRACE_S = 10.0

    def __init__(self, campaign_dir: str | os.PathLike, jobs: int = 1, **_: Any):
        super().__init__(campaign_dir)
        self.jobs = max(1, int(jobs))
        self.state_dir = self.campaign_dir / LOCAL_DIR

    def auto_note(self) -> str:
        return f"no sbatch on PATH: running locally (--executor local); {self.jobs} at a time"

    def skip_reason(self, matrix: Matrix, run: Run) -> str | None:
        return launchers.local_skip_reason(run.cell, matrix.environment.container.type)

    def group_name(self, campaign: str, token: str) -> str:
        return f"local.{campaign}.{token}"

    def preamble(self, res: Resources) -> list[str]:
        return [f"# local runner: time limit {res.time} (no scheduler directives)"]

    def describe(self, group: Group) -> str:
        return (f"local runner ({self.jobs} at a time, time limit {group.resources.time} each): "
                + plural(group.size, 'script'))

    def group_label(self, job_ids) -> str:
        return f"local runner {job_ids[0].rsplit('_', 1)[0]}" if job_ids else "local runner"

    def array_parts(self, job_id: str) -> tuple[str | None, int | None]:
        try:
            token, index = parse_local_id(job_id)
        except ValueError:
            return None, None
        return f"local-{token}", index

    def queue_file(self, token: str) -> Path:
        return self.state_dir / f"{token}.json"

    def submit(self, group: Group) -> list[str]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        limit_s = group.resources.time_limit_s
        tasks = [{"run": r.key, "script": str(r.script), "log": str(r.log), "time_limit_s": limit_s,
                  "state": "PENDING"} for r in group.runs]
        _write_json(self.queue_file(group.token), {"token": group.token, "jobs": self.jobs, "created": time.time(),
                                                  "campaign_dir": str(self.campaign_dir), "tasks": tasks})
        self.count("runner")
        self._spawn(group.token)
        return [local_job_id(group.token, i) for i in range(group.size)]

    def _spawn(self, token: str) -> int:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
        log = open(self.state_dir / f"{token}.runner.log", "ab")
        try:
            p = subprocess.Popen([sys.executable, "-m", "dlperf_slurm.schedulers.local_runner",
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
                out[jid] = JobInfo(job_id=jid, status=_STATES.get(st), state=st, reason=reason, exit_code=t.get("rc"),
                                   nodes="localhost", source="local", disk_full=t.get("disk_full") or "")
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
