"""The GPU-hours runs ask for, counted one way for ``plan``'s line and ``submit``'s guard (:func:`gpu_hours`): each run
holds its GPUs for the whole time limit; with ``[slurm] exclusive``, the whole of its nodes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dlperf_slurm.model.cell import Cell, Matrix
from dlperf_slurm.words import plural


@dataclass(frozen=True)
class GpuHours:
    """What runs ask for: GPU-hours at most (each holds its GPUs for the whole time limit). ``exclusive``: each
    holds whole nodes, counted at ``node_gpus`` a node; where those are not known (None), the cells' own GPUs are
    counted and the figure is a floor."""

    hours: float
    exclusive: bool = False
    node_gpus: int | None = None

    @property
    def floor(self) -> bool:
        """Whole nodes held, their GPUs not known: the figure counts fewer GPUs than the runs hold."""
        return self.exclusive and self.node_gpus is None

    def text(self) -> str:
        """``1,234.5 GPU-hours at most``, or ``at least 12.0 GPU-hours`` (:attr:`floor`)."""
        return f"at least {self.hours:,.1f} GPU-hours" if self.floor else f"{self.hours:,.1f} GPU-hours at most"

    def basis(self) -> str:
        """What the count holds for exclusive runs ('' for others)."""
        if not self.exclusive:
            return ""
        if self.node_gpus is None:
            return ("exclusive: whole nodes, whose GPUs nothing here says (set gpus_per_node under [slurm]); "
                    "counted: the cells' own GPUs")
        return f"exclusive: whole nodes of {plural(self.node_gpus, 'GPU')}"


def gpu_hours(matrix: Matrix, cells: Iterable[Cell]) -> GpuHours:
    """The one count of GPU-hours (``plan``'s line, ``submit``'s guard): one run of each of ``cells`` (a cell as
    often as it runs), each holding its GPUs for the whole time limit; with ``[slurm] exclusive``, its nodes whole
    (``matrix.gpus_per_node`` a node; not known: its own GPUs, and :attr:`GpuHours.floor` says so)."""
    exclusive, node = matrix.slurm.exclusive, matrix.gpus_per_node
    held = sum(max(c.devices, c.nodes * node) if exclusive and node else c.devices for c in cells)
    return GpuHours(held * matrix.slurm.minutes / 60.0, exclusive, node if exclusive else None)
