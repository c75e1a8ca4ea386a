"""Who am I in the job: rank, world size and rendezvous address, from whichever launcher started us.

Order: torchrun (``RANK``/``WORLD_SIZE``), then OpenMPI's mpirun (``OMPI_COMM_WORLD_*``), then a Slurm step
(``SLURM_PROCID``...), else a single process. OpenMPI is checked before Slurm on purpose: ``SLURM_*`` leaks
into every process of an allocation (mpirun's ranks inherit the batch step's ``SLURM_PROCID=0``), whereas
``OMPI_COMM_WORLD_*`` exists only in processes mpirun started.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from dataclasses import dataclass
from typing import Callable, Mapping

DEFAULT_PORT = 29500


@dataclass(frozen=True, kw_only=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    nodes: int
    master_addr: str
    master_port: int
    launcher: str  # "torchrun" | "mpi" | "slurm" | "single"

    @property
    def is_rank0(self) -> bool:
        return self.rank == 0

    def export(self, env: dict[str, str] | None = None) -> None:
        """Set the variables ``init_process_group(init_method="env://")`` reads."""
        target = os.environ if env is None else env
        target.update(RANK=str(self.rank), WORLD_SIZE=str(self.world_size), LOCAL_RANK=str(self.local_rank),
                      MASTER_ADDR=self.master_addr, MASTER_PORT=str(self.master_port))


def _int(env: Mapping[str, str], *names: str, default: int | None = None) -> int:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return int(value)
    if default is None:
        raise KeyError(f"none of {names} is set")
    return default


def _nodes(world: int, local: int) -> int:
    return max(1, -(-world // max(1, local)))


def expand_first_host(nodelist: str) -> str:
    """First host of a Slurm node list without scontrol: ``gpu[07-09,12],cpu1`` -> ``gpu07``."""
    m = re.match(r"\s*([^,\[]+)(?:\[([^\]]+)\])?", nodelist)
    if not m:
        raise ValueError(f"cannot parse Slurm node list {nodelist!r}")
    prefix, ranges = m.group(1), m.group(2)
    return prefix if ranges is None else prefix + ranges.split(",")[0].split("-")[0]


def scontrol_first_host(nodelist: str) -> str:
    """First host of a node list via ``scontrol show hostnames``, falling back to a local parser."""
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                             timeout=30, check=True).stdout.split()
        if out:
            return out[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return expand_first_host(nodelist)


def tasks_on_node(tasks_per_node: str, node_id: int) -> int:
    """Tasks on node ``node_id`` from Slurm's compressed form, e.g. ``"2(x3),1"``."""
    counts: list[int] = []
    for part in tasks_per_node.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            raise ValueError(f"cannot parse tasks-per-node {tasks_per_node!r}")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts[min(node_id, len(counts) - 1)]


def slurm_port(job_id: str, step_id: str = "") -> int:
    """A port in 10000-59999 derived from the job (and step) id, the same on every task of the step."""
    digits = int(re.sub(r"\D", "", job_id) or 0) * 131 + int(re.sub(r"\D", "", step_id) or 0)
    return 10000 + digits % 50000


def _mpi_bcast_rendezvous() -> tuple[str, int] | None:
    """Rank 0's hostname and a free port on it, broadcast through mpi4py; None when mpi4py is missing."""
    try:
        from mpi4py import MPI  # noqa: PLC0415 (optional, heavy)
    except ImportError:
        return None
    comm = MPI.COMM_WORLD
    payload = None
    if comm.Get_rank() == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            payload = (socket.gethostname(), s.getsockname()[1])
    return comm.bcast(payload, root=0)


def detect(
    env: Mapping[str, str] | None = None,
    *,
    first_host: Callable[[str], str] = scontrol_first_host,
    mpi_rendezvous: Callable[[], tuple[str, int] | None] = _mpi_bcast_rendezvous,
) -> DistEnv:
    """Read the launcher's environment (``os.environ`` by default). An explicit MASTER_ADDR/PORT always wins."""
    env = os.environ if env is None else env
    addr = env.get("MASTER_ADDR") or None
    port = _int(env, "MASTER_PORT", default=0) or None

    if "RANK" in env and "WORLD_SIZE" in env:
        world = _int(env, "WORLD_SIZE")
        local_world = _int(env, "LOCAL_WORLD_SIZE", default=world)
        return DistEnv(rank=_int(env, "RANK"), world_size=world, local_rank=_int(env, "LOCAL_RANK", default=0),
                       local_world_size=local_world,
                       nodes=_int(env, "GROUP_WORLD_SIZE", default=_nodes(world, local_world)),
                       master_addr=addr or "127.0.0.1", master_port=port or DEFAULT_PORT, launcher="torchrun")

    if "OMPI_COMM_WORLD_RANK" in env:
        world = _int(env, "OMPI_COMM_WORLD_SIZE")
        local_world = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", default=world)
        if addr is None or port is None:
            found = mpi_rendezvous() if world > 1 else None
            if found is not None:
                addr, port = addr or found[0], port or found[1]
            elif addr is None and local_world < world:
                raise RuntimeError("multi-node mpirun: set MASTER_ADDR (e.g. mpirun -x MASTER_ADDR=<first host>) "
                                   "or install mpi4py so rank 0 can broadcast it")
        return DistEnv(rank=_int(env, "OMPI_COMM_WORLD_RANK"), world_size=world,
                       local_rank=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", default=0),
                       local_world_size=local_world, nodes=_nodes(world, local_world),
                       master_addr=addr or "127.0.0.1", master_port=port or DEFAULT_PORT, launcher="mpi")

    if "SLURM_PROCID" in env:
        world = _int(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS", default=1)
        nodes = _int(env, "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", default=1)
        per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
        local_world = (tasks_on_node(per_node, _int(env, "SLURM_NODEID", default=0)) if per_node
                       else -(-world // nodes))
        if addr is None:
            nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
            addr = first_host(nodelist) if nodelist else "127.0.0.1"
        if port is None:
            port = slurm_port(env.get("SLURM_JOB_ID", ""), env.get("SLURM_STEP_ID", ""))
        return DistEnv(rank=_int(env, "SLURM_PROCID"), world_size=world,
                       local_rank=_int(env, "SLURM_LOCALID", default=0), local_world_size=local_world, nodes=nodes,
                       master_addr=addr, master_port=port, launcher="slurm")

    return DistEnv(rank=0, world_size=1, local_rank=0, local_world_size=1, nodes=1, master_addr=addr or "127.0.0.1",
                   master_port=port or DEFAULT_PORT, launcher="single")
