"""The tables of a summary, as text: cells grouped as DLPerf did (per suite, precision, XLA, batch per device
and variant, a row per device shape), each group's table, and the cross-suite table of DLPerf's README.

A cell without an OK run never shows a number: it reads its dominant failure (``OOM``, ``TIMEOUT``) or its
progress (``pending 3/7``). Figures are rounded (2 decimals) only here and in :mod:`dlperf_slurm.report.writers`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

from dlperf_slurm import stats
from dlperf_slurm.model.rows import CellRow, RunRow, per_joule_unit
from dlperf_slurm.model.status import Status

PREC_ORDER = ("fp32", "tf32", "amp", "fp16", "bf16")
TINY = "tiny — not a real result"


def xla_name(suite: str) -> str:
    try:
        from dlperf_slurm import suites

        return suites.get(suite).xla_name
    except KeyError:
        return "XLA"


def shared_suites(cells: Sequence[CellRow]) -> set[str]:
    """Suites that several campaigns of one summary hold: their tables, rows and lines name the campaign."""
    by_suite: dict[str, set] = {}
    for c in cells:
        by_suite.setdefault(c.suite, set()).add(c.campaign or "")
    return {s for s, camps in by_suite.items() if len(camps) > 1}


def _prec_key(p: str) -> tuple:
    return (PREC_ORDER.index(p) if p in PREC_ORDER else len(PREC_ORDER), p)


def groups(cells: Sequence[CellRow]) -> list[tuple[tuple, list[CellRow]]]:
    """Cells by (suite, precision, xla, batch per device, launcher, variant), shapes sorted by GPUs then nodes."""
    out: dict[tuple, list[CellRow]] = {}
    for c in cells:
        out.setdefault((c.suite, c.precision, bool(c.xla), c.batch_size, c.launcher or "",
                        c.variant or "", c.campaign or ""), []).append(c)
    keys = sorted(out, key=lambda k: (k[0], k[6], _prec_key(k[1]), k[2], k[3], k[4], k[5]))
    return [(k, sorted(out[k], key=lambda c: (c.devices, c.nodes))) for k in keys]


def group_title(key: tuple, cells: Sequence[CellRow], launchers: bool, shared: set[str]) -> str:
    suite, prec, xla, batch, launcher, variant, campaign = key
    bits = [suite, prec, f"{xla_name(suite)} {'on' if xla else 'off'}", f"batch {batch}/GPU"]
    if suite in shared:
        bits.append(f"campaign {campaign}")
    if launchers and launcher:
        bits.append(f"launcher {launcher}")
    if variant:
        bits.append(variant)
    title = " · ".join(bits)
    if any(c.tiny for c in cells):
        title += f" — {TINY}"
    return title


def value_text(c: CellRow, key: str = "median") -> str:
    """A cell's figure, or its state when it has no OK run (never a number then)."""
    value = getattr(c, key)
    if c.n_ok == 0 or value is None:
        return c.display or c.status
    return stats.fmt(value)


def _mem_text(c: CellRow) -> str:
    if c.mem_peak_mib is None and c.mem_gpu0_mib is None:
        return "—"
    peak = f"{c.mem_peak_mib:.0f}" if c.mem_peak_mib is not None else "—"
    gpu0 = f"{c.mem_gpu0_mib:.0f}" if c.mem_gpu0_mib is not None else "—"
    return f"{peak} / {gpu0}"


def _spread_text(c: CellRow) -> str:
    if c.n_ok == 0:
        return ""
    if c.n_ok == 1:
        return "one run"
    return f"{stats.fmt(c.min)}–{stats.fmt(c.max)}, CV {stats.fmt(c.cv, percent=True, digits=2)}"


def _ci_text(c: CellRow) -> str:
    """The median's interval, with its coverage when fewer runs than 6 cannot reach 95 %."""
    if c.ci_low is None or c.ci_high is None:
        return ""
    text = f"{stats.fmt(c.ci_low)}–{stats.fmt(c.ci_high)}"
    if c.ci_coverage is not None and c.ci_coverage < stats.CONFIDENCE - 1e-12:
        text += f" ({c.ci_coverage * 100:.0f}% only)"
    return text


def _flags_text(c: CellRow) -> str:
    words = {"few_ok": "few OK", "high_cv": "CV>5%", "tiny": "tiny", "mfu_over_100": "MFU>100%",
             "no_peak": "no datasheet peak"}
    out = [words.get(f, f) for f in c.flags if c.n_ok or f != "few_ok"]  # a failed cell says why already
    if c.searched:
        out.insert(0, c.searched)
    if c.n_ok and c.status == Status.OK:
        other = {k: v for k, v in c.statuses.items() if k != Status.OK}
        if other:
            out.append(", ".join(f"{v} {k}" for k, v in sorted(other.items())))
    return "; ".join(out)


def group_table(cells: Sequence[CellRow]) -> tuple[list[str], list[list[str]]]:
    unit = next((c.unit for c in cells if c.unit), "samples/s")
    headers = ["shape", "GPUs", f"throughput ({unit}, median)", "speedup", "efficiency", "latency (ms)",
               "GPU mem MiB (peak / GPU0)", "spread (min–max, CV)", "median 95% CI", "OK/n", "flags"]
    rate = any(c.tflops_per_gpu is not None for c in cells)
    if rate:
        headers[7:7] = ["TFLOP/s per GPU (MFU: of peak / of measured ceiling)"]
    energy = any(c.samples_per_joule is not None or c.power_w_per_gpu is not None for c in cells)
    if energy:
        headers[7 + rate:7 + rate] = [f"energy ({per_joule_unit(unit)}, 95% CI; W/GPU; basis)"]
    layout = any(c.layout for c in cells)
    if layout:
        headers[2:2] = ["layout"]
    rows = []
    for c in cells:
        ok = c.n_ok > 0
        row = [c.shape, str(c.devices), value_text(c), stats.fmt(c.speedup) if ok else "",
               stats.fmt(c.efficiency, percent=True, digits=2) if ok else "",
               stats.fmt(c.latency_ms) if ok else "", _mem_text(c) if ok else "", _spread_text(c), _ci_text(c),
               f"{c.n_ok}/{c.n}", _flags_text(c)]
        if rate:
            row[7:7] = [_rate_text(c) if ok else ""]
        if energy:
            row[7 + rate:7 + rate] = [_energy_text(c) if ok else ""]
        if layout:  # beside the shape: what the GPUs were split into
            row[2:2] = [c.layout]
        rows.append(row)
    return headers, rows


def _energy_text(c: CellRow) -> str:
    """Samples (tokens) per joule with its interval, the median W per GPU, and what the figures came from."""
    bits = []
    if c.samples_per_joule is not None:
        ci = ""
        if c.samples_per_joule_ci_low is not None and c.samples_per_joule_ci_high is not None:
            ci = f" ({c.samples_per_joule_ci_low:.4g}–{c.samples_per_joule_ci_high:.4g})"
        bits.append(f"{c.samples_per_joule:.4g}{ci}")
    if c.power_w_per_gpu is not None:
        bits.append(f"{c.power_w_per_gpu:.0f} W")
    if c.energy_basis:
        bits.append(c.energy_basis)
    return "; ".join(bits)


def _rate_text(c: CellRow) -> str:
    """TFLOP/s per GPU, then MFU against the datasheet peak and against the measured ceiling; an MFU above
    100 % is not printed (a wrong FLOP count or peak, not a result), nor one without a peak."""
    if c.tflops_per_gpu is None:
        return ""
    text = f"{c.tflops_per_gpu:.3g}"
    if "mfu_over_100" in c.flags:
        return text + " (MFU > 100%: FLOPs or peak wrong)"
    of_peak = f"{c.mfu * 100:.1f}%" if c.mfu is not None else "no peak"
    of_ceiling = f"{c.mfu_ceiling * 100:.1f}% of {c.ceiling_tflops:.3g}" if c.mfu_ceiling is not None else "—"
    return f"{text} ({of_peak} / {of_ceiling})"


def cross_suite(cells: Sequence[CellRow]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per model, DLPerf's README table: rows = frameworks, columns = throughput and speedup per precision (and
    XLA) at each framework's largest shape, with the batch per GPU that gave the best median there."""
    shared = shared_suites(cells)
    out = []
    by_model: dict[str, list[CellRow]] = {}
    for c in cells:
        by_model.setdefault(c.model, []).append(c)
    for model in sorted(by_model):
        mc = by_model[model]
        cols = sorted({(c.precision, bool(c.xla)) for c in mc}, key=lambda k: (_prec_key(k[0]), k[1]))
        headers = ["framework", "shape"]
        for prec, xla in cols:
            label = prec.upper() + (f"+{xla_name(mc[0].suite).replace('torch.compile', 'compile')}" if xla else "")
            headers += [f"{label} throughput", "speedup"]
        rows = []
        def rowkey(c: CellRow) -> tuple[str, str]:
            return c.suite, c.campaign or ""

        for (suite, camp), group in itertools.groupby(sorted(mc, key=rowkey), key=rowkey):
            sc = list(group)
            if suite in shared:
                suite = f"{suite} ({camp})"
            plain = [c for c in sc if not c.variant] or sc
            big = max((c.devices, -c.nodes) for c in plain)
            at = [c for c in plain if (c.devices, -c.nodes) == big]
            row = [suite, at[0].shape]
            for prec, xla in cols:
                cand = [c for c in at if c.precision == prec and bool(c.xla) == xla]
                if not cand:
                    row += ["", ""]
                    continue
                ok = [(c.median, c) for c in cand if c.n_ok and c.median is not None]
                best = max(ok, key=lambda m_c: m_c[0])[1] if ok else max(cand, key=lambda c: c.batch_size)
                txt = value_text(best) + f" (b{best.batch_size})"
                if best.tiny:
                    txt += " (tiny)"
                row += [txt, stats.fmt(best.speedup) if ok else ""]
            rows.append(row)
        out.append((model, headers, rows))
    return out


def setup_study(cells: Sequence[CellRow]) -> list[tuple[str, list[str], list[list[str]]]]:
    """A set-up study's table (the DDL network-scaling study's shape): per suite, precision, XLA, batch and the
    rest of the variant, rows = GPU counts, columns = the ``setup`` values, each cell the median throughput and
    the scaling efficiency against the same set-up's smallest shape (per GPU)."""
    studies: dict[tuple, dict[tuple[str, int], CellRow]] = {}
    for c in cells:
        parts = [p for p in (c.variant or "").split(", ") if p]
        setup = next((p[len("setup="):] for p in parts if p.startswith("setup=")), None)
        if setup is None:
            continue
        rest = ", ".join(p for p in parts if not p.startswith("setup="))
        key = (c.suite, c.precision, bool(c.xla), c.batch_size, rest, c.campaign or "")
        studies.setdefault(key, {})[(setup, c.devices)] = c
    out = []
    for (suite, prec, xla, batch, rest, _camp), by in sorted(studies.items()):
        setups = list(dict.fromkeys(s for s, _ in by))
        gpus = sorted({d for _, d in by})
        small = {s: min((d for t, d in by if t == s and by[(t, d)].median), default=None) for s in setups}
        rows = []
        for d in gpus:
            row = [str(d)]
            for s in setups:
                cell = by.get((s, d))
                if cell is None:
                    row.append("")
                    continue
                text = value_text(cell)
                fewest = small[s]
                b = by.get((s, fewest)) if fewest else None
                if fewest and b is not None and b.median and cell.n_ok and cell.median:
                    text += f" ({stats.fmt((cell.median / d) / (b.median / fewest), percent=True, digits=2)})"
                row.append(text)
            rows.append(row)
        title = " · ".join(x for x in (suite, prec, f"{xla_name(suite)} {'on' if xla else 'off'}",
                                       f"batch {batch}/GPU", rest) if x)
        unit = next((c.unit for c in by.values() if c.unit), "samples/s")
        out.append((title, ["GPUs"] + [f"{s}: {unit} (efficiency vs its fewest GPUs)" for s in setups], rows))
    return out


def counts_text(runs: Sequence[RunRow]) -> str:
    c = Counter(r.status for r in runs)
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


# ============================================================================================ terminal
