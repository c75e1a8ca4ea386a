"""Runs -> cells (method.md): a cell's runs grouped, statistics over its OK runs only, its status (its dominant
failure or its progress when no run is OK), flags, speedup and efficiency against the 1x1 cell of the same
suite, precision, XLA, batch per device, variant and launcher (else the only 1x1 cell that differs from it in
launcher alone), and TFLOP/s per GPU and MFU where the log states the model's FLOPs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, TypeGuard

from dlperf_slurm import stats
from dlperf_slurm.model.rows import CellKey, CellRow, RunRow, columns
from dlperf_slurm.model.status import UNFINISHED, Status
from dlperf_slurm.outcome import decision


def _num(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _baseline_key(c: CellRow, launcher: bool = True) -> tuple:
    key = (c.campaign or "", c.suite, c.precision, bool(c.xla), int(c.batch_size), c.variant or "")
    return key + (c.launcher or "",) if launcher else key


class _Rate(TypedDict):
    """A cell's achieved rate (the CellRow fields of the same names)."""

    tflops_per_gpu: float | None
    mfu: float | None
    ceiling_tflops: float | None
    mfu_ceiling: float | None


def _compute_rate(median: float | None, devices: int, extras: Iterable[Mapping[str, Any]]) -> _Rate:
    """Achieved model TFLOP/s per GPU and MFU, where an OK run's ``extra`` states the model's FLOPs per sample
    (and the GPU's peak): median samples/s x FLOPs per sample / GPUs; MFU = that / the datasheet peak, and
    ``mfu_ceiling`` = that / the campaign's measured matmul ceiling (dlperf_slurm.probes.ceiling)."""
    extras = list(extras)
    extra = next((x for x in extras if _num((x or {}).get("flops_per_sample"))), None)
    ceilings = [x["ceiling_tflops_per_gpu"] for x in extras if _num((x or {}).get("ceiling_tflops_per_gpu"))]
    ceiling = max(ceilings) if ceilings else None  # the best measured: a slow measurement must not inflate MFU
    if median is None or extra is None or devices <= 0:
        return {"tflops_per_gpu": None, "mfu": None, "ceiling_tflops": ceiling, "mfu_ceiling": None}
    tflops = median * extra["flops_per_sample"] / devices / 1e12
    peak = extra.get("peak_tflops_per_gpu")
    return {"tflops_per_gpu": tflops, "mfu": tflops / peak if _num(peak) and peak > 0 else None,
            "ceiling_tflops": ceiling, "mfu_ceiling": tflops / ceiling if ceiling and ceiling > 0 else None}


def _rate_flags(rate: _Rate) -> list[str]:
    """A rate no one should believe is flagged, not printed: MFU above 100 %, or no datasheet peak."""
    if rate["tflops_per_gpu"] is None:
        return []
    out = []
    if any(v is not None and v > 1.0 for v in (rate["mfu"], rate["mfu_ceiling"])):
        out.append("mfu_over_100")
    if rate["mfu"] is None:
        out.append("no_peak")
    return out


def _display(counts: Counter, n: int, status: Status) -> str | None:
    """What a cell without an OK run reads: its progress while runs are unfinished, else its status."""
    if not any(counts.get(s, 0) for s in UNFINISHED):
        return status
    waiting = counts.get(Status.PENDING, 0) + counts.get(Status.REQUEUED, 0)
    parts = [(counts.get(Status.RUNNING, 0), "running"), (waiting, "pending"),
             (counts.get(Status.UNSUBMITTED, 0), "not submitted")]
    return ", ".join(f"{word} {k}/{n}" for k, word in parts if k)


def _cell(rs: Sequence[RunRow], n: int) -> CellRow:
    first = rs[0]
    ok: list[RunRow] = []
    figures: list[float] = []  # the OK runs' throughputs
    for r in rs:
        if r.status == Status.OK and _num(r.throughput):
            ok.append(r)
            figures.append(r.throughput)
    st = stats.summarize(figures, n)
    counts = Counter(r.status for r in rs)
    status = Status.OK if ok else decision.cell_status(counts)

    def peak(key: str) -> float | None:
        vals = [v for v in (getattr(r, key) for r in ok) if _num(v)]
        return max(vals) if vals else None

    def median(key: str) -> float | None:
        return stats.median([v for v in (getattr(r, key) for r in ok) if _num(v)])

    failed = [r for r in rs if r.status != Status.OK and r.reason]
    # a cell without an OK run reads its status: the reason beside it is one of that status where one says why
    reasons = Counter(r.reason for r in ([r for r in failed if r.status == status] if not ok else []) or failed)
    mem_reasons = Counter(r.mem_reason for r in ok if r.mem_reason and not _num(r.mem_peak_mib))
    tiny = any(r.tiny for r in rs)
    rate = _compute_rate(st.median, first.devices, (r.extra for r in ok))
    return CellRow(**_energy(ok),
        **{k: getattr(first, k) for k in columns(CellKey)},
        status=status, display=None if ok else _display(counts, n, status), n=n, n_ok=st.n_ok,
        median=st.median, min=st.min, max=st.max, mean=st.mean, stdev=st.stdev, cv=st.cv,
        ci_low=st.ci_low, ci_high=st.ci_high, ci_coverage=st.ci_coverage,
        median_time=median("throughput_time"), median_speed=median("throughput_speed"),
        published=first.published, unit=first.unit, speedup=None, efficiency=None, baseline=None,
        latency_ms=median("latency_ms"), mem_peak_mib=peak("mem_peak_mib"), mem_gpu0_mib=peak("mem_gpu0_mib"),
        mem_allocator_mib=peak("mem_allocator_mib"),
        mem_reason=mem_reasons.most_common(1)[0][0] if mem_reasons else "",
        gpu_util=median("gpu_util") if any(_num(r.gpu_util) for r in ok) else None,
        searched="", layout=str((first.extra or {}).get("layout") or ""), **rate,
        flags=list(st.flags) + _rate_flags(rate) + (["tiny"] if tiny else []), tiny=tiny,
        statuses=dict(sorted(counts.items())), reason=reasons.most_common(1)[0][0] if reasons else "")


def _energy(ok: Sequence[RunRow]) -> dict[str, Any]:
    """A cell's energy fields from its OK runs: samples (tokens) per joule summarised as the throughput is (median
    and its interval), the median W per GPU and J per step, the runs' basis, or why there is no figure."""
    per_joule = [r.samples_per_joule for r in ok if _num(r.samples_per_joule)]
    st = stats.summarize(per_joule, len(ok))
    bases = {r.energy_basis for r in ok if r.energy_basis}
    reasons = Counter(r.energy_reason for r in ok if r.energy_reason and not _num(r.samples_per_joule))
    return {"samples_per_joule": st.median, "samples_per_joule_ci_low": st.ci_low,
            "samples_per_joule_ci_high": st.ci_high,
            "power_w_per_gpu": stats.median([r.power_w_per_gpu for r in ok if _num(r.power_w_per_gpu)]),
            "energy_j_per_step": stats.median([r.energy_j_per_step for r in ok if _num(r.energy_j_per_step)]),
            "energy_basis": bases.pop() if len(bases) == 1 else ("mixed" if bases else ""),
            "energy_reason": reasons.most_common(1)[0][0] if reasons and not per_joule else ""}


def cells_of(runs: Sequence[RunRow], repeats: Mapping[Any, int] | None = None) -> list[CellRow]:
    """One row per cell, in the order of the cells' first runs; ``repeats``: ``(campaign, cell id)`` or cell id
    -> the repeats the campaign planned (else the runs found)."""
    by_cell: dict[tuple, list[RunRow]] = {}
    for r in runs:  # a cell is one configuration of one campaign: two campaigns never pool their runs
        by_cell.setdefault((r.campaign, r.cell_id), []).append(r)
    repeats = repeats or {}
    out = [_cell(rs, max(len(rs), repeats.get(cid, repeats.get(cid[1], 0)))) for cid, rs in by_cell.items()]
    # speedup and efficiency against the 1x1 cell of the same suite, precision, xla, batch per device, variant
    # and launcher; where no 1x1 cell has the cell's launcher (a matrix that runs its multi-node cells under
    # another launcher), against the one 1x1 cell that differs in launcher alone (none when several do)
    ones = [c for c in out if c.nodes == 1 and c.gpus_per_node == 1]
    base = {_baseline_key(c): c for c in ones}
    any_launcher: dict[tuple, list[CellRow]] = {}
    for c in ones:
        any_launcher.setdefault(_baseline_key(c, launcher=False), []).append(c)
    for c in out:
        b = base.get(_baseline_key(c))
        if b is None:
            others = any_launcher.get(_baseline_key(c, launcher=False), [])
            b = others[0] if len(others) == 1 else None
        if b is not None:
            c.baseline = b.cell_id
            c.speedup = stats.speedup(c.median, b.median)
            c.efficiency = stats.efficiency(c.speedup, c.devices)
    return out
