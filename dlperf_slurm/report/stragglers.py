"""Which nodes made which number: per node, how its runs compare with the same cell's runs on other nodes, and
the nodes that are consistently slow (stragglers a center can drain).

A node is judged in a cell when the cell has OK runs on it and at least :data:`MIN_OTHERS` OK runs that did not
touch it. Its run there is **slow** when it falls below the median of those other runs by more than
``k`` x their median absolute deviation and by more than ``min_gap`` of that median (so identical runs with a
MAD of 0 do not make a tiny difference "slow"). Comparing with the *other* nodes' runs, not with the cell's own
median, keeps one bad node from hiding in a median it drags down (on a 2-node cluster it makes half the runs).
A node is a **straggler** when it was slow in at least ``min_cells`` cells and in at least half the runs it was
judged in.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from dlperf_slurm.hostlist import expand
from dlperf_slurm.model.rows import RunRow
from dlperf_slurm.model.status import Status

K_MAD = 3.0
MIN_GAP = 0.02
MIN_CELLS = 2
MIN_OTHERS = 2


@dataclass(kw_only=True)
class NodeReport:
    node: str
    runs: int = 0  # OK runs it took part in
    judged: int = 0  # of those, runs in a cell with enough runs elsewhere to compare with
    slow: int = 0
    cells: int = 0  # cells it was judged in
    slow_cells: list[str] = field(default_factory=list)
    worst_gap: float | None = None  # the largest shortfall below the other nodes' median, as a fraction
    straggler: bool = False


def analyse(runs: Sequence[RunRow], *, k: float = K_MAD, min_gap: float = MIN_GAP,
            min_cells: int = MIN_CELLS) -> list[NodeReport]:
    """One report per node seen in the runs' host lists, stragglers first, then by name."""
    ok = [(r, r.throughput, set(expand(r.hosts))) for r in runs
          if r.status == Status.OK and r.throughput and r.hosts]
    nodes = {n: NodeReport(node=n) for _, _, hosts in ok for n in hosts}
    by_cell: dict[tuple[str, str], list[tuple[float, set[str]]]] = {}  # each OK run's throughput and nodes
    for r, throughput, hosts in ok:
        by_cell.setdefault((r.campaign, r.cell_id), []).append((throughput, hosts))
        for n in hosts:
            nodes[n].runs += 1
    for (_, cell_id), members in sorted(by_cell.items()):
        for node, rep in nodes.items():
            mine = [x for x, hosts in members if node in hosts]
            others = [x for x, hosts in members if node not in hosts]
            if not mine or len(others) < MIN_OTHERS:
                continue
            ref = statistics.median(others)
            mad = statistics.median(abs(x - ref) for x in others)
            limit = max(k * mad, min_gap * ref)
            slow = [x for x in mine if ref - x > limit]
            rep.cells += 1
            rep.judged += len(mine)
            rep.slow += len(slow)
            if slow:
                rep.slow_cells.append(cell_id)
                gap = max((ref - x) / ref for x in slow)
                rep.worst_gap = gap if rep.worst_gap is None else max(rep.worst_gap, gap)
    for rep in nodes.values():
        rep.straggler = len(rep.slow_cells) >= min_cells and rep.slow * 2 >= rep.judged > 0
    return sorted(nodes.values(), key=lambda r: (not r.straggler, r.node))


def markdown(reports: Sequence[NodeReport]) -> list[str]:
    """The summary's "Nodes" section (no lines when no run names its nodes)."""
    if not reports:
        return []
    lines = ["## Nodes", "",
             f"Each node's OK runs against the same cell's runs on other nodes: slow = below their median by more "
             f"than {K_MAD:g} x their MAD and {MIN_GAP:.0%}; a straggler is slow in {MIN_CELLS}+ cells and in half "
             "its judged runs or more.", "",
             "| node | OK runs | judged | slow | cells judged | slow cells | worst gap | straggler |",
             "|---|---|---|---|---|---|---|---|"]
    for r in reports:
        gap = f"{r.worst_gap:.1%}" if r.worst_gap is not None else "—"
        lines.append(f"| {r.node} | {r.runs} | {r.judged} | {r.slow} | {r.cells} | {len(r.slow_cells)} | {gap} | "
                     f"{'**yes**' if r.straggler else 'no'} |")
    named = [r.node for r in reports if r.straggler]
    lines += ["", f"Stragglers: {', '.join(named)} (drain and check them)." if named else "Stragglers: none.", ""]
    return lines
