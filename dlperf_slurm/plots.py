"""The PNG plots of a summary: per suite, throughput and scaling efficiency against the number of GPUs.

Rendering is the slow part of writing a summary, so it is kept cheap: matplotlib's Agg canvas without pyplot, one
figure per process cleared and reused, fixed margins (no tight-layout pass), tick labels without mathtext; and
:func:`render` draws several suites' plots in worker processes, while the caller writes the other formats.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from dlperf_slurm.files import atomic_write
from dlperf_slurm.rows import CellRow
from dlperf_slurm.tables import groups, xla_name

_FIG: Any = None  # this process's figure, reused plot after plot


def _figure() -> Any:
    global _FIG
    if _FIG is None:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        _FIG = Figure(figsize=(12, 4.8))
        FigureCanvasAgg(_FIG)
    _FIG.clear()
    return _FIG


def plottable(cells: Sequence[CellRow], suite: str) -> list[tuple[tuple, list[CellRow]]]:
    """The suite's groups of cells (shapes of one precision, XLA, batch, variant, campaign) with an OK median."""
    gs = [(k, [c for c in g if c.n_ok and c.median is not None]) for k, g in groups(cells) if k[0] == suite]
    return [(k, g) for k, g in gs if g]


def draw(gs: list[tuple[tuple, list[CellRow]]], suite: str, shared: bool) -> bytes:
    """The PNG of one suite's groups (:func:`plottable`); ``shared``: the suite appears in several campaigns."""
    from matplotlib.ticker import LogFormatter

    fig = _figure()
    ax1, ax2 = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.07, right=0.985, bottom=0.11, top=0.93, wspace=0.22)
    xticks: set[int] = set()
    unit = gs[0][1][0].unit
    for i, (key, g) in enumerate(gs):
        color = f"C{i % 10}"
        label = f"{key[1]}{' +' + xla_name(suite) if key[2] else ''}, b{key[3]}" + (f", {key[5]}" if key[5] else "")
        if shared:
            label += f" [{key[6]}]"
        if any(c.tiny for c in g):
            label += " (tiny)"
        x = [c.devices for c in g]
        xticks.update(x)
        ax1.plot(x, [c.median for c in g], "o-", color=color, label=label)
        lo = [c.median - c.min for c in g]
        hi = [c.max - c.median for c in g]
        ax1.errorbar(x, [c.median for c in g], yerr=[lo, hi], fmt="none", ecolor=color, alpha=0.5, capsize=3)
        base = next((c for c in g if c.nodes == 1 and c.gpus_per_node == 1), None)
        if base is not None:
            xs = sorted(set(x) | {1})
            ax1.plot(xs, [base.median * d for d in xs], "--", color=color, alpha=0.5)
            eff = [(c.devices, c.efficiency) for c in g if c.efficiency is not None]
            if eff:
                ax2.plot([e[0] for e in eff], [100 * e[1] for e in eff], "o-", color=color, label=label)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(xticks))
        ax.set_xticklabels([str(t) for t in sorted(xticks)])
        ax.set_xlabel("GPUs")
        ax.grid(True, alpha=0.3)
    ax1.set_yscale("log")
    ax1.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    ax1.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.4)))
    ax1.set_ylabel(f"throughput ({unit}), median, min-max bars; ideal dashed")
    ax1.set_title(f"{suite}: throughput")
    ax2.axhline(100, color="k", ls="--", lw=1, label="ideal")
    ax2.set_ylabel("scaling efficiency (%)")
    ax2.set_ylim(0, max(110, ax2.get_ylim()[1]))
    ax2.set_title(f"{suite}: scaling efficiency vs 1 GPU")
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=8)
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def _job(gs: list[tuple[tuple, list[CellRow]]], suite: str, shared: bool, path: str) -> str:
    return str(atomic_write(Path(path), draw(gs, suite, shared), durable=True))


class Rendering:
    """Plots being drawn, in worker processes when there are several and CPUs for them; :meth:`wait` returns the
    paths written, in order."""

    def __init__(self, jobs: list[tuple[list, str, bool, Path]]):
        self.paths = [p for *_, p in jobs]
        self.futures: list[Future] = []
        self.pool = None
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
        if len(jobs) > 1 and cpus > 1 and sys.platform.startswith("linux"):
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            _figure()  # matplotlib imported once, here: the workers fork with it
            self.pool = ProcessPoolExecutor(min(cpus, len(jobs)), mp_context=multiprocessing.get_context("fork"))
            self.futures = [self.pool.submit(_job, gs, suite, shared, str(path)) for gs, suite, shared, path in jobs]
        else:
            for gs, suite, shared, path in jobs:
                _job(gs, suite, shared, str(path))

    def wait(self) -> list[Path]:
        try:
            for f in self.futures:
                f.result()
        finally:
            if self.pool is not None:
                self.pool.shutdown()
        return self.paths
