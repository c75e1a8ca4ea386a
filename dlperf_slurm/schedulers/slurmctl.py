"""The Slurm client (used by the Slurm backend, :mod:`dlperf_slurm.schedulers.slurm`): squeue / sacct / scontrol /
scancel, batched, parsed, mapped to run statuses.

Every query is one command for all the jobs asked about (never one per job). ``sacct`` is optional: many
clusters lack slurmdbd or restrict it, so :meth:`Slurm.query` asks ``squeue -t all`` first (which keeps
finished jobs for ``MinJobAge`` seconds with their final state) and ``sacct`` only for what squeue no longer
knows, when sacct works. ``DLPERF_SLURM_NO_SACCT=1`` makes this module behave as if sacct were missing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from typing import Iterable, Sequence

from dlperf_slurm.errors import ControllerUnreachable, SchedulerError, SubmissionRefused
from dlperf_slurm.model.result import JobInfo
from dlperf_slurm.model.status import Status

# ------------------------------------------------------------------------------------------ errors

_UNREACHABLE = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Connection refused|Zero Bytes were transmitted"
    r"|Unable to establish controller machine|Could not establish a configuration source|"
    r"Communication connection failure|Unable to resolve", re.I)
_LIMIT = re.compile(r"MaxSubmit|submit limit|job violates accounting/QOS policy|QOSMax|AssocMax|"
                    r"MaxJobCount|Slurm temporarily unable to accept job|too many jobs|MaxArraySize|array size", re.I)


def explain(command: Sequence[str], stderr: str, rc: int | None = None) -> SchedulerError:
    """A SchedulerError whose message says what went wrong in plain words."""
    tool = os.path.basename(command[0]) if command else "slurm"
    text = " ".join(line.strip() for line in (stderr or "").strip().splitlines() if line.strip()) or f"exit status {rc}"
    if _UNREACHABLE.search(text):
        return ControllerUnreachable(f"the Slurm controller is unreachable ({tool}: {text}); "
                                     "check that slurmctld is up (`scontrol ping`) and SLURM_CONF", command, stderr)
    if tool == "sbatch":
        if re.search(r"invalid partition", text, re.I):
            cause = "the partition does not exist or is not usable by you"
        elif re.search(r"account|association", text, re.I) and not _LIMIT.search(text):
            cause = "the account (or your association with it) is not valid"
        elif re.search(r"qos", text, re.I) and not _LIMIT.search(text):
            cause = "the QOS is not valid for you"
        elif _LIMIT.search(text):
            cause = "a cluster submission limit was hit"
        elif re.search(r"Invalid generic resource", text, re.I):
            cause = ("no node has the GPUs asked for (a CPU-only cluster? set gpu_request = \"none\" under [slurm] "
                     "in your site file)")
        elif re.search(r"Requested node configuration is not available|More processors requested|"
                       r"memory specification|Invalid generic resource|gres", text, re.I):
            cause = "no node can satisfy the requested resources"
        elif re.search(r"time limit", text, re.I):
            cause = "the time limit is above the partition's"
        else:
            cause = "sbatch refused the job"
        return SubmissionRefused(f"{cause} ({tool}: {text})", command, stderr)
    return SchedulerError(f"{tool} failed: {text}", command, stderr)


# ------------------------------------------------------------------------------------------ job ids

_JOB_ID = re.compile(r"^(?P<base>\d+)(?:\+(?P<het>\d+))?(?:_(?:(?P<task>\d+)|\[(?P<range>[^\]]*)\]))?$")


def split_job_id(job_id: str) -> tuple[str, list[int] | None]:
    """``123`` -> ('123', None); ``123_4`` -> ('123', [4]); ``123_[1-6%2]`` / ``123_[1,3-4]`` -> ('123', [..]).

    Raises ValueError on anything else (never guesses)."""
    m = _JOB_ID.match(job_id.strip())
    if not m:
        raise ValueError(f"not a Slurm job id: {job_id!r}")
    if m.group("task") is not None:
        return m.group("base"), [int(m.group("task"))]
    if m.group("range") is not None:
        spec = m.group("range").split("%", 1)[0]
        tasks: list[int] = []
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                lo, hi = part.split("-", 1)
                step = 1
                if ":" in hi:  # 1-10:2
                    hi, s = hi.split(":", 1)
                    step = int(s)
                tasks.extend(range(int(lo), int(hi) + 1, step))
            else:
                tasks.append(int(part))
        return m.group("base"), tasks
    return m.group("base"), None


def expand_job_id(job_id: str) -> list[str]:
    """Every concrete id a (possibly ranged) id stands for: ``7_[0-2%1]`` -> ['7_0', '7_1', '7_2']."""
    base, tasks = split_job_id(job_id)
    return [base] if tasks is None else [f"{base}_{t}" for t in tasks]


def base_id(job_id: str) -> str:
    return split_job_id(job_id)[0]


# ------------------------------------------------------------------------------------------ states

# Slurm job states (long and compact forms) -> run status
_STATE_MAP = {
    "PENDING": Status.PENDING, "PD": Status.PENDING, "CONFIGURING": Status.PENDING, "CF": Status.PENDING,
    "REQUEUE_HOLD": Status.PENDING, "RH": Status.PENDING, "REQUEUE_FED": Status.PENDING, "RF": Status.PENDING,
    "RESV_DEL_HOLD": Status.PENDING, "RD": Status.PENDING,
    "RUNNING": Status.RUNNING, "R": Status.RUNNING, "COMPLETING": Status.RUNNING, "CG": Status.RUNNING,
    "SUSPENDED": Status.RUNNING, "S": Status.RUNNING, "STOPPED": Status.RUNNING, "ST": Status.RUNNING,
    "SIGNALING": Status.RUNNING, "SI": Status.RUNNING, "STAGE_OUT": Status.RUNNING, "SO": Status.RUNNING,
    "RESIZING": Status.RUNNING, "RS": Status.RUNNING, "UPDATE_DB": Status.RUNNING,
    "REQUEUED": Status.REQUEUED, "RQ": Status.REQUEUED,
    "COMPLETED": Status.OK, "CD": Status.OK,
    "FAILED": Status.FAILED, "F": Status.FAILED, "SPECIAL_EXIT": Status.FAILED, "SE": Status.FAILED,
    "CANCELLED": Status.CANCELLED, "CA": Status.CANCELLED, "REVOKED": Status.CANCELLED, "RV": Status.CANCELLED,
    "TIMEOUT": Status.TIMEOUT, "TO": Status.TIMEOUT, "DEADLINE": Status.TIMEOUT, "DL": Status.TIMEOUT,
    "OUT_OF_MEMORY": Status.OOM, "OOM": Status.OOM,
    "NODE_FAIL": Status.NODE_FAIL, "NF": Status.NODE_FAIL, "BOOT_FAIL": Status.NODE_FAIL, "BF": Status.NODE_FAIL,
    "PREEMPTED": Status.PREEMPTED, "PR": Status.PREEMPTED,
}


def normalize_state(raw: str) -> str:
    """``CANCELLED by 0`` -> CANCELLED, ``CANCELLED+`` -> CANCELLED, ``running`` -> RUNNING."""
    s = (raw or "").strip().split(" ", 1)[0].rstrip("+").upper()
    return s


def map_state(raw: str) -> Status | None:
    """Run status for a Slurm state, or None for a state we do not know (never guessed)."""
    return _STATE_MAP.get(normalize_state(raw))


# ------------------------------------------------------------------------------------------ running commands


def run(argv: Sequence[str], timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a Slurm command; missing command or timeout become SchedulerError (rc is left to the caller)."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise SchedulerError(f"{argv[0]}: command not found (is Slurm installed and on PATH?)", argv) from None
    except subprocess.TimeoutExpired:
        raise ControllerUnreachable(f"{argv[0]} did not answer within {timeout:.0f} s "
                                    "(the Slurm controller is unreachable or overloaded)", argv) from None


_ACTIVE = (Status.PENDING, Status.RUNNING, Status.REQUEUED)


def sacct_disabled_by_env() -> bool:
    return os.environ.get("DLPERF_SLURM_NO_SACCT", "").strip() not in ("", "0", "false", "no")


class Slurm:
    """Batched access to one Slurm cluster. ``calls`` counts the commands run, by name (tests, bench)."""

    SQUEUE_FORMAT = "%i|%A|%j|%T|%r|%N"

    def __init__(self, use_sacct: bool | None = None, timeout: float = 60):
        self.timeout = timeout
        self.calls: Counter[str] = Counter()
        self._use_sacct = False if sacct_disabled_by_env() else use_sacct  # None: find out on first use
        self.sacct_problem = "disabled by DLPERF_SLURM_NO_SACCT" if sacct_disabled_by_env() else ""
        self._config: dict[str, str] | None = None

    @staticmethod
    def available() -> bool:
        """Is there a Slurm client on PATH?"""
        return shutil.which("sbatch") is not None

    def _run(self, argv: Sequence[str]) -> subprocess.CompletedProcess:
        self.calls[os.path.basename(argv[0])] += 1
        return run(argv, self.timeout)

    # -- cluster facts
    def ping(self) -> None:
        """Raise ControllerUnreachable unless slurmctld answers."""
        p = self._run(["scontrol", "ping"])
        if p.returncode != 0 or "DOWN" in p.stdout and "UP" not in p.stdout:
            raise ControllerUnreachable(f"the Slurm controller is unreachable (scontrol ping: "
                                        f"{(p.stdout + p.stderr).strip() or p.returncode})", ["scontrol", "ping"])

    def duplicate_drains(self) -> dict[str, str]:
        """Nodes drained because a job id came to them twice (a controller back from an older saved state handed
        out again an id the node still held): node -> Slurm's reason. Empty when sinfo cannot say."""
        try:
            p = self._run(["sinfo", "-h", "-N", "-R", "-o", "%N|%E"])
        except SchedulerError:
            return {}
        if p.returncode != 0:
            return {}
        rows = (line.partition("|") for line in p.stdout.splitlines())
        return {n.strip(): r.strip() for n, _, r in rows if "duplicate job" in r.lower()}

    def config(self) -> dict[str, str]:
        """``scontrol show config`` as a dict, read once."""
        if self._config is None:
            p = self._run(["scontrol", "show", "config"])
            if p.returncode != 0:
                raise explain(["scontrol", "show", "config"], p.stderr, p.returncode)
            self._config = parse_config(p.stdout)
        return self._config

    def sinfo_partitions(self) -> str:
        """One ``sinfo`` line per partition and node group: ``%P|%R|%D|%l|%G|%s`` ('' when sinfo cannot say)."""
        p = self._run(["sinfo", "-h", "-a", "-o", "%P|%R|%D|%l|%G|%s"])
        return p.stdout if p.returncode == 0 else ""

    def sacctmgr(self, words: Sequence[str]) -> list[list[str]] | None:
        """``sacctmgr -n -P WORDS`` as rows of fields; None when accounting cannot say (no sacctmgr, no slurmdbd)."""
        try:
            p = self._run(["sacctmgr", "-n", "-P", *words])
        except SchedulerError:
            return None
        return [line.split("|") for line in p.stdout.splitlines() if line.strip()] if p.returncode == 0 else None

    def user_jobs(self, user: str) -> int | None:
        """How many jobs (array tasks one each) ``user`` has in the queue; None when squeue cannot say."""
        p = self._run(["squeue", "-h", "-r", "-u", user, "-o", "%i"])
        return len(p.stdout.split()) if p.returncode == 0 else None

    def max_array_size(self) -> int:
        """Array indices must stay below MaxArraySize (Slurm default 1001)."""
        try:
            return int(self.config().get("MaxArraySize", "1001").split()[0])
        except ValueError:
            return 1001

    # -- queries
    def squeue(self, job_ids: Iterable[str] = (), names: Iterable[str] = ()) -> dict[str, JobInfo]:
        """One ``squeue -h -r -t all`` for all the given jobs (ids of arrays or tasks) or job names.

        Finished jobs stay visible (with their final state) for MinJobAge seconds. Ids Slurm no longer
        knows are simply absent from the answer."""
        ids = sorted({base_id(j) for j in job_ids}, key=int)
        names = sorted(set(names))
        if not ids and not names:
            return {}
        out: dict[str, JobInfo] = {}
        for chunk in _chunks(ids or [""], 500):
            argv = ["squeue", "-h", "-r", "-t", "all", "-o", self.SQUEUE_FORMAT]
            if chunk != [""]:
                argv += ["-j", ",".join(chunk)]
            if names:
                argv += ["-n", ",".join(names)]
            p = self._run(argv)
            if p.returncode != 0:
                if re.search(r"Invalid job id", p.stderr, re.I):
                    continue  # every id of this chunk has left the controller
                raise explain(argv, p.stderr, p.returncode)
            out.update(parse_squeue(p.stdout))
        return out

    def sacct_available(self) -> bool:
        if self._use_sacct is None:
            p = self._run(["sacct", "-n", "-X", "-P", "-o", "JobID", "-j", "1"])
            self._use_sacct = p.returncode == 0
            if not self._use_sacct:
                self.sacct_problem = (p.stderr.strip() or f"exit status {p.returncode}").splitlines()[0]
        return bool(self._use_sacct)

    def sacct(self, job_ids: Iterable[str] = (), since: float | None = None,
              names: Iterable[str] = ()) -> dict[str, JobInfo]:
        """One ``sacct -X -P`` for all the given jobs (or job names); {} when sacct is unavailable (the
        reason is kept in ``sacct_problem``)."""
        ids = sorted({base_id(j) for j in job_ids}, key=int)
        names = sorted(set(names))
        if (not ids and not names) or not self.sacct_available():
            return {}
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime((since or time.time()) - 86400))
        out: dict[str, JobInfo] = {}
        for chunk in _chunks(ids or [""], 500):
            argv = ["sacct", "-n", "-X", "-P", "-S", start, "-E", "now", "-o",
                    "JobID,JobIDRaw,State,ExitCode,Reason,NodeList,ConsumedEnergyRaw"]
            argv += ["-j", ",".join(chunk)] if chunk != [""] else ["--name", ",".join(names)]
            p = self._run(argv)
            if p.returncode != 0:
                # accounting went away or is refused: carry on with squeue + markers
                self._use_sacct = False
                self.sacct_problem = (p.stderr.strip() or f"exit status {p.returncode}").splitlines()[0]
                return out
            out.update(parse_sacct(p.stdout))
        return out

    def query(self, job_ids: Iterable[str], since: float | None = None) -> dict[str, JobInfo]:
        """State of every given job: squeue first, sacct (one call) for what squeue no longer knows and for the
        energy of the jobs squeue says ended (``ConsumedEnergyRaw``: squeue does not give it; a run is settled once,
        so this is when its energy is read)."""
        job_ids = list(job_ids)
        info = self.squeue(job_ids)
        missing = [j for j in job_ids if j not in info]
        ended = [j for j in job_ids if j in info and info[j].status is not None and info[j].status not in _ACTIVE]
        if missing or ended:
            done = set(ended)
            for k, v in self.sacct(missing + ended, since).items():
                if k not in info:
                    info[k] = v
                elif v.energy_j is not None and k in done:
                    info[k] = dataclasses.replace(info[k], energy_j=v.energy_j)
        return info

    def release(self, job_ids: Iterable[str]) -> None:
        """``scontrol release`` (one call); a job that is not held is not an error."""
        ids = sorted({base_id(j) for j in job_ids})
        if not ids:
            return
        argv = ["scontrol", "release", ",".join(ids)]
        p = self._run(argv)
        if p.returncode != 0 and not re.search(r"not held|already|Invalid job id|completed", p.stderr, re.I):
            raise explain(argv, p.stderr, p.returncode)

    def release_tasks(self, job_ids: Iterable[str]) -> None:
        """``scontrol release`` of exactly these jobs or array tasks (``42_3``), never their whole array: tasks
        of runs that ended must stay held (a controller back from an older state would run them again). One call,
        the ids as separate arguments (a comma-joined list of array tasks releases none of them, Slurm 22.05)."""
        ids = sorted(set(job_ids))
        if not ids:
            return
        argv = ["scontrol", "release", *ids]
        p = self._run(argv)
        if p.returncode != 0 and not re.search(r"not held|already|Invalid job id|completed", p.stderr, re.I):
            raise explain(argv, p.stderr, p.returncode)

    def cancel(self, job_ids: Iterable[str]) -> None:
        """One scancel for all the given jobs or array tasks."""
        ids = sorted(set(job_ids))
        for chunk in _chunks(ids, 500):
            argv = ["scancel", *chunk]
            p = self._run(argv)
            if p.returncode != 0 and not re.search(r"Invalid job id|already completing or completed|"
                                                   r"Job/step already", p.stderr, re.I):
                raise explain(argv, p.stderr, p.returncode)


def _chunks(items: list, n: int) -> Iterable[list]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


# ------------------------------------------------------------------------------------------ parsers


def parse_config(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def parse_squeue(text: str) -> dict[str, JobInfo]:
    """Lines of ``%i|%A|%j|%T|%r|%N``; ranged array ids (``123_[1-6%2]``) are expanded task by task."""
    out: dict[str, JobInfo] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 4:
            continue
        jid, raw, _name, state = parts[0].strip(), parts[1].strip(), parts[2], parts[3]
        reason = parts[4].strip() if len(parts) > 4 else ""
        nodes = parts[5].strip() if len(parts) > 5 else ""
        if reason in ("None", "(null)"):
            reason = ""
        try:
            ids = expand_job_id(jid)
        except ValueError:
            continue
        for j in ids:
            word = normalize_state(state)
            out[j] = JobInfo(job_id=j, status=map_state(word), state=word, reason=reason,
                             raw_id=raw if len(ids) == 1 else "", nodes=nodes, source="squeue")
    return out


def parse_sacct(text: str) -> dict[str, JobInfo]:
    """Lines of ``JobID|JobIDRaw|State|ExitCode|Reason|NodeList|ConsumedEnergyRaw`` (``-X -P -n``); steps are
    skipped. ConsumedEnergyRaw is the joules a site's energy plugin (AcctGatherEnergyType) counted for the job:
    empty or 0 where no plugin counts (``acct_gather_energy/none``), which is no figure."""
    out: dict[str, JobInfo] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 3 or "." in parts[0]:
            continue
        jid, raw, state = parts[0].strip(), parts[1].strip(), parts[2].strip()
        exit_code = parts[3].strip() if len(parts) > 3 else ""
        rc = int(exit_code.split(":")[0]) if exit_code.split(":")[0].isdigit() else None
        reason = parts[4].strip() if len(parts) > 4 else ""
        nodes = parts[5].strip() if len(parts) > 5 else ""
        joules = parts[6].strip() if len(parts) > 6 else ""
        energy = float(joules) if joules.isdigit() and int(joules) > 0 else None
        if reason in ("None", "(null)"):
            reason = ""
        extra = state.split(" ", 1)[1] if " " in state else ""  # 'CANCELLED by 0'
        if extra:
            reason = f"{extra}; {reason}" if reason else extra
        try:
            ids = expand_job_id(jid)
        except ValueError:
            continue
        for j in ids:
            word = normalize_state(state)
            out[j] = JobInfo(job_id=j, status=map_state(word), state=word, reason=reason, exit_code=rc,
                             raw_id=raw if len(ids) == 1 else "",
                             nodes="" if nodes in ("None assigned", "(null)") else nodes, source="sacct",
                             energy_j=energy if len(ids) == 1 else None)
    return out
