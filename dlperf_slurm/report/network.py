"""What the network allows a data-parallel cell on several nodes: the network explanation of its scaling.

For a cell on more than one node, beside its measured scaling efficiency:

- gradient bytes per step = parameters x bytes per gradient at the cell's precision (fp32 and amp: 4, since
  mixed precision keeps fp32 weights and gradients; fp16 and bf16 weights: 2). The parameter count is the log's
  (the built-in workload's header) or the model's published one (:data:`PARAMS`);
- the ring all-reduce time of those bytes at the bus bandwidth the job's health gate measured on the very nodes
  (``RunRow.health_busbw_gbs``, nccl-tests' busbw; the median over the cell's runs): nccl-tests defines
  busbw = algbw x 2(n-1)/n with algbw = bytes / time, so time = 2(n-1)/n x bytes / busbw, n the ranks;
- the compute time of a step: batch per GPU / the per-GPU rate of the cell's baseline (its 1n1g cell, read from
  the cell's own efficiency: baseline rate = median / (efficiency x devices));
- the efficiency a step would have if communication did not overlap compute at all,
  compute / (compute + all-reduce), and if it overlapped fully, compute / max(compute, all-reduce);
- the regime: ``network-bound`` when a step's all-reduce takes longer than its compute (even full overlap stays
  under 100 %) and the measured efficiency is what the network explains: from 10 % under the no-overlap figure to
  10 % over the full-overlap ceiling (overlap hides at most the compute's length of it; more bandwidth is the one
  remedy). Where the all-reduce is shorter than the compute: ``not overlapped`` at the no-overlap figure,
  ``partly overlapped`` above it. ``not the network`` when the efficiency is well under the no-overlap figure (the
  time goes elsewhere: input pipeline, stragglers, the launcher); ``above the measured bandwidth`` when it beats
  the full-overlap ceiling (the gate's figure underestimates the link in training: a small buffer, other rails).

  Validated on the test cluster (tests/test_network_slurm.py): 2 nodes whose all-reduce ran over a link tc limited
  to 100 Mbit/s, the tiny ResNet-50's all-reduce about 8 times its compute, measured at its no-overlap figure:
  network-bound (the rule before named it "not overlapped", as if overlap could save it).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from dlperf_slurm.model.status import Status

#: published parameter counts (torchvision's models; ResNet-50 v1 and v1.5 have the same): a log that gives its own
#: count (the built-in workload's header, ``params``) wins
PARAMS = {"resnet50": 25_557_032, "vgg16": 138_357_544}
#: bytes per gradient as the all-reduce moves it, by the cell's precision
GRAD_BYTES = {"fp32": 4, "amp": 4, "tf32": 4, "fp16": 2, "bf16": 2}
NEAR = 0.10  # within 10 % (relative) of a bound counts as at it


def ring_allreduce_seconds(nbytes: float, ranks: int, busbw_gbs: float) -> float:
    """A ring all-reduce of ``nbytes`` over ``ranks`` at nccl-tests' bus bandwidth ``busbw_gbs`` (GB/s, 1e9):
    2(n-1)/n x bytes / busbw."""
    if ranks < 2:
        return 0.0
    return 2 * (ranks - 1) / ranks * nbytes / (busbw_gbs * 1e9)


def bounds(compute_s: float, comm_s: float) -> tuple[float, float]:
    """(no overlap, full overlap) efficiency of a step of ``compute_s`` compute and ``comm_s`` all-reduce."""
    return compute_s / (compute_s + comm_s), compute_s / max(compute_s, comm_s)


def regime(measured: float, no_overlap: float, full_overlap: float) -> str:
    """The regime's name (see the module's docstring)."""
    if measured > full_overlap * (1 + NEAR):
        return "above the measured bandwidth"
    if measured < no_overlap * (1 - NEAR):
        return "not the network"
    if full_overlap < 1:  # the all-reduce outlasts the compute: no overlap can hide it
        return "network-bound"
    return "not overlapped" if measured <= no_overlap * (1 + NEAR) else "partly overlapped"


@dataclass(frozen=True)
class Explanation:
    cell_id: str
    shape: str
    setup: str
    efficiency: float  # measured
    params: int
    params_from: str  # "log" | "model"
    grad_bytes: int  # per step
    busbw_gbs: float
    allreduce_ms: float
    compute_ms: float
    no_overlap: float
    full_overlap: float
    regime: str
    text: str


def _params(cell: Any, runs: Sequence[Any]) -> tuple[int, str] | None:
    for r in runs:
        p = (r.extra or {}).get("params") if isinstance(r.extra, Mapping) else None
        if isinstance(p, int) and not isinstance(p, bool) and p > 0:
            return p, "log"
    if cell.model in PARAMS:
        return PARAMS[cell.model], "model"
    return None


def _setup(variant: str) -> str:
    return next((p[len("setup="):] for p in (variant or "").split(", ") if p.startswith("setup=")), "")


def explain_cell(cell: Any, runs: Sequence[Any]) -> Explanation | None:
    """The explanation of one cell (a ``CellRow``) from its runs (``RunRow``); None on one node, without a
    measured efficiency, parameter count, known precision or bus bandwidth."""
    if cell.nodes < 2 or not cell.efficiency or not cell.median or cell.precision not in GRAD_BYTES:
        return None
    busbws = [r.health_busbw_gbs for r in runs if r.health_busbw_gbs and r.status == Status.OK] or \
        [r.health_busbw_gbs for r in runs if r.health_busbw_gbs]
    p = _params(cell, runs)
    if not busbws or p is None:
        return None
    busbw = statistics.median(busbws)
    nbytes = p[0] * GRAD_BYTES[cell.precision]
    comm = ring_allreduce_seconds(nbytes, cell.devices, busbw)
    base_rate = cell.median / (cell.efficiency * cell.devices)  # the baseline's samples/s per GPU
    compute = cell.batch_size / base_rate
    no, full = bounds(compute, comm)
    name = regime(cell.efficiency, no, full)
    eff = f"{cell.shape} at {cell.efficiency:.0%}"
    if name == "network-bound":
        text = f"network-bound: {eff}, the measured {busbw:.3g} GB/s allows at most {full:.0%}"
        if cell.efficiency < full * (1 - NEAR):  # under the ceiling: how far overlap is from it
            waits = ": the step waits for its all-reduce" if cell.efficiency <= no * (1 + NEAR) else ""
            text += f" ({no:.0%} without overlap{waits})"
    elif name == "not overlapped":
        text = f"not overlapped: {eff}, as a step that waits for its all-reduce ({no:.0%}; full overlap {full:.0%})"
    elif name == "partly overlapped":
        text = f"partly overlapped: {eff}, between {no:.0%} (no overlap) and {full:.0%} (full overlap)"
    elif name == "not the network":
        text = (f"not the network: {eff}, the measured {busbw:.3g} GB/s allows {no:.0%} even without overlap "
                "(look at the input pipeline, stragglers, the launcher)")
    else:
        text = (f"above the measured bandwidth: {eff}, the gate's {busbw:.3g} GB/s allows at most {full:.0%} "
                "(the gate's buffer or rail understates the link)")
    return Explanation(cell.cell_id, cell.shape, _setup(cell.variant), cell.efficiency, p[0], p[1], nbytes, busbw,
                       comm * 1e3, compute * 1e3, no, full, name, text)


def explain(cells: Iterable[Any], runs: Iterable[Any]) -> list[Explanation]:
    """Every multi-node cell's explanation that the runs allow."""
    by_cell: dict[str, list[Any]] = {}
    for r in runs:
        by_cell.setdefault(r.cell_id, []).append(r)
    out = []
    for c in cells:
        e = explain_cell(c, by_cell.get(c.cell_id, []))
        if e is not None:
            out.append(e)
    return out


def as_dicts(found: Sequence[Explanation]) -> list[dict[str, Any]]:
    return [asdict(e) for e in found]


def markdown(cells: Sequence[Any], runs: Sequence[Any]) -> list[str]:
    """The summary's section (lines): one row per multi-node cell, set-up by set-up; [] without one."""
    from tabulate import tabulate

    found = explain(cells, runs)
    if not found:
        return []
    rows = [[e.setup or "-", e.shape, f"{e.efficiency:.0%}", f"{e.grad_bytes / 1e6:.1f} MB ({e.params_from})",
             f"{e.busbw_gbs:.3g} GB/s", f"{e.allreduce_ms:.1f} ms", f"{e.compute_ms:.1f} ms",
             f"{e.no_overlap:.0%}", f"{e.full_overlap:.0%}", e.text] for e in sorted(found, key=lambda e: (e.setup,
                                                                                                     e.cell_id))]
    return ["## Network explanation of scaling (cells on several nodes)", "",
            "Gradient bytes per step = parameters x bytes per gradient at the precision; ring all-reduce = "
            "2(n-1)/n x bytes / the bus bandwidth the health gate measured on the run's nodes (median over the "
            "cell's runs); compute = batch per GPU / the baseline's per-GPU rate; efficiency bounds: no overlap "
            "compute / (compute + all-reduce), full overlap compute / max(compute, all-reduce).", "",
            tabulate(rows, headers=["set-up", "shape", "efficiency", "gradients/step", "busbw", "all-reduce",
                                    "compute", "no overlap", "full overlap", "regime"],
                     tablefmt="github", disable_numparse=True), ""]
