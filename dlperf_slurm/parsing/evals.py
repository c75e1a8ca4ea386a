"""The evaluation lines the suites' programs print (accuracy on the held-out set), as a table of line formats, one
per program generation, each with the real log it was read from (tests/fixtures/real, ``evaluated`` in SOURCE.toml).

A suite's parser names the formats its program prints (``Suite.evaluations``) and makes one :class:`Reader` per
log: :meth:`Reader.read` takes a line's text (True: an evaluation line, consumed), :attr:`Reader.needles` go into its
Scanner's needles (every such line holds one, so the block path delivers them), and :meth:`Reader.extra` gives the
fields of ``RunResult.extra`` that the built-in workload's eval events give
(:func:`dlperf_slurm.parsing.accuracy.extra`):
the accuracy table and the target check read them alike.

Each evaluation is an :class:`dlperf_slurm.parsing.accuracy.Evaluation` with fractions and a 1-based epoch (a program
that
counts epochs from 0 has 1 added), the step where the program says it, and the time where its line carries one.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dlperf_slurm.parsing.accuracy import Evaluation, extra

_N = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"


@dataclass(frozen=True)
class Format:
    """One program generation's evaluation line: ``needle`` is in every such line, ``pattern`` reads it and ``read``
    turns its match into an Evaluation (None: not one, e.g. a value out of range)."""

    program: str  # the program and versions that print it (docs/suites.md)
    example: str  # the line as the real log prints it
    needle: str
    pattern: re.Pattern[str]
    read: Callable[[re.Match[str]], Evaluation | None]
    # the time of a training line of the same program on its evaluations' clock (None: its lines carry none): the
    # start of a time to target
    stamp: Callable[[str], float | None] | None = None


def _frac(*values: float | None) -> bool:
    return all(v is None or 0 <= v <= 1 for v in values)


def _ev(epoch: int | None, top1: float | None, top5: float | None, step: int | None = None,
        t: float | None = None) -> Evaluation | None:
    if not _frac(top1, top5):
        return None
    return Evaluation(epoch, step, t, round(top1, 10) if top1 is not None else None,
                      round(top5, 10) if top5 is not None else None)


def _tf_cnn(m: re.Match[str]) -> Evaluation | None:
    return _ev(None, float(m.group(1)), float(m.group(2)))


def _gluoncv(m: re.Match[str]) -> Evaluation | None:  # errors, epochs from 0
    return _ev(int(m.group(1)) + 1, 1 - float(m.group(2)), 1 - float(m.group(3)))


def _clock(stamp: str) -> float | None:
    """``2022/08/05 01:28:59`` (PaddleClas' logger, the node's local clock) as seconds, read as UTC: only the
    differences between a log's own stamps are used."""
    try:
        return float(calendar.timegm(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")))
    except ValueError:
        return None


_PPCLS_STAMP = re.compile(r"^\[(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)\] ")
_UNIX_STAMP = re.compile(r" (\d{10}\.\d+)\s*$")
_MODELS_STAMP = re.compile(r"\| (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\s*$")


def _ppcls_stamp(text: str) -> float | None:
    m = _PPCLS_STAMP.match(text)
    return _clock(m.group(1)) if m else None


def _unix_stamp(text: str) -> float | None:  # OneFlow-Benchmark's stamped logger: time.time() ends the line
    m = _UNIX_STAMP.search(text)
    return float(m.group(1)) if m else None


def _models_stamp(text: str) -> float | None:
    m = _MODELS_STAMP.search(text)
    return _iso(m.group(1)) if m else None


def _paddleclas(m: re.Match[str]) -> Evaluation | None:  # epochs from 1
    top5 = float(m.group(4)) if m.group(4) is not None else None
    return _ev(int(m.group(2)), float(m.group(3)), top5, t=_clock(m.group(1)) if m.group(1) else None)


def _oneflow(m: re.Match[str]) -> Evaluation | None:  # epochs from 0; the unix stamp only with the stamped logger
    return _ev(int(m.group(1)) + 1, float(m.group(3)), float(m.group(4)),
               t=float(m.group(5)) if m.group(5) else None)


def _iso(stamp: str | None) -> float | None:
    """``2026-11-27 10:03:59.783`` (Oneflow-Inc/models' logger, the node's local clock) as seconds, read as UTC."""
    if not stamp:
        return None
    try:
        whole, _, frac = stamp.partition(".")
        return calendar.timegm(time.strptime(whole, "%Y-%m-%d %H:%M:%S")) + float("0." + (frac or "0"))
    except ValueError:
        return None


def _oneflow_models(m: re.Match[str]) -> Evaluation | None:  # epochs from 0, top-1 only
    return _ev(int(m.group(1)) + 1, float(m.group(2)), None, t=_iso(m.group(3)))


def _torchvision(m: re.Match[str]) -> Evaluation | None:  # percents
    return _ev(None, float(m.group(1)) / 100, float(m.group(2)) / 100)


def _mxnet(m: re.Match[str]) -> Evaluation | None:  # one metric a line, epochs from 0: merged by Reader
    v = float(m.group(3))
    if not _frac(v):
        return None
    e = int(m.group(1)) + 1
    return Evaluation(e, None, None, v, None) if m.group(2) == "accuracy" else Evaluation(e, None, None, None, v)


def _lfw(m: re.Match[str]) -> Evaluation | None:  # the mean over LFW's 10 folds (+- their deviation)
    v = float(m.group(2))
    return Evaluation(None, int(m.group(1)), None, None, None, lfw=v) if _frac(v) else None


def _auc(m: re.Match[str]) -> Evaluation | None:
    v = float(m.group(1))
    return Evaluation(None, None, None, None, None, auc=v) if _frac(v) else None


FORMATS: dict[str, Format] = {
    "tf_cnn": Format(
        "tf_cnn_benchmarks (benchmark_cnn.py, --eval or --eval_during_training_every_n_*; 2018-2020)",
        "Accuracy @ 1 = 0.3692 Accuracy @ 5 = 0.6404 [249856 examples]", "Accuracy @ 1 = ",
        re.compile(r"Accuracy @ 1 = " + _N + r" Accuracy @ 5 = " + _N + r" \[\d+ examples\]"), _tf_cnn),
    "gluoncv": Format(
        "gluon-cv scripts/classification/imagenet/train_imagenet.py (2018-)",
        "INFO:root:[Epoch 0] validation: err-top1=0.944655 err-top5=0.844169", "validation: err-top1=",
        re.compile(r"\[Epoch (\d+)\] validation: err-top1=" + _N + r" err-top5=" + _N), _gluoncv),
    "mxnet": Format(
        "MXNet Module.fit (example/image-classification, DLE MxNet fit.py) and gluon examples: one metric a line",
        "INFO:root:Epoch[3] Validation-accuracy=0.965625", "Validation-",
        re.compile(r"Epoch[\[ ](\d+)\]?\s+Validation-(accuracy|top_k_accuracy_5)=" + _N), _mxnet),
    "paddleclas": Format(
        "PaddleClas 2.x ppcls engine (ppcls/engine/evaluation: the epoch's [Avg] line; 2021-)",
        "[2022/08/05 01:28:59] ppcls INFO: [Eval][Epoch 2][Avg]CELoss: 3.78812, loss: 3.78812, top1: 0.23302, "
        "top5: 0.47420", "[Eval][Epoch ",
        re.compile(r"^(?:\[(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)\] )?.*\[Eval\]\[Epoch (\d+)\]\[Avg\].*?\btop1: " + _N
                   + r"(?:, top5: " + _N + r")?"), _paddleclas, _ppcls_stamp),
    "oneflow": Format(
        "OneFlow-Benchmark Classification/cnns of_cnn_train_val.py (2020-)",
        "validation: epoch 47, iter 125, top_1: 0.760460, top_k: 0.928760, samples/s: 2173.505 1599761642.6572137",
        "validation: epoch ",
        re.compile(r"validation: epoch (\d+), iter (\d+), top_1: " + _N + r", top_k: " + _N
                   + r", samples/s: [-+\d.eE]+(?: (\d+\.\d+))?\s*$"), _oneflow, _unix_stamp),
    "oneflow_models": Format(
        "Oneflow-Inc/models Vision/classification/image/resnet50 train.py (2021-09 on): rank 0's eval line, top-1",
        "[rank:0] [eval], epoch: 0/2, iter: 2/2, loss: 0.00000, lr: 0.000000, top1: 0.00000, throughput: 1.93 | "
        "2026-11-27 10:03:59.783", "[eval], epoch: ",
        re.compile(r"^\[(?:rank:)?0\] \[eval\], epoch: (\d+)/\d+, .*?\btop1: " + _N
                   + r"(?:.*?\| (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+))?"), _oneflow_models, _models_stamp),
    "torchvision": Format(
        "torchvision references/classification train.py (0.11 on: 'Test:  Acc@1 ...', the header of evaluate(); "
        "an EMA model's 'Test: EMA Acc@1' is not the run's), pytorch/examples imagenet/main.py, older references "
        "(percents)",
        " *   Acc@1 13.805 Acc@5 59.933", "Acc@1 ",
        re.compile(r"^\s*(?:\*|Test:)\s+Acc@1\s+" + _N + r"\s+Acc@5\s+" + _N + r"\s*$"), _torchvision),
    "hugectr_auc": Format(
        "HugeCTR (v2.3's [HUGECTR][INFO] logger through the core23 [HCTR] one): each evaluation's AUC",
        "[HCTR][03:11:19.929][INFO][RK0][main]: Evaluation, AUC: 0.738497", "Evaluation, AUC: ",
        re.compile(r"Evaluation, AUC: " + _N + r"\s*$"), _auc),
    "insightface_lfw": Format(
        "InsightFace's verification (ArcFace MXNet train.py 2019-, arcface_torch's CallBackVerification 2021-): LFW",
        "[lfw][32500]Accuracy-Flip: 0.50750+-0.00704", "]Accuracy-Flip: ",
        re.compile(r"\[lfw\]\[(\d+)\]Accuracy-Flip: " + _N + r"\+-"), _lfw),
}

def torchvision_line(text: str) -> Evaluation | None:
    """`` * Acc@1 76.130 Acc@5 92.862`` (torchvision references, ``Test:  Acc@1 ...`` since 0.11, pytorch/examples
    imagenet/main.py, the built-in workload's line beside its eval event: percents) as an Evaluation with fractions;
    None for any other line."""
    f = FORMATS["torchvision"]
    m = f.pattern.match(text)
    return f.read(m) if m else None


_TF_CNN_STEP = re.compile(r"^Running (?:final )?evaluation at global_step (\d+)")


class Reader:
    """The evaluations of one log, in the formats ``names`` (keys of :data:`FORMATS`)."""

    def __init__(self, names: tuple[str, ...]):
        self.formats = [FORMATS[n] for n in names]
        self.needles = tuple(f.needle for f in self.formats) + (("evaluation at global_step",) if "tf_cnn" in names
                                                                else ())
        self.evals: list[Evaluation] = []
        self._tf_cnn = "tf_cnn" in names
        self._stamps = [f.stamp for f in self.formats if f.stamp is not None]
        self.start: float | None = None  # the first training line's time, on the evaluations' clock
        self._step: int | None = None  # tf_cnn's "Running evaluation at global_step N", for the next result

    def read(self, text: str, epoch: int | None = None) -> bool:
        """Whether ``text`` is an evaluation line of one of the formats (then it is kept); ``epoch``: the 1-based
        epoch the program's training lines were in, for a line that names none (main.py's validate())."""
        for f in self.formats:
            if f.needle in text:
                m = f.pattern.search(text)
                e = f.read(m) if m else None
                if e is None:
                    continue
                if e.epoch is None and epoch is not None:
                    e = replace(e, epoch=epoch)
                self._keep(e)
                return True
        if self._tf_cnn and "evaluation at global_step" in text:
            m = _TF_CNN_STEP.match(text.strip())
            if m:
                self._step = int(m.group(1))
                return True
        return False

    def trained(self, text: str) -> None:
        """A training line the suite read: the first one's time (where the program stamps it on its evaluations'
        clock) starts the time to target."""
        if self.start is None and self._stamps:
            for stamp in self._stamps:
                t = stamp(text)
                if t is not None:
                    self.start = t
                    return
            self._stamps = []  # its training lines carry no such stamp: not looked for again

    def _keep(self, e: Evaluation) -> None:
        if self._step is not None and e.step is None:
            e, self._step = replace(e, step=self._step), None
        last = self.evals[-1] if self.evals else None
        if (last is not None and e.epoch is not None and e.epoch == last.epoch and e.auc is None and last.auc is None
                and (e.top1 is None) != (last.top1 is None) and (e.top5 is None) != (last.top5 is None)):
            # MXNet's two lines of one evaluation: the top-1 line and the top-5 line
            self.evals[-1] = replace(last, top1=last.top1 if e.top1 is None else e.top1,
                                     top5=last.top5 if e.top5 is None else e.top5)
        elif len(self.evals) < 100_000:
            self.evals.append(e)

    def extra(self) -> dict[str, Any]:
        """``RunResult.extra``'s fields for the evaluations read ({} without any): final top-1 and top-5, each
        evaluation, epochs; a target is the campaign's (:func:`dlperf_slurm.parsing.accuracy.apply_target`). The time to
        target runs from the first training line the log stamps (one print interval after the first step's start)."""
        return extra(self.evals, first_step_time=self.start) if self.evals else {}
