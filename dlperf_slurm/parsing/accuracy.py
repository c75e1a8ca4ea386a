"""Accuracy runs (``[measure] mode = "accuracy"``; method.md, "Accuracy runs"): a run's evaluations, whether it
reached its target and when, and the NOT_CONVERGED verdict (the study's
accuracy table is :mod:`dlperf_slurm.report.accuracy`'s).

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

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from dlperf_slurm.model.cell import METRICS
from dlperf_slurm.model.status import Status
from dlperf_slurm.words import plural

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


def as_number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def evaluation(event: Mapping[str, Any]) -> Evaluation | None:
    """The built-in workload's eval event as an Evaluation; None when its top1 is missing or not a fraction."""
    top1, top5 = as_number(event.get("top1")), as_number(event.get("top5"))
    if top1 is None or not 0 <= top1 <= 1 or (top5 is not None and not 0 <= top5 <= 1):
        return None
    epoch, step = event.get("epoch"), event.get("step")
    return Evaluation(epoch if isinstance(epoch, int) else None, step if isinstance(step, int) else None,
                      as_number(event.get("time")), top1, top5)


def fmt(metric: str, value: float) -> str:
    """A metric's value as the tables print it: accuracies in percent, an AUC as the fraction it is."""
    return f"{value:.4f}" if metric == AUC else f"{value:.2%}"


def _target(target: Any) -> tuple[str, float] | None:
    if isinstance(target, Mapping) and target.get("metric") in METRICS and as_number(target.get("value")):
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
    evals = [Evaluation(e.get("epoch"), e.get("step"), as_number(e.get("time")), as_number(e.get("top1")),
                        as_number(e.get("top5")), as_number(e.get(AUC)), as_number(e.get(LFW)))
             for e in fields.get(EVALS) or [] if isinstance(e, Mapping)]
    fields.update(extra(evals, first_step_time=as_number(fields.get(START)), epochs=epochs, target=target))


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
    scored = [e for e in evals if as_number(e.get(key)) is not None]  # the evaluations that give the target's metric
    planned = extra_.get(PLANNED)
    epochs = extra_.get(EPOCHS)
    ran = (f"{epochs} of {plural(planned, 'epoch')}" if planned
           else plural(epochs, "epoch") if isinstance(epochs, (int, float)) else "its epochs")
    if evals and all(e.get("epoch") is None for e in evals):  # a program that names no epoch (tf_cnn_benchmarks)
        ran = plural(len(evals), 'evaluation')
    if not scored:
        what = f"an evaluation of {key}" if evals else "an evaluation"
        return Status.NOT_CONVERGED, f"ended after {ran} without {what}; target {key} {fmt(key, tgt[1])}"
    best = max(scored, key=lambda e: e[key])
    at = (f"epoch {best['epoch']}" if best.get("epoch") is not None else f"step {best['step']}"
          if best.get("step") is not None else f"evaluation {scored.index(best) + 1}")
    return Status.NOT_CONVERGED, (f"ended after {ran} at {key} {fmt(key, scored[-1][key])}, short of the target "
                                  f"{fmt(key, tgt[1])} (best {fmt(key, best[key])} at {at})")


# ============================================================================================== the table










