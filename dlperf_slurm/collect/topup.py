"""``submit --top-up``: more repeats where the figures are not yet tight enough, instead of a fixed guess.

A cell is topped up when it has at least one OK run and its median's 95 % interval (``stats.median_interval``)
is wider than ``target`` of the median, or reaches 95 % coverage not at all (fewer than 6 OK runs), or its CV is
above the flag (5 %). Each top-up adds ``max(2, ceil(n / 2))`` repeats to such a cell (n: its repeats now), never
beyond ``cap``; the new runs go through the normal submission path (one more ``submit --top-up`` after they end
looks again). A cell with no OK run is not topped up: more repeats of a failing cell are ``--retry-failed``'s job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from dlperf_slurm import stats
from dlperf_slurm.model.rows import CellRow

DEFAULT_TARGET = 0.05  # the interval's width, relative to the median
DEFAULT_CAP = 21  # three times DLPerf's 7


@dataclass(frozen=True)
class TopUp:
    target: float = DEFAULT_TARGET
    cap: int = DEFAULT_CAP


def why(c: CellRow, target: float) -> str | None:
    """Why the cell's median is not yet tight enough (None: it is, or it has no OK run to judge)."""
    if c.n_ok == 0 or c.median is None:
        return None
    if c.ci_low is None or c.ci_high is None or c.ci_coverage is None or c.ci_coverage < stats.CONFIDENCE - 1e-12:
        return f"{c.n_ok} OK runs give no 95% interval of the median"
    rel = (c.ci_high - c.ci_low) / abs(c.median)
    if rel > target:
        return f"95% interval {rel:.1%} of the median (target {target:.1%})"
    if c.cv is not None and c.cv > stats.MAX_CV:
        return f"CV {c.cv:.1%} above {stats.MAX_CV:.0%}"
    return None


def plan(cells: Sequence[CellRow], repeats_now: dict[str, int], top: TopUp) -> dict[str, tuple[int, str]]:
    """cell id -> (its new repeat count, why) for the cells to top up."""
    out = {}
    for c in cells:
        reason = why(c, top.target)
        n = repeats_now.get(c.cell_id, c.n)
        if reason is None or n >= top.cap:
            continue
        out[c.cell_id] = (min(top.cap, n + max(2, math.ceil(n / 2))), reason)
    return out


def campaign_cells(campaign_dir: Path) -> list[CellRow]:
    """The campaign's cells as ``collect`` computes them from its logs."""
    from dlperf_slurm.collect.drive import collect
    from dlperf_slurm.collect.gather import runs_from_campaign

    return collect([runs_from_campaign(campaign_dir)], jobs=1).cells
