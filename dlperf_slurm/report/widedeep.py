"""DLPerf's Wide & Deep table (reports/WideDeepLearning): per ``deep_vocab_size``, each framework's latency per
iteration (ms) and GPU memory (MiB) side by side, the memory ratio of the first framework to the second, and the
cell's failure (``OOM``) where it has no OK run. One table per device shape, global batch, embedding vec size and
hidden units. A section of the markdown summary only when W&D cells (model ``wdl``) are present.

Latency is the cell's median over its OK runs; memory is the cell's GPU 0 figure (the largest over its OK runs: DLPerf
sampled device 0 and took the median of 3 runs), else its peak over every GPU.
"""

from __future__ import annotations

from typing import Any, Sequence

from dlperf_slurm.model.rows import CellRow

MODEL = "wdl"
ORDER = ("oneflow", "hugectr")  # DLPerf's column order; other frameworks follow, sorted


def params(variant: str) -> dict[str, str]:
    """A cell row's ``variant`` ("k=v, k=v") as a dict."""
    out: dict[str, str] = {}
    for part in (variant or "").split(", "):
        k, sep, v = part.partition("=")
        if sep:
            out[k] = v
    return out


def _defaults(suite: str) -> dict[str, str]:
    """The suite's axis defaults as text (a cell's id and variant leave out the axes at their default)."""
    from dlperf_slurm import suites  # noqa: PLC0415 (the registry loads every suite module)

    try:
        return {k: str(v) for k, v in suites.get(suite).axis_defaults.items()}
    except KeyError:
        return {}


def _mem(c: CellRow) -> float | None:
    return c.mem_gpu0_mib if c.mem_gpu0_mib is not None else c.mem_peak_mib


def _failure(c: CellRow | None) -> str:
    if c is None:
        return ""
    return c.display or str(c.status)


def tables(cells: Sequence[CellRow]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) per group of W&D cells; [] without any."""
    groups: dict[tuple, dict[tuple[int, str], CellRow]] = {}
    frameworks: set[str] = set()
    for c in cells:
        if c.model != MODEL:
            continue
        p = {**_defaults(c.suite), **params(c.variant)}
        key = (c.nodes, c.gpus_per_node, c.global_batch, p.get("embedding_vec_size", ""),
               p.get("hidden_units_num", ""), c.precision)
        try:
            vocab = int(p.get("deep_vocab_size", "0"))
        except ValueError:
            continue
        groups.setdefault(key, {})[(vocab, c.framework)] = c
        frameworks.add(c.framework)
    fws = [f for f in ORDER if f in frameworks] + sorted(frameworks - set(ORDER))
    out = []
    for key in sorted(groups):
        nodes, gpn, gb, vec, hidden, prec = key
        by = groups[key]
        headers = ["deep_vocab_size"] + [f"{f} latency (ms)" for f in fws] + [f"{f} GPU mem (MiB)" for f in fws]
        ratio = len(fws) == 2
        if ratio:
            headers.append(f"mem ratio ({fws[0]} / {fws[1]})")
        rows = []
        for vocab in sorted({v for v, _ in by}):
            row: list[str] = [str(vocab)]
            lat, mem = [], []
            for f in fws:
                cell = by.get((vocab, f))
                if cell is None or cell.n_ok <= 0:  # no OK run: the failure (or nothing) in both columns
                    lat.append(_failure(cell))
                    mem.append(_failure(cell))
                    continue
                lat.append(f"{cell.latency_ms:.3f}" if cell.latency_ms is not None else _failure(cell))
                m = _mem(cell)
                mem.append(f"{m:,.0f}" if m is not None else "")
            row += lat + mem
            if ratio:
                a, b = (by.get((vocab, f)) for f in fws)
                ma = _mem(a) if a is not None and a.n_ok else None
                mb = _mem(b) if b is not None and b.n_ok else None
                row.append(f"{100.0 * ma / mb:.0f}%" if ma is not None and mb else "-")
            rows.append(row)
        title = (f"Wide & Deep, {nodes}n{gpn}g, global batch {gb}, embedding vec size {vec or '?'}, hidden units "
                 f"{hidden or '?'}, {prec}")
        out.append((title, headers, rows))
    return out


def markdown(cells: Sequence[CellRow]) -> list[str]:
    """The summary's W&D section (lines), or [] without W&D cells."""
    from tabulate import tabulate

    found = tables(cells)
    if not found:
        return []
    lines = ["## Wide & Deep: latency and GPU memory per deep_vocab_size (DLPerf's W&D table)", "",
             "Latency: median ms per iteration over the OK runs; GPU memory: NVML \"used\" of GPU 0 (largest of the "
             "OK runs), MiB; a cell without an OK run shows its failure (OOM).", ""]
    for title, headers, rows in found:
        lines += [f"**{title}**", "", tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]
    return lines


def as_dicts(cells: Sequence[CellRow]) -> list[dict[str, Any]]:
    """The tables as plain data (title, headers, rows)."""
    return [{"title": t, "headers": h, "rows": r} for t, h, r in tables(cells)]
