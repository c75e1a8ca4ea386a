"""Accuracy runs (``[measure] mode = "accuracy"``; method.md, "Accuracy runs"): a run's evaluations, whether it
reached its target and when, the NOT_CONVERGED verdict, and the study's accuracy table.

A parser that reads evaluations puts :func:`extra`'s fields into ``RunResult.extra``: ``evals`` (each
evaluation: epoch, step, time, top1, top5 as fractions), ``top1``/``top5`` (the last evaluation's: the run's final
accuracy), ``epochs`` (run), ``epochs_planned``, ``target`` ({metric, value}), ``reached`` and
``time_to_target_s``: from the start of the first training step to the end of the first evaluation that reaches
the target, as MLPerf times a run (its clock starts with training and stops at the evaluation that reaches the
quality; evaluations on the way count).

The evaluation lines of the other suites' programs are read by :mod:`dlperf_slurm.parsing.evals` into the same
fields; their target is the campaign's (``[measure] target``, ``collect --from --target``), set by
:func:`apply_target` when a run is decided, as the built-in workload's own header gives its own.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from dlperf_slurm.model.cell import METRICS
from dlperf_slurm.model.status import Status

EVALS, TOP1, TOP5, EPOCHS, PLANNED, TARGET, REACHED, TTT, START = (
    "evals", "top1", "top5", "epochs", "epochs_planned", "target", "reached", "time_to_target_s", "first_step_time")
AUC, LFW = "auc", "lfw"  # a click-through model's AUC (W&D: HugeCTR), a face model's LFW verification accuracy
OTHER = {AUC: "AUC", LFW: "LFW"}  # the metrics besides top-1/top-5, and their columns: kept only where read


@dataclass(frozen=True)
class Evaluation:
    epoch: int | None
    step: int | None
    time: float | None  # unix time at the evaluation's end (None: the log gives no time)
    top1: float | None  # fractions
    top5: float | None
    auc: float | None = None  # area under the ROC curve (a click-through model's)
    lfw: float | None = None  # verification accuracy on LFW (a face model's: InsightFace)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def evaluation(event: Mapping[str, Any]) -> Evaluation | None:
    """The built-in workload's eval event as an Evaluation; None when its top1 is missing or not a fraction."""
    top1, top5 = _num(event.get("top1")), _num(event.get("top5"))
    if top1 is None or not 0 <= top1 <= 1 or (top5 is not None and not 0 <= top5 <= 1):
        return None
    epoch, step = event.get("epoch"), event.get("step")
    return Evaluation(epoch if isinstance(epoch, int) else None, step if isinstance(step, int) else None,
                      _num(event.get("time")), top1, top5)


def fmt(metric: str, value: float) -> str:
    """A metric's value as the tables print it: accuracies in percent, an AUC as the fraction it is."""
    return f"{value:.4f}" if metric == AUC else f"{value:.2%}"


def _target(target: Any) -> tuple[str, float] | None:
    if isinstance(target, Mapping) and target.get("metric") in METRICS and _num(target.get("value")):
        return str(target["metric"]), float(target["value"])
    return None


def meets(target: tuple[str, float] | None, e: Evaluation) -> bool:
    if target is None:
        return False
    got = getattr(e, target[0], None)
    return got is not None and got >= target[1]


def extra(evals: Sequence[Evaluation], *, first_step_time: float | None, epochs: Any = None,
          target: Any = None) -> dict[str, Any]:
    """The fields of ``RunResult.extra`` for a run's evaluations (see the module's docstring)."""
    tgt = _target(target)
    last = evals[-1] if evals else None
    hit = next((e for e in evals if meets(tgt, e)), None)
    ttt = (hit.time - first_step_time if hit is not None and hit.time is not None and first_step_time is not None
           and hit.time >= first_step_time else None)  # an excerpt that begins after the evaluation has no start
    others = [k for k in OTHER if any(getattr(e, k) is not None for e in evals)]
    return {EVALS: [{k: v for k, v in asdict(e).items() if k not in OTHER or k in others} for e in evals],
            TOP1: last.top1 if last else None, TOP5: last.top5 if last else None,
            **{k: getattr(last, k) if last else None for k in others},
            EPOCHS: max((e.epoch or 0 for e in evals), default=0) or (None if evals else 0),  # None: not named
            PLANNED: epochs if isinstance(epochs, int) else None,
            TARGET: {"metric": tgt[0], "value": tgt[1]} if tgt else None,
            REACHED: (hit is not None) if tgt else None, TTT: round(ttt, 3) if ttt is not None else None,
            START: first_step_time}


def apply_target(fields: dict[str, Any], target: Any, epochs: Any = None) -> None:
    """Set the campaign's ``target`` ({metric, value} or a :class:`dlperf_slurm.model.cell.Target`) and planned
    ``epochs`` on a run's ``RunResult.extra`` whose evaluations a suite's parser read from its program's own lines:
    whether and when it was reached. A target the log itself states (the built-in workload's header) stands; a
    log without evaluations gets the target too (an accuracy run that never evaluated is NOT_CONVERGED)."""
    if target is None or fields.get(TARGET):
        return
    if hasattr(target, "metric"):
        target = {"metric": target.metric, "value": target.value}
    evals = [Evaluation(e.get("epoch"), e.get("step"), _num(e.get("time")), _num(e.get("top1")), _num(e.get("top5")),
                        _num(e.get(AUC)), _num(e.get(LFW))) for e in fields.get(EVALS) or [] if isinstance(e, Mapping)]
    fields.update(extra(evals, first_step_time=_num(fields.get(START)), epochs=epochs, target=target))


def verdict(log: Any) -> tuple[Status, str] | None:
    """NOT_CONVERGED, with its reason, for a run (its parser's RunResult) whose log is OK but never reached its
    target; None otherwise (no target, reached, no accuracy run, or a log not OK). The caller
    (:func:`dlperf_slurm.outcome.decision.decide`, rows 14 and 3) asks only for a run whose exit says it ended well,
    or one
    of which nothing but its log is known (a ``collect --from`` tree)."""
    extra_ = log.extra if log.status == Status.OK and isinstance(log.extra, Mapping) else {}
    tgt = _target(extra_.get(TARGET))
    if tgt is None or extra_.get(REACHED) is not False:
        return None
    evals = [e for e in extra_.get(EVALS) or [] if isinstance(e, Mapping)]
    key = tgt[0]
    scored = [e for e in evals if _num(e.get(key)) is not None]  # the evaluations that give the target's metric
    planned = extra_.get(PLANNED)
    ran = f"{extra_.get(EPOCHS)} of {planned} epochs" if planned else f"{extra_.get(EPOCHS)} epochs"
    if evals and all(e.get("epoch") is None for e in evals):  # a program that names no epoch (tf_cnn_benchmarks)
        ran = f"{len(evals)} evaluations"
    if not scored:
        what = f"an evaluation of {key}" if evals else "an evaluation"
        return Status.NOT_CONVERGED, f"ended after {ran} without {what}; target {key} {fmt(key, tgt[1])}"
    best = max(scored, key=lambda e: e[key])
    at = (f"epoch {best['epoch']}" if best.get("epoch") is not None else f"step {best['step']}"
          if best.get("step") is not None else f"evaluation {scored.index(best) + 1}")
    return Status.NOT_CONVERGED, (f"ended after {ran} at {key} {fmt(key, scored[-1][key])}, short of the target "
                                  f"{fmt(key, tgt[1])} (best {fmt(key, best[key])} at {at})")


# ============================================================================================== the table


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
        top1 = [r.extra[TOP1] for r in ok if _num(r.extra.get(TOP1)) is not None]
        top5 = [r.extra[TOP5] for r in ok if _num(r.extra.get(TOP5)) is not None]
        other = {k: [r.extra[k] for r in ok if _num(r.extra.get(k)) is not None] for k in OTHER}
        ttt = [r.extra[TTT] for r in ok if _num(r.extra.get(TTT)) is not None]
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
            "epochs": _med([r.extra[EPOCHS] for r in ok if _num(r.extra.get(EPOCHS)) is not None]),
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
            ends = ", ".join(f"{run} (final {fmt(metric, v)})" if _num(v) is not None else run
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
