"""The launchers: one registry of every fact about how a launcher starts the ranks of a run.

A launcher is a frozen :class:`Launcher` registered by name with :func:`register` (in the manner of ReFrame's
``@register_launcher``; the dataclass in the manner of NeMo-Run's launcher dataclasses). Its command line is
data: the Jinja2 template ``templates/launchers/<name>.sh.j2``. Everything else that depends on the launcher
reads this registry: matrix validation (:func:`names`, :func:`container_reason`), rendering
(:func:`tasks_per_node`, :meth:`Launcher.entry`, :meth:`Launcher.through_srun`) and the local executor
(:func:`local_skip_reason`).

How each launcher enters each kind of container (``none``, ``pyxis``, ``apptainer``):

============  ========  ===================  ====================================================================
launcher      tasks     pyxis                apptainer
============  ========  ===================  ====================================================================
srun          per_gpu   srun task in image   srun starts ``apptainer exec IMG program`` per task
mpirun        per_gpu   dropped (no srun)    mpirun starts ``apptainer exec IMG program`` per rank (hybrid MPI)
horovodrun    per_gpu   dropped (no srun)    horovodrun starts ``apptainer exec IMG program`` per rank
torchrun      per_node  srun task in image   ``apptainer exec IMG torchrun ... program``: torchrun in the image
paddle        per_node  srun task in image   ``apptainer exec IMG python -m paddle.distributed.launch ...``
oneflow       per_node  srun task in image   ``apptainer exec IMG python -m oneflow.distributed.launch ...``
deepspeed     per_node  srun task in image   ``apptainer exec IMG python -m deepspeed.launcher.runner ...``
msrun         per_node  srun task in image   ``apptainer exec IMG bash -c 'msrun ...; tail ...'``: msrun in the image
tf_config     per_node  srun task in image   ``apptainer exec IMG program`` per node (TF_CONFIG set outside,
                                             apptainer passes the environment in)
mp_spawn      per_node  srun task in image   ``apptainer exec IMG program --world-size N --rank R ...`` per node:
                                             the program spawns its GPUs' ranks itself, inside the image
node_ips      per_node  srun task in image   ``apptainer exec IMG program --node_ips=IPS --ctrl_port=P`` per node:
                                             the program drives the node's GPUs itself (OneFlow single-client)
dmlc          per_node  srun task in image   ``apptainer exec IMG bash -c '...'``: worker, and on the first node
                                             the scheduler and server, all in the image
============  ========  ===================  ====================================================================

torchrun, paddle, oneflow, deepspeed and msrun fork Python processes from their own interpreter: the program they are
given must be a Python script or ``-m module``, never ``apptainer``, so the whole launcher command runs inside the
image.
mpirun and horovodrun cannot enter a pyxis image: pyxis hooks srun only. Every apptainer entry relies on apptainer
passing the host environment into the image (its default): the rank variables (SLURM_*, OMPI_*, TF_CONFIG) and
the matrix's ``env`` reach the program that way, so ``--cleanenv`` in the container's options breaks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Mapping

from dlperf_slurm.model.cell import Cell
from dlperf_slurm.words import plural

#: The kinds of container a matrix may name (``[environment.container] type``).
CONTAINER_KINDS: tuple[str, ...] = ("none", "pyxis", "apptainer")
TASKS = ("per_gpu", "per_node")


class Entry(StrEnum):
    """How a launcher's command gets into a container."""

    HOST = "host"  # no container: everything runs on the host
    SRUN = "srun"  # pyxis: ``srun --container-image`` starts every srun task (launcher or program) in the image
    WRAP_PROGRAM = "wrap_program"  # apptainer exec IMG <program>: the launcher starts one container per rank
    WRAP_LAUNCHER = "wrap_launcher"  # apptainer exec IMG <launcher ... program>: the launcher runs in the image


#: How each kind of container can be entered at all.
_ENTRIES: dict[str, tuple[Entry, ...]] = {
    "none": (Entry.HOST,), "pyxis": (Entry.SRUN,), "apptainer": (Entry.WRAP_PROGRAM, Entry.WRAP_LAUNCHER)}


@dataclass(frozen=True)
class Drop:
    """A container kind a launcher cannot enter: cells of it are dropped with this reason."""

    reason: str


@dataclass(frozen=True)
class Launcher:
    """One launcher.

    ``tasks``: ``per_gpu`` launchers get one scheduler task per GPU (srun) or start every rank themselves from the
    batch shell (mpirun, horovodrun); ``per_node`` launchers run one task per node that starts that node's
    processes (torchrun, paddle, oneflow fork one per GPU; a TF multi-worker is one process per node).
    ``srun_across_nodes``: multi-node cells start through srun (so only a Slurm allocation can run them).
    ``local``: a single-node cell runs from a plain shell on this machine, without Slurm.
    ``containers``: for every kind in :data:`CONTAINER_KINDS`, its :class:`Entry` or a :class:`Drop`.
    """

    name: str
    tasks: str
    srun_across_nodes: bool
    local: bool
    containers: Mapping[str, Entry | Drop] = field(hash=False)

    def __post_init__(self) -> None:
        if self.tasks not in TASKS:
            raise ValueError(f"launcher {self.name}: tasks must be one of {TASKS}, got {self.tasks!r}")
        if set(self.containers) != set(CONTAINER_KINDS):
            raise ValueError(f"launcher {self.name}: containers must say how it enters each of {CONTAINER_KINDS}")
        for kind, allowed in _ENTRIES.items():
            if not isinstance(self.containers[kind], Drop) and self.containers[kind] not in allowed:
                raise ValueError(f"launcher {self.name}: a {kind} container is entered by one of "
                                 f"{', '.join(allowed)}, not {self.containers[kind]!r}")
        object.__setattr__(self, "containers", MappingProxyType(dict(self.containers)))

    @property
    def template(self) -> str:
        """Its template, relative to a template folder."""
        return f"launchers/{self.name}.sh.j2"

    def drop_reason(self, container_type: str) -> str | None:
        """Why this launcher cannot run in a ``container_type`` container (None if it can)."""
        how = self.containers[container_type]
        return how.reason if isinstance(how, Drop) else None

    def entry(self, container_type: str) -> Entry:
        """How it enters a ``container_type`` container; ValueError (with the reason) if it cannot."""
        how = self.containers[container_type]
        if isinstance(how, Drop):
            raise ValueError(how.reason)
        return how

    def tasks_per_node(self, gpus_per_node: int) -> int:
        """Scheduler tasks per node: one per GPU for ``per_gpu`` launchers, else one."""
        return gpus_per_node if self.tasks == "per_gpu" else 1

    def through_srun(self, nodes: int, container_type: str) -> bool:
        """Whether a cell of ``nodes`` nodes starts its tasks through srun: to reach the other nodes, or to enter
        a pyxis image. (The srun launcher is srun whatever this says.)"""
        return (nodes > 1 and self.srun_across_nodes) or self.entry(container_type) is Entry.SRUN


_REGISTRY: dict[str, Launcher] = {}


def register(launcher: Launcher) -> Launcher:
    """Add a launcher to the registry under its name."""
    if launcher.name in _REGISTRY:
        raise RuntimeError(f"launcher {launcher.name} registered twice")
    _REGISTRY[launcher.name] = launcher
    return launcher


def get(name: str) -> Launcher:
    """The launcher registered as ``name``; KeyError if none."""
    return _REGISTRY[name]


def names() -> tuple[str, ...]:
    """Every registered launcher name, in registration order."""
    return tuple(_REGISTRY)


def tasks_per_node(cell: Cell) -> int:
    """Scheduler tasks per node of a cell."""
    return get(cell.launcher).tasks_per_node(cell.gpus_per_node)


def container_reason(launcher_name: str, container_type: str) -> str | None:
    """Why cells of this launcher cannot run in a ``container_type`` container (None if they can)."""
    return get(launcher_name).drop_reason(container_type)


def local_skip_reason(cell: Cell, container_type: str) -> str | None:
    """Why the local executor (this machine, no Slurm) cannot run ``cell`` (None if it can)."""
    launcher = get(cell.launcher)
    if reason := launcher.drop_reason(container_type):
        return reason
    if cell.nodes > 1:
        how = "srun across nodes" if launcher.srun_across_nodes else f"{launcher.name} across nodes"
        return f"needs {plural(cell.nodes, 'node')} ({how}): the local executor runs on this machine only"
    if not launcher.local:
        return f"the {launcher.name} launcher needs a Slurm allocation: the local executor cannot run it"
    if launcher.entry(container_type) is Entry.SRUN:
        return f"{container_type} containers start through srun: the local executor cannot run them"
    return None


# ------------------------------------------------------------------------------------------------ the launchers

_NO_PYXIS = ("pyxis enters an image only through srun, and {name} starts its ranks from the batch shell (its own "
             "daemons), outside the image")

# srun starts one task per GPU (ranks from SLURM_PROCID); pyxis puts each task in the image, apptainer is started per
# task. It is srun, so it needs an allocation even on one node.
register(Launcher(
    "srun", "per_gpu", srun_across_nodes=True, local=False,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_PROGRAM}))
# OpenMPI mpirun from the batch shell, -H host:G per node; it starts `apptainer exec IMG program` per rank (the
# hybrid model: the image's MPI must match the host's). No pyxis: its ranks never pass through srun.
register(Launcher(
    "mpirun", "per_gpu", srun_across_nodes=False, local=True,
    containers={"none": Entry.HOST, "pyxis": Drop(_NO_PYXIS.format(name="mpirun")),
                "apptainer": Entry.WRAP_PROGRAM}))
# horovodrun -np W -H host:G per node: as mpirun (which it drives).
register(Launcher(
    "horovodrun", "per_gpu", srun_across_nodes=False, local=True,
    containers={"none": Entry.HOST, "pyxis": Drop(_NO_PYXIS.format(name="horovodrun")),
                "apptainer": Entry.WRAP_PROGRAM}))
# torchrun per node, c10d rendezvous on the first node. It forks `python3 <script>` itself, so under apptainer the
# whole torchrun runs in the image; under pyxis it is the srun task.
register(Launcher(
    "torchrun", "per_node", srun_across_nodes=True, local=True,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_LAUNCHER}))
# python -m paddle.distributed.launch per node (node rank from SLURM_NODEID, read in the task): as torchrun.
register(Launcher(
    "paddle", "per_node", srun_across_nodes=True, local=True,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_LAUNCHER}))
# python -m oneflow.distributed.launch per node (node rank from SLURM_NODEID, read in the task): as torchrun.
register(Launcher(
    "oneflow", "per_node", srun_across_nodes=True, local=True,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_LAUNCHER}))
# one TF MultiWorkerMirrored worker per node, TF_CONFIG from the node list, set on the host and passed into the
# image: the program is the worker, so apptainer wraps the program.
register(Launcher(
    "tf_config", "per_node", srun_across_nodes=True, local=True,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_PROGRAM}))
# MindSpore msrun per node (node rank from SLURM_NODEID, scheduler on the first host): it forks `python <script>`
# with the `python` first on PATH, so under apptainer the whole msrun (and the tails that stream its per-rank
# worker logs into the run's log) runs in the image. Its --log_dir is beside the run's log: the image must see it.
register(Launcher(
    "msrun", "per_node", srun_across_nodes=True, local=True,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_LAUNCHER}))
# One process per node that spawns one rank per GPU itself (torch.multiprocessing.spawn, pytorch/examples
# imagenet/main.py --multiprocessing-distributed): the template appends --world-size <nodes> --rank <node rank,
# SLURM_NODEID> --dist-url tcp://<first host>:<port>. The program is the per-node process, so apptainer wraps it.
register(Launcher(
    "mp_spawn", "per_node", srun_across_nodes=True, local=True,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_PROGRAM}))
# DeepSpeed's own launcher, `python -m deepspeed.launcher.runner` (the `deepspeed` command) with the program's
# interpreter, one per node: on one node --num_gpus G (no hostfile, no ssh); across nodes srun starts it on every
# node with a hostfile built from the allocation (`host slots=G`), --no_ssh --node_rank $SLURM_NODEID and the
# first host as master: each runner starts its own node's ranks (deepspeed.launcher.launch), none needs pdsh or ssh.
# It forks `python -u <script>` itself, so under apptainer the whole runner runs in the image.
register(Launcher(
    "deepspeed", "per_node", srun_across_nodes=True, local=True,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_LAUNCHER}))
# One process per node that drives all of the node's GPUs and reaches the other nodes by address (OneFlow's
# single-client programs, DLPerf's OneFlow runs: --num_nodes/--gpu_num_per_node in the program's argv): the template
# appends --node_ips=<the allocation's IPv4 addresses, node list order> --ctrl_port=<job port>. The program is the
# per-node process, so apptainer wraps it.
register(Launcher(
    "node_ips", "per_node", srun_across_nodes=True, local=True,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_PROGRAM}))
# MXNet's own parameter-server mode (kvstore dist_sync): one worker per node (DMLC_ROLE=worker), and on the first
# node of the allocation the ps-lite scheduler and one server beside it, in the same task; DMLC_PS_ROOT_URI is
# that node's address from the allocation's node list. The scheduler and server are started with the program's
# interpreter (`python -c 'import mxnet'`), so under apptainer the whole per-node command runs in the image.
register(Launcher(
    "dmlc", "per_node", srun_across_nodes=True, local=True,
    containers={"none": Entry.HOST, "pyxis": Entry.SRUN, "apptainer": Entry.WRAP_LAUNCHER}))
