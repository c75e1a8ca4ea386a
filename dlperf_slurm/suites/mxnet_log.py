"""Reading the MXNet suites' logs (:mod:`.mxnet` says which lines count and why): NGC ``train.py``'s, gluon-cv's and
gluon-nlp's step records on every rank, per step the median over the ranks' lines (DLPerf's extractor's rule).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.parsing import evals as lp_evals
from dlperf_slurm.words import plural

# ----------------------------------------------------------------------------------------------- parsing
# The line formats, one per program generation, tried in this order; each record maybe after a logging prefix
# (``2020-09-14 10:11:12,345:INFO: `` in NGC train.py, ``INFO:root:`` by default) and a launcher's rank label.
# Step counters: ``Epoch[e] Batch[b]`` counts batches within epoch e (from 1 again every epoch): steps are counted
# across epochs, each epoch as long as its largest batch number (or the length its summary line states).
#   NGC train.py (e470c215)        Epoch[0] Batch [19-19]\tSpeed: 392.2371 samples/sec\tLR: 0.256\t...      every rank
#   NGC train.py (DLE 2021+)       DLL 2021-01-01 10:00:00.123456 - Epoch: 0 Iteration: 19  train.loss : 6.9  train.ips : 392.2 images/s   rank 0  # noqa: E501
#   gluon-cv train_imagenet.py     Epoch[0] Batch [49]\tSpeed: 1514.069463 samples/sec\ttop1-err=0.99\tlr=0.003
#                                  (2018-2021: the batch index, 0-based; ab03ca04 2021-04+: index + 1) -- the Speed of
#                                  the last log interval
#   gluon-cv train_horovod.py      Epoch[0] Batch[20]\tSpeed: 392.24 samples/sec   (DLPerf's copy, rank 0)
#   gluon-cv train_horovod.py      Epoch[0] Batch[100] Loss[6.968]
#     unmodified (f40e731c         Epoch[0] Rank[0] Batch[1251]\tTime cost=411.25\tTrain-metric=...
#     2020-04+, rank 0)            Epoch[0]\tSpeed: 3114.92 samples/sec
#                                  (a loss every log interval, the Speed once per epoch)
#   gluon-nlp run_pretraining      [step 249]\tmlm_loss=9.24962\tmlm_acc=5.01887\t...\tthroughput=122.0K tks/s\tlr=0.0000025 time=163.24  # noqa: E501
#     (def34313 2019-03)           (time: the seconds of the log interval, its steps since the previous line)
#   gluon-nlp run_pretraining      [step 20]\tmlm_loss=7.93   nsp_loss= 0.69\tthroughput=122.0K tks/s\tlr=0.0000100 time=0.26, latency=262.0 ms/batch  # noqa: E501
#     (4b83eb6b 2019-04+, 7b7bf60)
#   gluon-nlp run_pretraining      [step 1]\tmlm_loss=0.00000\tnsp_loss= 0.57\tthroughput=0.0K tks/s\tlr=0.0000083 time=20.77, latency=20768.7 ms/step  # noqa: E501
#     (8d43da9a 2020-02+, v0.9-v0.10)  the same record, its latency now "ms/step"; written to
#                                      <ckpt_dir>/phase1_log.<rank>

_NUM = lp.NUM
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d{1,6})?)")
_SPEED = re.compile(r"Epoch\[(\d+)\] ?Batch ?\[(\d+)(?:-(\d+))?\]\s*Speed: (" + _NUM + r") ?samples/sec")
_EPOCH_HEAD = re.compile(r"Epoch\[\d+\]\t")
_HEAD = re.compile(r"Epoch\[(\d+)\] ?Batch ?\[\d+(?:-\d+)?\]")
_DLL = re.compile(r"Epoch: (\d+) Iteration: (\d+) .*?train\.(?:total_)?ips : (" + _NUM + r")")
_DLL_LOSS = re.compile(r"train\.loss : (" + _NUM + r")")
_BERT = re.compile(r"\[step (\d+)\]\s.*?throughput=(" + _NUM + r")([KMG]?) tks/s.*?latency=(" + _NUM
                   + r") ms/(?:batch|step)")
_BERT_HEAD = re.compile(r"\[step \d+\]\t")  # a record; "[step 12] Saving model params to ..." is none
_BERT_2019 = re.compile(r"\[step (\d+)\]\s.*?throughput=(" + _NUM + r")([KMG]?) tks/s.*?\btime=(" + _NUM + r")\s*$")
_EPOCH_SPEED = re.compile(r"Epoch\[(\d+)\]\tSpeed: (" + _NUM + r") samples/sec")
_EPOCH_COST = re.compile(r"Epoch\[(\d+)\] Rank\[\d+\] Batch\[(\d+)\]\tTime cost=")
_LOSS_LINE = re.compile(r"Epoch\[(\d+)\] Batch\[(\d+)\] Loss\[(" + _NUM + r")\]")
_BERT_LOSS = re.compile(r"mlm_loss=\s*(" + _NUM + r")")
_UNIT = re.compile(r" \S+/s")
_SPEED_CUT = re.compile(r"Speed: ?[-+\d.eE]*(?: ?s[a-z/]*)?")
_MAX_STEPS = 1 << 20  # distinct steps kept (a whole ImageNet epoch at batch 1 is 1.28 M: far beyond any window)
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


def _starts(text: str) -> bool:
    return "Speed:" in text or "Iteration: " in text or "[step " in text or "Loss[" in text


def _wanted(text: str) -> bool:  # "alidation": the evaluation lines (parsing.evals' gluoncv and mxnet)
    return "Batch" in text or "Iteration: " in text or "[step " in text or "Speed:" in text or "alidation" in text


def _cut(text: str) -> bool:
    """The line ends inside a record, before its figure (buffering split it): the rest follows on the next line."""
    h = _HEAD.search(text)
    if h is not None:  # "Epoch[0] Batch[20]" then nothing, or part of "\tSpeed: 392.24 samples/sec"
        rest = text[h.end():].lstrip()
        return "Speed: ".startswith(rest) or _SPEED_CUT.fullmatch(rest) is not None
    e = _EPOCH_HEAD.search(text)
    if e is not None:  # "Epoch[0]\t" then part of "Speed: 3114.92 samples/sec" (gluon-cv's per-epoch line)
        rest = text[e.end():]
        return "Speed: ".startswith(rest) or _SPEED_CUT.fullmatch(rest) is not None
    if _BERT_HEAD.search(text):  # a gluon-nlp record ends with its latency's unit (2019-03: with its time=)
        return "ms/batch" not in text and "ms/step" not in text and _BERT_2019.search(text) is None
    return "Iteration: " in text and "train." in text and "ips : " not in text  # dllogger, cut before train.ips


@dataclass(slots=True)
class _Step:
    """What the log says of one (epoch, step), over the ranks' lines."""

    speeds: list[float] = field(default_factory=list)
    stamp: float | None = None  # the latest stamp: the step has ended once its last rank says so
    loss: float | None = None  # the last loss printed
    tokens: list[float] = field(default_factory=list)  # token rates (gluon-nlp)
    lines: int = 0
    durations: list[float] = field(default_factory=list)  # the interval's seconds, where the line states them


# a step record read off a line: its format, epoch, step, its figure as printed (a rank's line again for another
# metric repeats it), speed, loss, token rate (gluon-nlp), the interval's seconds where the line states them, and the
# record's match (a stamp before it is the line's)
_Line = tuple[str, int, int, str, float | None, float | None, float | None, float | None, re.Match]


@dataclass(slots=True)
class _Seen:
    """What the whole log showed: each step's lines (:attr:`steps`), its line forms, and how many of its step lines
    carry a stamp; and its line handler (:meth:`handler`)."""

    gb: float  # the global batch
    evals: lp_evals.Reader
    iso: lp.IsoClock = field(default_factory=lp.IsoClock)
    steps: dict[tuple[int, int], _Step] = field(default_factory=dict)
    keys: set = field(default_factory=set)  # (rank, epoch, step, figure) of the labelled lines read
    ends: dict[int, int] = field(default_factory=dict)  # epoch -> its length, as train_horovod.py's "Time cost" says
    forms: set[str] = field(default_factory=set)
    stamped: int = 0
    unstamped: int = 0

    def record(self, text: str) -> _Line | int | None:
        """The step record on the line by the table of formats; a return code for a record that is no step (an
        epoch's length, the Speed of an epoch of unknown length); None for a line with no record."""
        loss = tokens = seconds = None
        m = _SPEED.search(text)
        if m:
            form = "ngc-train.py" if m.group(3) is not None else "gluon-cv"
            epoch, index = int(m.group(1)), int(m.group(3) if m.group(3) is not None else m.group(2))
            step = index + 1 if m.group(3) is not None else index  # [i-i] is 0-based, Batch [N] counts from 1
            value = m.group(4)
            speed = lp.to_float(value)
        elif (m := _DLL.search(text)) is not None:
            form, epoch, step, value = "dllogger", int(m.group(1)), int(m.group(2)) + 1, m.group(3)
            speed = lp.to_float(value)
            if (lm := _DLL_LOSS.search(text)) is not None:
                loss = lp.to_float(lm.group(1))
        elif (m := _LOSS_LINE.search(text)) is not None:  # gluon-cv train_horovod.py 2020-04+: a step, no speed
            form, epoch, step, value, speed = "gluon-cv-loss", int(m.group(1)), int(m.group(2)), m.group(3), None
            loss = lp.to_float(value)
        elif (m := _EPOCH_COST.search(text)) is not None:  # ... and the epoch's length before its Speed line
            epoch, n = int(m.group(1)), int(m.group(2))
            self.ends[epoch] = max(self.ends.get(epoch, 0), n)
            return lp.CONSUMED
        elif (m := _EPOCH_SPEED.search(text)) is not None:  # ... the Speed of the whole epoch
            form, epoch, value = "gluon-cv-epoch", int(m.group(1)), m.group(2)
            step = self.ends.get(epoch) or max((s for e, s in self.steps if e == epoch), default=0)
            if step <= 0:
                return lp.CONSUMED  # an epoch of unknown length: no step to time
            speed = lp.to_float(value)
        elif (m := _BERT.search(text)) is not None:
            form, epoch, step, value = "gluon-nlp", 0, int(m.group(1)), m.group(4)
            latency = lp.to_float(value)
            speed = 1000.0 / latency * self.gb if latency and latency > 0 else None  # DLPerf: 1000 / latency x batch
            rate = lp.to_float(m.group(2))
            tokens = rate * _SCALE[m.group(3)] if rate is not None else None
            if (lm := _BERT_LOSS.search(text)) is not None:
                loss = lp.to_float(lm.group(1))
        elif (m := _BERT_2019.search(text)) is not None:  # gluon-nlp def34313: the interval's seconds, no latency
            form, epoch, step, value, speed = "gluon-nlp-2019", 0, int(m.group(1)), m.group(4), None
            seconds = lp.to_float(value)
            rate = lp.to_float(m.group(2))
            tokens = rate * _SCALE[m.group(3)] if rate is not None else None
            if (lm := _BERT_LOSS.search(text)) is not None:
                loss = lp.to_float(lm.group(1))
        else:
            return None
        return form, epoch, step, value, speed, loss, tokens, seconds, m

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        line = self.record(text)
        if line is None:
            if rank in (None, 0) and self.evals.read(text):  # rank 0's evaluation (every rank may print it)
                return lp.CONSUMED
            return lp.FRAGMENT if not final and _cut(text) else lp.NOT_MINE
        if isinstance(line, int):
            return line
        form, epoch, step, value, speed, loss, tokens, seconds, m = line
        if not final and form == "dllogger" and not _UNIT.match(text, m.end()):
            return lp.FRAGMENT  # dllogger's figure may be cut short: its unit (images/s) follows it
        if rank is not None:  # unlabelled lines cannot be told apart: each counts
            key = (rank, epoch, step, value)
            if key in self.keys:
                return lp.CONSUMED  # the same rank's line again for another metric (MXNet's Speedometer)
            self.keys.add(key)
        rec = self.steps.get((epoch, step))
        if rec is None:
            if len(self.steps) >= _MAX_STEPS:
                return lp.CONSUMED
            rec = self.steps[(epoch, step)] = _Step()
        rec.lines += 1
        if speed is not None:
            rec.speeds.append(speed)
        if seconds is not None and lp.finite(seconds) and seconds > 0:
            rec.durations.append(seconds)
        if tokens is not None:
            rec.tokens.append(tokens)
        if loss is not None:
            rec.loss = loss
        stamp = _STAMP.search(text, 0, m.start() + 1)
        t = self.iso.seconds(stamp.group(1).replace(",", ".")) if stamp else None
        if t is not None:
            self.stamped += 1
            rec.stamp = t if rec.stamp is None else max(rec.stamp, t)  # the step has ended once its last rank says so
        else:
            self.unstamped += 1
        self.forms.add(form)
        return lp.CONSUMED


def _add_steps(window: lp.Window, steps: dict[tuple[int, int], _Step], offsets: dict[int, int], gb: float,
               use_stamps: bool) -> tuple[list[int], dict[int, float]]:
    """Every step into the window in step order: its speed the median of its lines', its time its last stamp or
    the clock of global batch / speed. Returns the lines per step and each step's summed token rate."""
    clock, prev, per_step, tokens = 0.0, 0, [], {}
    for (epoch, s), rec in sorted(steps.items()):
        speeds, stamp, loss, toks, n, durations = rec.speeds, rec.stamp, rec.loss, rec.tokens, rec.lines, rec.durations
        step = offsets[epoch] + s
        span = step - prev if step > prev else 1  # the steps since the last timed one
        speed = statistics.median(speeds) if speeds else None
        seconds = gb * span / speed if speed and speed > 0 else None
        if durations:  # the line states the interval's seconds: the speed follows from them
            seconds = statistics.median(durations)
            speed = gb * span / seconds
        if use_stamps:
            t = stamp
        elif seconds is not None:
            clock += seconds
            t = clock
        else:
            t = None
        per_step.append(n)
        if toks:
            tokens[step] = sum(toks)
        window.add(step, t, speed=speed, loss=loss, span_from=step - span if seconds is not None else None,
                   span_seconds=None if use_stamps else seconds)
        if seconds is not None or (use_stamps and stamp is not None):
            prev = max(prev, step)
    return per_step, tokens


def parse(lines: Iterable[str], ctx: ParseContext, evaluations: tuple[str, ...] = ()) -> RunResult:
    st = _Seen(float(ctx.global_batch), lp_evals.Reader(evaluations))
    gb, evals, steps, ends = st.gb, st.evals, st.steps, st.ends
    facts = lp.Scanner(st.handler, ranks="all", starts=_starts, wanted=_wanted,
                       block_needles=("Batch", "Iteration: ", "[step ", "Speed:", "alidation")).run(lines)
    window = lp.Window(ctx.warmup_steps, ctx.measure_steps)
    offsets: dict[int, int] = {}
    total = 0
    for epoch in sorted({e for e, _ in steps}):  # steps are counted across epochs, from 1
        offsets[epoch] = total
        total += max(max(s for e, s in steps if e == epoch), ends.get(epoch, 0))
    use_stamps = st.stamped > 0 and st.unstamped == 0
    per_step, tokens = _add_steps(window, steps, offsets, gb, use_stamps)
    extra: dict[str, Any] = {**evals.extra(), "formats": sorted(st.forms),
                             "clock": "log stamps (a step ends at its last rank's line)" if use_stamps
                             else "sum of global batch / the step's median speed",
                             "speed": "per step, the median over the ranks' lines; mean over the window's steps"}
    if per_step:
        extra["lines_per_step_max"], extra["lines_per_step_min"] = max(per_step), min(per_step)
    in_window = [v for k, v in tokens.items() if ctx.warmup_steps < k <= ctx.warmup_steps + ctx.measure_steps]
    if in_window:
        extra["tokens_per_s"] = sum(in_window) / len(in_window)  # gluon-nlp's throughput: the sum over ranks
    res = lp.finish(window, facts, ctx, global_batch=gb, extra=extra,
                    no_memory_reason="the MXNet programs' logs report no GPU memory")
    if res.status == Status.UNMEASURED and "gluon-cv-epoch" in st.forms \
            and st.forms <= {"gluon-cv-epoch", "gluon-cv-loss"} and total:
        first = offsets[min(offsets)] + max(max(s for e, s in steps if e == min(offsets)), ends.get(min(offsets), 0))
        res.reason += (f"; gluon-cv's train_horovod.py times whole epochs only (one Speed line per epoch, the first "
                       f"{plural(first, 'step')} long): a window on epoch boundaries times it, e.g. --warmup-steps "
                       f"{first} --measure-steps {first}")
    return res
