"""What a Slurm cluster allows a campaign, read from the controller before anything is submitted: whether any node
has GPU GRES, each partition's nodes, GPUs a node and MaxTime/MaxNodes, and the QOS limits of the user's
association (MaxSubmitJobsPerUser, the GPUs a user or a job may hold). Each read is one command, made once, and
a cluster that cannot say (no sacctmgr, no accounting) simply has no such limit here: Slurm stays the judge.

:func:`cell_refusal` says why a run's request can never start on this cluster (it would be refused, or pend
forever); :func:`gpu_gres_refusal` why a campaign that asks for GPUs cannot be submitted at all (no GPU GRES).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dlperf_slurm.model.config import time_to_minutes
from dlperf_slurm.words import plural

if TYPE_CHECKING:
    from dlperf_slurm.model.config import SlurmConfig
    from dlperf_slurm.schedulers.base import Resources
    from dlperf_slurm.schedulers.slurmctl import Slurm

#: where a user sets the site's request form (the one remedy the refusal names)
SITE_REMEDY = 'gpu_request = "none" under [slurm] in your site file (or the matrix)'


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    nodes: int  # how many nodes it has
    max_nodes: int | None  # MaxNodes a job (None: unlimited)
    max_minutes: float | None  # MaxTime (None: unlimited)
    gpus_per_node: int  # the most GPU GRES one of its nodes has (0: none)


@dataclass(frozen=True)
class Qos:
    name: str
    max_submit_per_user: int | None = None  # MaxSubmitJobsPerUser (array tasks count one each)
    max_gpus_per_user: int | None = None  # MaxTRESPerUser gres/gpu
    max_gpus_per_job: int | None = None  # MaxTRESPerJob gres/gpu


@dataclass
class Limits:
    """The cluster's answers, each read on first use (``Slurm`` runs the commands)."""

    slurm: "Slurm"
    _partitions: dict[str, Partition] | None = field(default=None, repr=False)
    _qos: dict[tuple[str | None, str | None], Qos | None] = field(default_factory=dict, repr=False)

    def partitions(self) -> dict[str, Partition]:
        if self._partitions is None:
            from dlperf_slurm.errors import SchedulerError

            try:
                self._partitions = parse_sinfo(self.slurm.sinfo_partitions())
            except SchedulerError:  # no sinfo, or no answer: nothing known here (sbatch still judges)
                self._partitions = {}
        return self._partitions

    def partition(self, name: str | None) -> Partition | None:
        parts = self.partitions()
        if name:
            return parts.get(name)
        return next((p for p in parts.values() if p.default), None)

    def any_gpu_gres(self) -> bool | None:
        """Has any node of the cluster GPU GRES? None when sinfo could not say."""
        parts = self.partitions()
        return any(p.gpus_per_node for p in parts.values()) if parts else None

    def qos(self, account: str | None, qos: str | None) -> Qos | None:
        """The QOS a job of ``account``/``qos`` runs under (the association's default without one), with its
        limits; None when accounting cannot say."""
        key = (account, qos)
        if key not in self._qos:
            self._qos[key] = self._read_qos(account, qos)
        return self._qos[key]

    def default_account(self) -> str | None:
        rows = self.slurm.sacctmgr(["show", "user", user(), "format=defaultaccount"])
        return rows[0][0] if rows and rows[0] and rows[0][0] else None

    def _read_qos(self, account: str | None, qos: str | None) -> Qos | None:
        name = qos
        if not name:
            rows = self.slurm.sacctmgr(["show", "assoc", "where", f"user={user()}", *(
                [f"account={account}"] if account else []), "format=account,defaultqos,qos"])
            if rows is None:
                return None
            default_account = account or self.default_account()
            mine = [r for r in rows if len(r) >= 2 and (r[0] == default_account or not default_account)]
            name = next((r[1] for r in mine if r[1]), None) or "normal"
        rows = self.slurm.sacctmgr(["show", "qos", f"name={name}",
                                    "format=name,maxsubmitjobsperuser,maxtresperuser,maxtresperjob"])
        if not rows:
            return None
        r = rows[0] + [""] * 4
        return Qos(name=r[0] or name, max_submit_per_user=_int(r[1]), max_gpus_per_user=gpu_tres(r[2]),
                   max_gpus_per_job=gpu_tres(r[3]))


def user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return os.environ.get("USER", "")


def _int(s: str) -> int | None:
    s = s.strip()
    return int(s) if s.isdigit() else None


def gpu_tres(tres: str) -> int | None:
    """The GPU count of a TRES list (``cpu=4,gres/gpu=8`` -> 8; ``gres/gpu:h100=4`` counts too); None: none."""
    total = None
    for part in tres.split(","):
        k, _, v = part.partition("=")
        if (k == "gres/gpu" or k.startswith("gres/gpu:")) and v.strip().isdigit():
            total = (total or 0) + int(v)
    return total


def _gres_gpus(gres: str) -> int:
    """GPUs in a node's GRES (``gpu:4``, ``gpu:a100:8(S:0-1)``, ``gpu:4,shard:8``)."""
    n = 0
    for part in gres.split(","):
        bits = part.split("(")[0].split(":")
        if bits[0] == "gpu" and len(bits) >= 2 and bits[-1].isdigit():
            n = max(n, int(bits[-1]))
    return n


def _minutes(limit: str) -> float | None:
    limit = limit.strip()
    if limit in ("", "infinite", "UNLIMITED", "n/a"):
        return None
    try:
        return time_to_minutes(limit)
    except ValueError:
        return None


def parse_sinfo(text: str) -> dict[str, Partition]:
    """``sinfo -h -a -o '%R|%D|%l|%G|%s'`` (one line per partition and node state/GRES group) -> partitions.
    The default partition's name carries sinfo's ``*`` in %P only, so the caller asks %P too: ``%P|%R|...``."""
    acc: dict[str, dict] = {}
    for line in text.splitlines():
        f = line.split("|")
        if len(f) < 6:
            continue
        shown, name, count, limit, gres, max_nodes = (x.strip() for x in f[:6])
        a = acc.setdefault(name, {"default": False, "nodes": 0, "limit": limit, "gpus": 0, "max_nodes": max_nodes})
        a["default"] = a["default"] or shown.endswith("*")
        a["nodes"] += int(count) if count.isdigit() else 0
        a["gpus"] = max(a["gpus"], _gres_gpus(gres))
    return {n: Partition(name=n, default=a["default"], nodes=a["nodes"], max_minutes=_minutes(a["limit"]),
                         max_nodes=_max_nodes(a["max_nodes"]), gpus_per_node=a["gpus"]) for n, a in acc.items()}


def _max_nodes(s: str) -> int | None:
    # sinfo %s is "min-max" job size in nodes (e.g. 1-infinite, 1-4)
    hi = s.split("-")[-1].strip()
    return int(hi) if hi.isdigit() else None


def asks_gpus(matrix) -> bool:
    """Does any cell of the matrix ask Slurm for GPUs?"""
    return matrix.slurm.gpu_request != "none" and any(c.gpus_per_node for c in matrix.cells)


#: AccountingStorageEnforce words under which a job needs an association, hence an account (limits, qos and safe
#: imply associations, as slurm.conf(5) says)
_ENFORCE_ASSOC = ("associations", "limits", "qos", "safe")


def site_lines(limits: Limits, slurm: "SlurmConfig") -> list[str]:
    """One line each where the site file (or the matrix) leaves out what this cluster needs: no ``[slurm]
    partition`` and no default partition (sbatch refuses every job), or which partition the jobs then go to; no
    ``[slurm] account`` where the cluster enforces associations and the user has no default account. Nothing
    where the cluster cannot say."""
    out = []
    parts = limits.partitions()
    if not slurm.partition and parts:
        default = next((p for p in parts.values() if p.default), None)
        names = ", ".join(sorted(parts))
        if default is None:
            out.append(f"no partition is set and this cluster has no default partition: sbatch would refuse every "
                       f"job; set partition = \"NAME\" under [slurm] in your site file (its partitions: {names})")
        else:
            gpus = f" of {plural(default.gpus_per_node, 'GPU')}" if default.gpus_per_node else ""
            out.append(f"no partition is set: the jobs go to the cluster's default partition, {default.name} "
                       f"({plural(default.nodes, 'node')}{gpus}; its partitions: {names})")
    if not slurm.account:
        why = account_required(limits)
        if why:
            out.append(why)
    return out


def account_required(limits: Limits) -> str | None:
    """One line when jobs need an account this site does not set: the cluster enforces associations
    (``AccountingStorageEnforce``) and the user has no default account (or no association at all)."""
    from dlperf_slurm.errors import SchedulerError

    try:
        enforce = limits.slurm.config().get("AccountingStorageEnforce", "")
    except SchedulerError:
        return None
    words = [w.strip().lower() for w in enforce.split(",")]
    if not any(w in _ENFORCE_ASSOC for w in words):
        return None
    me = user()
    rows = limits.slurm.sacctmgr(["show", "user", me, "format=defaultaccount"])
    if rows is None:  # accounting cannot say
        return None
    if rows and rows[0] and rows[0][0]:
        return None
    assoc = limits.slurm.sacctmgr(["show", "assoc", "where", f"user={me}", "format=account"]) or []
    accounts = sorted({r[0] for r in assoc if r and r[0]})
    has = (f"user {me} has no default account (its accounts: {', '.join(accounts)})" if accounts
           else f"user {me} has no account on this cluster (ask its administrators for one)")
    return (f"no account is set and {has}, where this cluster requires one (AccountingStorageEnforce={enforce}): "
            f"sbatch would refuse every job; set account = \"NAME\" under [slurm] in your site file")


def gpu_gres_refusal(limits: Limits, asks_gpus: bool) -> str | None:
    """One line when a campaign asks for GPUs and no node of the cluster has GPU GRES (a CPU-only Slurm)."""
    if not asks_gpus or limits.any_gpu_gres() is not False:
        return None
    return ("this Slurm cluster has no GPU GRES (sinfo shows no gpu on any node), and the campaign asks for GPUs "
            f"(--gpus-per-node): on a CPU-only cluster set {SITE_REMEDY}, then run the command again")


def cell_refusal(limits: Limits, res: "Resources") -> str | None:
    """Why a job with these resources can never start on this cluster (None: nothing here says so)."""
    part = limits.partition(res.partition)
    where = f"partition {part.name}" if part else ""
    gpus = res.gpus_per_node if res.gpu_request != "none" else 0
    if part is not None:
        if res.nodes > part.nodes:
            return f"asks for {plural(res.nodes, 'node')}; {where} has {part.nodes}"
        if part.max_nodes is not None and res.nodes > part.max_nodes:
            return f"asks for {plural(res.nodes, 'node')}; {where} allows a job {part.max_nodes} (MaxNodes)"
        if part.max_minutes is not None and time_to_minutes(res.time) > part.max_minutes:
            return (f"asks for time {res.time}; {where}'s MaxTime is {hms(part.max_minutes)}: "
                    f"a shorter [slurm] time or another partition")
        if gpus and part.gpus_per_node and gpus > part.gpus_per_node:
            return f"asks for {plural(gpus, 'GPU')} a node; the nodes of {where} have {part.gpus_per_node}"
    if gpus:
        q = limits.qos(res.account, res.qos)
        total = gpus * res.nodes
        if q and q.max_gpus_per_job is not None and total > q.max_gpus_per_job:
            return f"asks for {plural(total, 'GPU')}; QOS {q.name} allows a job {q.max_gpus_per_job} (MaxTRESPerJob)"
        if q and q.max_gpus_per_user is not None and total > q.max_gpus_per_user:
            return (f"asks for {plural(total, 'GPU')}; QOS {q.name} allows a user {q.max_gpus_per_user} at once "
                    "(MaxTRESPerUser): it would pend forever")
    return None


def hms(minutes: float) -> str:
    s = int(round(minutes * 60))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
