"""The GPUs a node of the site has, for the shapes a matrix writes relative to them (``1xall``, ``2xall``,
``1xhalf``: :mod:`dlperf_slurm.matrix.axes`), and the cells a node cannot hold. :mod:`dlperf_slurm.matrix.loader` asks
it."""

from __future__ import annotations

import os

from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix import axes
from dlperf_slurm.matrix.toml_source import Source
from dlperf_slurm.model.cell import Cell
from dlperf_slurm.model.config import SlurmConfig, System
from dlperf_slurm.words import plural

#: the GPUs a node has where neither the site file nor a system says (relative shapes; the tests' 8, DLPerf's nodes)
GPUS_ENV = "DLPERF_SLURM_GPUS_PER_NODE"


class NodeGpus:
    """The GPUs a node of the site has, for the shapes written relative to them (``1xall``, ``2xhalf``): the
    ``[slurm] gpus_per_node`` of the site file (or the matrix), else the chosen system's ``gpus_per_node``, else
    :data:`GPUS_ENV`, else, where a Slurm client answers, the most GPU GRES a node of the job's partition (the
    default one without ``[slurm] partition``) has. Asked only when a relative shape is given; nothing to go by
    is one error naming what to set."""

    def __init__(self, ctx: Source, slurm: SlurmConfig, system: System | None):
        self.ctx, self.slurm, self.system = ctx, slurm, system
        self.count: int | None = None
        self.basis = ""

    def __call__(self, key: str) -> int:
        if self.count is None:
            self.count, self.basis = self._find(key)
        return self.count

    def known(self) -> int | None:
        """The GPUs a node has where something here says, Slurm unasked: what the relative shapes found, else
        ``[slurm] gpus_per_node``, the system's, :data:`GPUS_ENV` (None: nothing says)."""
        if self.count is not None:
            return self.count
        if self.slurm.gpus_per_node:
            return self.slurm.gpus_per_node
        if self.system is not None and self.system.gpus_per_node:
            return self.system.gpus_per_node
        env = os.environ.get(GPUS_ENV, "").strip()
        return int(env) if env.isdigit() and 1 <= int(env) <= axes.MAX_GPUS_PER_NODE else None

    def line(self) -> str:
        """How the relative shapes were resolved ('' when the matrix gave none)."""
        if self.count is None:
            return ""
        half = self.count // 2
        return (f"shapes: 'all' is {plural(self.count, 'GPU')} a node" + (f", 'half' {half}" if half else "")
                + f" ({self.basis})")

    def _find(self, key: str) -> tuple[int, str]:
        if self.slurm.gpus_per_node:
            return self.slurm.gpus_per_node, "[slurm] gpus_per_node"
        if self.system is not None and self.system.gpus_per_node:
            return self.system.gpus_per_node, f"system {self.system.label}'s gpus_per_node"
        env = os.environ.get(GPUS_ENV, "").strip()
        if env:
            if not env.isdigit() or not 1 <= int(env) <= axes.MAX_GPUS_PER_NODE:
                raise UserError(f"${GPUS_ENV}={env!r}: expected the GPUs a node has, 1 to {axes.MAX_GPUS_PER_NODE}")
            return int(env), f"${GPUS_ENV}"
        asked = "nothing says how many: set gpus_per_node = N under [slurm] in your site file (or the matrix), " \
                "or choose a system that has gpus_per_node (--system)"
        from dlperf_slurm.schedulers.slurmctl import Slurm

        if not Slurm.available():
            raise self.ctx.error(key, f"a shape relative to the GPUs a node has, and {asked}; no Slurm client here "
                                      "can say")
        from dlperf_slurm.schedulers.slurmlimits import Limits

        limits = Limits(Slurm(timeout=20))
        part = limits.partition(self.slurm.partition)
        name = f"partition {self.slurm.partition}" if self.slurm.partition else "default partition"
        if part is None:
            seen = ", ".join(sorted(limits.partitions())) or "none (sinfo did not answer)"
            raise self.ctx.error(key, f"a shape relative to the GPUs a node has, and {asked}; this cluster has no "
                                      f"{name} (its partitions: {seen})")
        if not part.gpus_per_node:
            raise self.ctx.error(key, f"a shape relative to the GPUs a node has, and {asked}; the nodes of partition "
                                      f"{part.name} have no GPU GRES (sinfo)")
        return part.gpus_per_node, f"the nodes of partition {part.name}, as sinfo says"


def site_reason(cell: Cell, slurm: SlurmConfig) -> str | None:
    """Why the site cannot run a cell: more GPUs a node than ``[slurm] gpus_per_node`` says its nodes have."""
    if slurm.gpus_per_node and cell.gpus_per_node > slurm.gpus_per_node:
        return (f"the nodes have {plural(slurm.gpus_per_node, 'GPU')} ([slurm] gpus_per_node); it asks "
                f"{cell.gpus_per_node}")
    return None
