"""Accuracy runs (``[measure] mode = "accuracy"``; method.md, "Accuracy runs"): a run's evaluations, whether it
reached its target and when, the NOT_CONVERGED verdict, and the study's accuracy table.

A parser that reads evaluations puts :func:`extra`'s fields into ``RunResult.extra``: ``evals`` (each
evaluation: epoch, step, time, top1, top5 as fractions), ``top1``/``top5`` (the last evaluation's: the run's final
accuracy), ``epochs`` (run), ``epochs_planned``, ``target`` ({metric, value}), ``reached`` and
``time_to_target_s``: from the start of the first training step to the end of the first evaluation that reaches
the target, as MLPerf times a run (its clock starts with training and stops at the evaluation that reaches the
quality; evaluations on the way count).

Evaluation lines of other programs: :func:`torchvision_line` reads the torchvision references' and
pytorch/examples' `` * Acc@1 76.130 Acc@5 92.862`` (percents).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from dlperf_slurm.model import Status

EVALS, TOP1, TOP5, EPOCHS, PLANNED, TARGET, REACHED, TTT = (
    "evals", "top1", "top5", "epochs", "epochs_planned", "target", "reached", "time_to_target_s")


@dataclass(frozen=True)
class Evaluation:
    epoch: int | None
    step: int | None
    time: float | None  # unix time at the evaluation's end (None: the log gives no time)
    top1: float  # fractions
    top5: float | None


_NUM = r"[-+]?\d+(?:\.\d+)?"
_TV = re.compile(r"^\s*\*\s+Acc@1\s+(" + _NUM + r")\s+Acc@5\s+(" + _NUM + r")\s*$")


def torchvision_line(text: str) -> Evaluation | None:
    """`` * Acc@1 76.130 Acc@5 92.862`` (torchvision references, pytorch/examples imagenet/main.py: percents) as an
    Evaluation with fractions; None for any other line."""
    m = _TV.match(text)
    if not m:
        return None
    top1, top5 = float(m.group(1)) / 100, float(m.group(2)) / 100
    if not (0 <= top1 <= 1 and 0 <= top5 <= 1):
        return None
    return Evaluation(None, None, None, top1, top5)


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


def _target(target: Any) -> tuple[str, float] | None:
    if isinstance(target, Mapping) and target.get("metric") in ("top1", "top5") and _num(target.get("value")):
        return str(target["metric"]), float(target["value"])
    return None


def meets(target: tuple[str, float] | None, e: Evaluation) -> bool:
    if target is None:
        return False
    got = e.top1 if target[0] == "top1" else e.top5
    return got is not None and got >= target[1]


def extra(evals: Sequence[Evaluation], *, first_step_time: float | None, epochs: Any = None,
          target: Any = None) -> dict[str, Any]:
    """The fields of ``RunResult.extra`` for a run's evaluations (see the module's docstring)."""
    tgt = _target(target)
    last = evals[-1] if evals else None
    hit = next((e for e in evals if meets(tgt, e)), None)
    ttt = (hit.time - first_step_time if hit is not None and hit.time is not None and first_step_time is not None
           else None)
    return {EVALS: [asdict(e) for e in evals], TOP1: last.top1 if last else None, TOP5: last.top5 if last else None,
            EPOCHS: max((e.epoch or 0 for e in evals), default=0) or len(evals),
            PLANNED: epochs if isinstance(epochs, int) else None,
            TARGET: {"metric": tgt[0], "value": tgt[1]} if tgt else None,
            REACHED: (hit is not None) if tgt else None, TTT: round(ttt, 3) if ttt is not None else None}


def verdict(log: Any) -> tuple[Status, str] | None:
    """NOT_CONVERGED, with its reason, for a run (its parser's RunResult) whose log is OK but never reached its
    target; None otherwise (no target, reached, no accuracy run, or a log not OK). The caller
    (:func:`dlperf_slurm.outcome.decide`, row 14) asks only for a run whose exit says it ended well."""
    extra_ = log.extra if log.status == Status.OK and isinstance(log.extra, Mapping) else {}
    tgt = _target(extra_.get(TARGET))
    if tgt is None or extra_.get(REACHED) is not False:
        return None
    evals = [e for e in extra_.get(EVALS) or [] if isinstance(e, Mapping)]
    key = tgt[0]
    scored = [e for e in evals if _num(e.get(key)) is not None]  # the evaluations that give the target's metric
    planned = extra_.get(PLANNED)
    ran = f"{extra_.get(EPOCHS)} of {planned} epochs" if planned else f"{extra_.get(EPOCHS)} epochs"
    if not scored:
        what = f"an evaluation of {key}" if evals else "an evaluation"
        return Status.NOT_CONVERGED, f"ended after {ran} without {what}; target {key} {tgt[1]:.2%}"
    best = max(scored, key=lambda e: e[key])
    return Status.NOT_CONVERGED, (f"ended after {ran} at {key} {scored[-1][key]:.2%}, short of the target "
                                  f"{tgt[1]:.2%} (best {best[key]:.2%} at epoch {best.get('epoch')})")


# ============================================================================================== the table


def _spread(values: Sequence[float]) -> str:
    return f" ({min(values):.2%}–{max(values):.2%})" if len(values) > 1 else ""


def _med(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def table(cells: Sequence[Any], runs: Iterable[Any]) -> list[dict[str, Any]]:
    """The study's accuracy table, one row per cell that ran accuracy runs: GPUs, batch per GPU and global,
    processing rate (the cell's median), final top-1 and top-5 (median, min and max over the OK runs: converged
    or without a target), time to target and epochs (medians over the runs that reached it / OK runs); a
    NOT_CONVERGED run is named, never in the medians."""
    by_cell: dict[str, list[Any]] = {}
    for r in runs:
        if isinstance(r.extra, Mapping) and (r.extra.get(EVALS) or r.extra.get(PLANNED)):
            by_cell.setdefault(r.cell_id, []).append(r)
    out = []
    for c in cells:
        rs = by_cell.get(c.cell_id)
        if not rs:
            continue
        ok = [r for r in rs if r.status == Status.OK]
        top1 = [r.extra[TOP1] for r in ok if _num(r.extra.get(TOP1)) is not None]
        top5 = [r.extra[TOP5] for r in ok if _num(r.extra.get(TOP5)) is not None]
        ttt = [r.extra[TTT] for r in ok if _num(r.extra.get(TTT)) is not None]
        target = next((r.extra.get(TARGET) for r in rs if r.extra.get(TARGET)), None)
        out.append({
            "cell_id": c.cell_id, "suite": c.suite, "gpus": c.devices, "shape": c.shape, "batch_size": c.batch_size,
            "global_batch": c.global_batch, "throughput": c.median, "unit": c.unit,
            "top1": _med(top1), "top1_min": min(top1, default=None), "top1_max": max(top1, default=None),
            "top5": _med(top5), "top5_min": min(top5, default=None), "top5_max": max(top5, default=None),
            "target": target, "time_to_target_s": _med(ttt), "epochs": _med([r.extra.get(EPOCHS) or 0 for r in ok]),
            "n_ok": len(ok), "n": len(rs),
            "not_converged": {r.run: r.extra.get(TOP1) for r in rs if r.status == Status.NOT_CONVERGED},
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
        if row[key] is None:
            return ""
        vals = [row[f"{key}_min"], row[f"{key}_max"]] if row[f"{key}_min"] != row[f"{key}_max"] else [row[key]]
        return f"{row[key]:.2%}" + _spread(vals)

    body = []
    for r in rows:
        tgt = r["target"]
        ttt = f"{r['time_to_target_s']:.1f} s" if r["time_to_target_s"] is not None else ("not reached" if tgt else "")
        body.append([str(r["gpus"]), str(r["batch_size"]), str(r["global_batch"]),
                     f"{r['throughput']:.1f} {r['unit']}" if r["throughput"] else "", pct(r, "top1"), pct(r, "top5"),
                     f"{tgt['metric']} {tgt['value']:.2%}" if tgt else "", ttt,
                     f"{r['epochs']:g}" if r["n_ok"] else "", f"{r['n_ok']}/{r['n']}"])
    lines = ["## Accuracy (trained to the end or to the target)", "",
             "Final top-1 and top-5: the last evaluation of each OK run, median (min–max) over them; time to target: "
             "from the first training step's start to the end of the first evaluation that reaches it (MLPerf's "
             "clock), median; processing rate: the first epoch's steps after the warm-up. A run that ended without "
             "reaching its target is NOT_CONVERGED and never in the medians.", "",
             tabulate(body, headers=["GPUs", "batch/GPU", "global batch", "processing rate", "top-1", "top-5",
                                     "target", "time to target", "epochs", "OK runs"],
                      tablefmt="github", disable_numparse=True), ""]
    for r in rows:
        if r["not_converged"]:
            ends = ", ".join(f"{run} (final {top1:.2%})" if _num(top1) is not None else run
                             for run, top1 in r["not_converged"].items())
            lines.append(f"- `{r['cell_id']}` NOT_CONVERGED: {ends}")
        for run, st in r["failed"].items():
            lines.append(f"- `{r['cell_id']}` {st}: {run}")
    return lines + ([""] if lines[-1] else [])
