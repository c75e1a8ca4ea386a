"""The study's accuracy table (method.md, "Accuracy runs"): per cell that ran accuracy runs, its rate, final
top-1/top-5 (or its other metric), time to target and epochs, in the summary's markdown (:func:`markdown`) and the
cells CSV's columns (:func:`csv_columns`). What a run's log says of its evaluations is
:mod:`dlperf_slurm.parsing.accuracy`'s."""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping, Sequence

from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing.accuracy import (
    EPOCHS,
    EVALS,
    OTHER,
    PLANNED,
    REACHED,
    TARGET,
    TOP1,
    TOP5,
    TTT,
    as_number,
    fmt,
)


def _med(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def table(cells: Sequence[Any], runs: Iterable[Any]) -> list[dict[str, Any]]:
    """The study's accuracy table, one row per cell that ran accuracy runs: GPUs, batch per GPU and global,
    processing rate (the cell's median), final top-1 and top-5 (median, min and max over the OK runs: converged
    or without a target), time to target and epochs (medians over the runs that reached it / OK runs); a
    NOT_CONVERGED run is named, never in the medians."""
    by_cell: dict[str, list[Any]] = {}
    for r in runs:
        if isinstance(r.extra, Mapping) and (r.extra.get(EVALS) or r.extra.get(PLANNED) or r.extra.get(TARGET)):
            by_cell.setdefault(r.cell_id, []).append(r)
    out = []
    for c in cells:
        rs = by_cell.get(c.cell_id)
        if not rs:
            continue
        ok = [r for r in rs if r.status == Status.OK]
        top1 = [r.extra[TOP1] for r in ok if as_number(r.extra.get(TOP1)) is not None]
        top5 = [r.extra[TOP5] for r in ok if as_number(r.extra.get(TOP5)) is not None]
        other = {k: [r.extra[k] for r in ok if as_number(r.extra.get(k)) is not None] for k in OTHER}
        ttt = [r.extra[TTT] for r in ok if as_number(r.extra.get(TTT)) is not None]
        target = next((r.extra.get(TARGET) for r in rs if r.extra.get(TARGET)), None)
        out.append({
            "cell_id": c.cell_id, "suite": c.suite, "gpus": c.devices, "shape": c.shape, "batch_size": c.batch_size,
            "global_batch": c.global_batch, "throughput": c.median, "unit": c.unit,
            "top1": _med(top1), "top1_min": min(top1, default=None), "top1_max": max(top1, default=None),
            "top5": _med(top5), "top5_min": min(top5, default=None), "top5_max": max(top5, default=None),
            **{f: v for k, vs in other.items() if vs
               for f, v in ((k, _med(vs)), (f"{k}_min", min(vs)), (f"{k}_max", max(vs)))},
            "target": target, "time_to_target_s": _med(ttt),
            "reached": any(r.extra.get(REACHED) for r in ok),
            "epochs": _med([r.extra[EPOCHS] for r in ok if as_number(r.extra.get(EPOCHS)) is not None]),
            "n_ok": len(ok), "n": len(rs),
            "not_converged": {r.run: r.extra.get((target or {}).get("metric") or TOP1) for r in rs
                              if r.status == Status.NOT_CONVERGED},
            "failed": {r.run: str(r.status) for r in rs if r.status not in (Status.OK, Status.NOT_CONVERGED)},
        })
    return out


def markdown(cells: Sequence[Any], runs: Sequence[Any]) -> list[str]:
    """The summary's accuracy section (lines), or [] without accuracy runs."""
    from tabulate import tabulate

    rows = table(cells, runs)
    if not rows:
        return []

    def pct(row: Mapping[str, Any], key: str) -> str:
        if row.get(key) is None:
            return ""
        lo, hi = row[f"{key}_min"], row[f"{key}_max"]
        return fmt(key, row[key]) + (f" ({fmt(key, lo)}–{fmt(key, hi)})" if lo != hi else "")

    others = [k for k in OTHER if any(r.get(k) is not None for r in rows)]  # AUC, LFW: a column each where read

    body = []
    for r in rows:
        tgt = r["target"]
        ttt = (f"{r['time_to_target_s']:.1f} s" if r["time_to_target_s"] is not None
               else "reached (not timed)" if tgt and r["reached"] else "not reached" if tgt else "")
        body.append([str(r["gpus"]), str(r["batch_size"]), str(r["global_batch"]),
                     f"{r['throughput']:.1f} {r['unit']}" if r["throughput"] else "", pct(r, "top1"), pct(r, "top5"),
                     *(pct(r, k) for k in others), f"{tgt['metric']} {fmt(tgt['metric'], tgt['value'])}"
                     if tgt else "", ttt,
                     f"{r['epochs']:g}" if r["epochs"] is not None else "", f"{r['n_ok']}/{r['n']}"])
    lines = ["## Accuracy (trained to the end or to the target)", "",
             "Final top-1 and top-5: the last evaluation of each OK run, median (min–max) over them; time to target: "
             "from the first training step's start to the end of the first evaluation that reaches it (MLPerf's "
             "clock), median; processing rate: the first epoch's steps after the warm-up. A run that ended without "
             "reaching its target is NOT_CONVERGED and never in the medians.", "",
             tabulate(body, headers=["GPUs", "batch/GPU", "global batch", "processing rate", "top-1", "top-5",
                                     *(OTHER[k] for k in others), "target", "time to target", "epochs", "OK runs"],
                      tablefmt="github", disable_numparse=True), ""]
    for r in rows:
        if r["not_converged"]:
            metric = (r["target"] or {}).get("metric") or TOP1
            ends = ", ".join(f"{run} (final {fmt(metric, v)})" if as_number(v) is not None else run
                             for run, v in r["not_converged"].items())
            lines.append(f"- `{r['cell_id']}` NOT_CONVERGED: {ends}")
        for run, st in r["failed"].items():
            lines.append(f"- `{r['cell_id']}` {st}: {run}")
    return lines + ([""] if lines[-1] else [])


#: the accuracy table's columns the cells CSV carries (after the cell's own), for pandas: final top-1/top-5 (median,
#: min, max over the OK runs, fractions), the target, time to target and epochs (medians), runs that did not converge
CSV_COLUMNS = ("top1", "top1_min", "top1_max", "top5", "top5_min", "top5_max", "target_metric", "target_value",
               "time_to_target_s", "reached", "epochs", "n_not_converged")


def csv_columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Cell id -> :data:`CSV_COLUMNS` (and AUC/LFW where read) from :func:`table`'s rows; {} without accuracy runs."""
    out = {}
    for r in rows:
        target = r["target"] if isinstance(r.get("target"), Mapping) else {}
        cols = {**r, "target_metric": target.get("metric"), "target_value": target.get("value"),
                "n_not_converged": len(r.get("not_converged") or {})}
        names = [*CSV_COLUMNS, *(f for k in OTHER.values() for f in (k, f"{k}_min", f"{k}_max") if f in r)]
        out[str(r["cell_id"])] = {k: cols.get(k) for k in names}
    return out


