"""``mindspore``: the MindSpore model zoo's ResNet-50 ``train.py`` and BERT-base ``run_pretrain.py``, as DLPerf ran
them (DLPerf ``MindSpore/``: MindSpore 1.1 model_zoo with DLPerf's edits adding ``--batch_size --train_steps
--data_sink_steps --dtype``). Data-sink mode: one "epoch" is one sink of ``data_sink_steps`` steps, and MindSpore's
``TimeMonitor`` prints one record per sink::

    epoch time: 3459.112 ms, per step time: 345.911 ms          (MindSpore 1.x)
    Train epoch time: 5.980 ms, per step time: 0.598 ms          (MindSpore 2.x: the mode in front)

**Window.** Sinks are the log's finest grain: the window is measured over the sinks wholly inside
``(warmup, warmup + measure]`` (method.md, "Coarse logs"); the program trains ``warmup + measure`` steps in sinks of
``data_sink_steps`` (DLPerf: 10; 0 here picks the gcd of the two, so the window's ends are sink boundaries).
**Published flavour: time** -- DLPerf's extractor summed the ``epoch time`` of the sinks after the warm-up and took
global batch x steps / that sum (per rank, then averaged over the ranks it found in the log); we take the same sum
from rank 0 (or the median over workers of an unlabelled multi-rank log). The speed flavour is the mean over the
same sinks of global batch / ``per step time``.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.suites import Suite, register


def sink_steps(measure, options: Mapping[str, Any]) -> int:
    """Steps per sink: the option, or (0) the gcd of the warm-up and the measured steps."""
    return int(options.get("data_sink_steps") or math.gcd(measure.warmup_steps, measure.measure_steps) or 1)


class _MindSpore(Suite):
    framework = "mindspore"
    imports = ("mindspore",)
    launcher = "msrun"
    launchers = ("msrun", "mpirun")  # mpirun: DLPerf's way, MindSpore GPU builds (OpenMPI + NCCL); not on CPU
    precisions = ("fp32", "amp")
    option_minimum = {"data_sink_steps": (0, "0: the gcd of warmup_steps and measure_steps")}
    published = "time"

    def environment(self, cell, options: Mapping[str, Any]) -> dict[str, str]:
        return {"GLOG_v": "2", "GLOG_logtostderr": "1"}  # DLPerf's scripts: warnings and up, on stderr

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return parse_mindspore(lines, ctx)


@register
class ResNet50(_MindSpore):
    model = "resnet50"
    description = "MindSpore model_zoo official/cv/resnet train.py --net=resnet50 (DLPerf's edit), data sink"
    sample_unit = "img/s"
    options = {"workdir": "/workspace/resnet", "dataset_path": "/data/imagenet/train", "python": "python",
               "device_target": "GPU", "data_sink_steps": 10}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        argv = [options["python"], f"{options['workdir']}/train.py", "--net=resnet50", "--dataset=imagenet2012",
                f"--device_target={options['device_target']}", f"--data_sink_steps={sink_steps(measure, options)}",
                f"--train_steps={measure.warmup_steps + measure.measure_steps}",
                f"--dataset_path={options['dataset_path']}", f"--batch_size={cell.batch_size}",
                "--dtype=" + ("fp16" if cell.precision == "amp" else "fp32")]
        if cell.devices > 1:
            argv += ["--run_distribute=True", f"--device_num={cell.gpus_per_node}"]
        return argv


@register
class BertBase(_MindSpore):
    model = "bert-base"
    description = "MindSpore model_zoo official/nlp/bert run_pretrain.py (DLPerf's edit), seq 128, data sink"
    sample_unit = "seq/s"
    supports_xla = True
    xla_name = "graph kernel fusion (--enable_graph_kernel)"
    options = {"workdir": "/workspace/bert", "data_dir": "/data/bert/wiki", "schema_dir": "", "python": "python",
               "device_target": "GPU", "data_sink_steps": 10}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        amp = cell.precision == "amp"
        return [options["python"], f"{options['workdir']}/run_pretrain.py",
                f"--device_target={options['device_target']}",
                "--distribute=" + ("true" if cell.devices > 1 else "false"), "--epoch_size=1",
                "--enable_save_ckpt=false", "--enable_lossscale=" + ("true" if amp else "false"),
                "--enable_data_sink=true", f"--data_sink_steps={sink_steps(measure, options)}",
                f"--train_steps={measure.warmup_steps + measure.measure_steps}", f"--data_dir={options['data_dir']}",
                "--enable_graph_kernel=" + ("true" if cell.xla else "false"), f"--batch_size={cell.batch_size}",
                "--dtype=" + ("fp16" if amp else "fp32"), f"--schema_dir={options['schema_dir']}"]


# ----------------------------------------------------------------------------------------------- parsing
# Records (real lines: tests/test_mindspore.py names each one's source):
#   TimeMonitor     [Train ]epoch time: 4733.000 ms, per step time: 24.143 ms   -- one per sink (or epoch)
#   LossMonitor     epoch: 41 step: 195, loss is 0.17125674                      -- step within the epoch
#   LossMonitor (2.x zoo)  epoch:5 step:5004, loss is 3.1718972                 -- the same, no spaces
#   BERT LossCallBack  epoch: 0.0, current epoch percent: 0.001, step: 100, outputs are (Tensor(shape=[1],
#                   dtype=Float32, [ 1.08209e+01]), ...                           -- global step
#   BERT 0.x/1.1       epoch: 0.0, current epoch percent: 0.000, step: 1, outpus are (Tensor(...   -- its spelling
#   TinyBERT (1.1)     epoch: 1, step: 100, outpus are (Tensor(shape=[1], dtype=Float32, 28.2093), ...  (or a bare loss:
#                      `outpus are 28.2093`)                                      -- global step, no percent
#   BERT-THOR          epoch: 1, step: 100, outputs are [4.4550357], total_time_span is 579.68, step_time_span is 5.855
#                      -- global step; the seconds since the previous print, and per step: its own record
#   model zoo ResNet (today)  ...:INFO:epoch: [1/90] loss: 1.082604, epoch time: 40.559 s, per step time: 207.995 ms
# A record's steps: the last LossMonitor step before it (the step within the epoch, which ends at the sink size),
# else epoch time / per step time (MindSpore divides by the sink size); it ends at the step the loss line before it
# names, else right after the worker's previous record. LossMonitor's step counts within an epoch: a log of its lines
# alone (no TimeMonitor) counts its steps across epochs (each epoch adds the last step the one before it printed), so
# a finished run is never short of the window for that; it has no clock, so its window is never timed. The zoo's
# per-epoch record states no step count: its epochs are as long as its first (epoch time / per step time there).
# Rank labels (msrun launch: "[rankN]: ", srun -l, mpirun --tag-output) select rank 0. An unlabelled multi-rank log
# (DLPerf's mpirun --merge-stderr-to-stdout) is split into workers: a record goes to the first worker that has not
# yet seen its epoch (data parallel ranks move in lockstep); each worker is measured and the median taken.

_NUM = lp.NUM
_TIME = re.compile(r"epoch time: (" + _NUM + r") (ms|s), per step time: (" + _NUM + r") ms")
_LOSSMON = re.compile(r"epoch: ?(\d+) step: ?(\d+), loss is (" + _NUM + ")")
# LossMonitor's own stop on a non-finite loss (mindspore/train/callback/_loss_monitor.py, raised as ValueError)
_LOSSBAD = re.compile(r"epoch: ?(\d+) step: ?(\d+), loss is NAN or INF")
_LOSSCB = re.compile(r"epoch: (\d+)(?:\.\d+)?, (?:current epoch percent: [^,]*, )?step: (\d+), output?s are "
                     r"(?:\(Tensor\(shape=\[\d*\], dtype=\w+, (?:value=\s*)?)?\[?\s*(" + _NUM + ")")
_THOR = re.compile(r"epoch: \d+, step: (\d+), outputs are \[(" + _NUM + r")\], total_time_span is (" + _NUM
                   + r"), step_time_span is (" + _NUM + ")")
_ZOO = re.compile(r"epoch: \[(\d+)/\d+\] loss: (" + _NUM + "),")
_MAX_STREAMS = 1024


_CUT_FORMS = ("epoch time: 1.0 ms, per step time: 1.0 ms", "epoch time: 1.0 s, per step time: 1.0 ms")


def _cut_record(text: str) -> bool:
    """Whether the line ends inside a TimeMonitor record (a buffering cut), e.g. ``... per step time: 24.1``."""
    at = text.rfind("epoch time:")
    if at < 0:
        return False
    tail = re.sub(r"[\d.]+", "1.0", text[at:])
    return any(form.startswith(tail) and form != tail for form in _CUT_FORMS)


def _starts(text: str) -> bool:
    return text.startswith(("epoch", "Train epoch", "Eval epoch")) or ":INFO:epoch: [" in text


class _Worker:
    def __init__(self) -> None:
        self.end = 0  # the step its last record ended at
        self.seen: set = set()
        self.records: list[tuple[int, int, float, float]] = []  # (start, end, seconds, per-step ms)


def _steps(epoch_ms: float, step_ms: float, fallback: int) -> int:
    """Steps a record covers: epoch time / per step time when that ratio is a whole number (3-decimal prints)."""
    if step_ms > 0 and math.isfinite(epoch_ms) and math.isfinite(step_ms):
        ratio = epoch_ms / step_ms
        k = round(ratio)
        if k >= 1 and abs(ratio - k) <= 0.01 * k + 0.05:
            return k
    return max(1, fallback)


def _figures(w: _Worker, warmup: int, measure: int, gb: float) -> lp.WindowFigures | None:
    """Sum the sinks wholly inside (warmup, warmup + measure], contiguous, covering Window.COVERAGE of it."""
    inside = [r for r in w.records if r[0] >= warmup and r[1] <= warmup + measure]
    if not inside or any(b[0] != a[1] for a, b in zip(inside, inside[1:])):
        return None
    steps = inside[-1][1] - inside[0][0]
    seconds = sum(r[2] for r in inside)
    if steps < lp.Window.COVERAGE * measure or not (seconds > 0) or not math.isfinite(seconds):
        return None
    speeds = [gb * 1000.0 / r[3] for r in inside if r[3] > 0 and math.isfinite(r[3])]
    return lp.WindowFigures(start=inside[0][0], end=inside[-1][1], seconds=seconds, throughput=gb * steps / seconds,
                            latency_ms=1000.0 * seconds / steps,
                            speed=sum(speeds) / len(speeds) if speeds else None, speed_points=len(speeds))


@dataclass
class _State:
    """What a parse learns: its window (the primary worker's steps, and every loss), its workers and beside them
    its line handler's findings (:meth:`handler`)."""

    window: lp.Window
    fallback: int  # a record's steps where neither a loss line nor its times say (the sink size)
    workers: list[_Worker] = field(default_factory=lambda: [_Worker()])
    hint: tuple[Any, ...] | None = None  # ("epoch", E, S) | ("step", N) of the last loss line
    losses: int = 0  # loss lines read
    # LossMonitor's epochs counted on: the current one, the steps before it, the last step it printed
    epoch: int | None = None
    offset: int = 0
    last: int = 0
    zoo_n: int | None = None  # the zoo record's epoch length

    def loss(self, value: str, step_guess: int) -> None:
        window = self.window
        x = lp.to_float(value)
        self.losses += 1
        if x is not None:
            if step_guess >= window.max_step:
                window.add(step_guess, loss=x)
            else:
                window.last_loss = x
                if not math.isfinite(x) and window.nonfinite is None:
                    window.nonfinite = (step_guess, x)

    def record(self, epoch_v: str, unit: str, step_v: str) -> None:
        """A TimeMonitor record: the steps of a sink, timed, on the worker it belongs to."""
        epoch_ms, step_ms = lp.to_float(epoch_v), lp.to_float(step_v)
        if epoch_ms is None or step_ms is None:
            return
        if unit == "s":
            epoch_ms *= 1000.0
        hint, workers = self.hint, self.workers
        if hint and hint[0] == "epoch" and hint[2]:
            n = hint[2]  # LossMonitor's last step in the epoch: the epoch's step count (MindSpore's batch_num)
        elif hint and hint[0] == "epoch":  # the zoo's record: every epoch is as long as the first
            if self.zoo_n is None:
                self.zoo_n = _steps(epoch_ms, step_ms, self.fallback)
            n = self.zoo_n
        else:
            n = _steps(epoch_ms, step_ms, self.fallback)
        key = hint[:2] if hint else None
        w = workers[0]
        if key is not None:
            free = next((x for x in workers if key not in x.seen), None)
            if free is None:
                if len(workers) >= _MAX_STREAMS:
                    return
                free = _Worker()
                workers.append(free)
            free.seen.add(key)
            w = free
        end = w.end + n
        if hint and hint[0] == "step" and hint[1] > w.end:
            end = hint[1]  # a global step (BERT): trust it
        elif hint and hint[0] == "epoch" and (hint[1] - 1) * n + (hint[2] or n) > w.end:
            end = (hint[1] - 1) * n + (hint[2] or n)  # sink mode: every epoch is n steps
        w.records.append((end - n, end, epoch_ms / 1000.0, step_ms))
        w.end = end
        if w is workers[0]:
            self.window.add(end)

    def thor(self, step: int, loss_v: str, total: str, per_step: str) -> None:
        """BERT-THOR's line: its own record of the steps since the previous print (total / per step of them)."""
        seconds, each = lp.to_float(total), lp.to_float(per_step)
        self.hint = ("step", step)
        self.loss(loss_v, step)
        if seconds is None or each is None or not (seconds >= 0 and each > 0):
            return
        w = self.workers[0]
        n = max(1, round(seconds / each))
        w.records.append((step - n, step, seconds, 1000.0 * each))
        w.end = max(w.end, step)
        self.window.add(step)

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        if "total_time_span is" in text:
            th = _THOR.search(text)
            if th is None:
                return lp.FRAGMENT if not final else lp.NOT_MINE
            if not final and th.end() == len(text):
                return lp.FRAGMENT  # its last figure ends the line: it may be cut short
            self.thor(int(th.group(1)), th.group(2), th.group(3), th.group(4))
            return lp.CONSUMED
        m = _TIME.search(text)
        if m is None and not final and _cut_record(text):
            return lp.FRAGMENT  # cut by buffering: read it with what follows
        z = _ZOO.search(text)
        if z is not None:
            self.hint = ("epoch", int(z.group(1)), None)
            self.loss(z.group(2), self.workers[0].end)
        elif "outputs are" in text or "outpus are" in text:
            return self.loss_callback(text, final)
        elif "loss is" in text:
            return self.loss_monitor(text, final)
        if m is None:
            return lp.NOT_MINE
        self.record(m.group(1), m.group(2), m.group(3))
        return lp.CONSUMED

    def loss_callback(self, text: str, final: bool) -> int:
        """A BERT/TinyBERT loss line (``..., step: N, outpus are (Tensor(...``): a global step."""
        b = _LOSSCB.search(text)
        if b is None:
            at = max(text.find("outputs are"), text.find("outpus are"))
            return lp.FRAGMENT if not final and ")" not in text[at:] else lp.NOT_MINE
        if not final and b.end() == len(text.rstrip()):
            return lp.FRAGMENT  # a bare loss ends the line (`outpus are 28.2093`): it may be cut short
        self.hint = ("step", int(b.group(2)))
        self.loss(b.group(3), int(b.group(2)))
        return lp.CONSUMED

    def loss_monitor(self, text: str, final: bool) -> int:
        """A LossMonitor line (``epoch: E step: S, loss is X``): its step counts within the epoch."""
        bad = _LOSSBAD.search(text)
        if bad is not None:  # the step's loss was NaN or Inf: LossMonitor stopped the training there
            self.loss("nan", self.workers[0].end + int(bad.group(2)))
            return lp.CONSUMED
        lm = _LOSSMON.search(text)
        if lm is None:
            return lp.FRAGMENT if not final and text.rstrip().endswith("loss is") else lp.NOT_MINE
        if not final and lm.end() == len(text):
            return lp.FRAGMENT  # the loss ends the line: it may be cut short
        e, s = int(lm.group(1)), int(lm.group(2))
        self.hint = ("epoch", e, s)
        if self.epoch is None:
            self.epoch = e
        elif e > self.epoch:  # a new epoch: its steps follow the last one the previous epoch printed
            self.epoch, self.offset, self.last = e, self.offset + self.last, 0
        self.last = max(self.last, s)
        self.loss(lm.group(3), max(self.workers[0].end, self.offset) + s)
        return lp.CONSUMED


def parse_mindspore(lines: Iterable[str], ctx: ParseContext) -> RunResult:
    fallback = int(ctx.options.get("data_sink_steps") or 0) or math.gcd(ctx.warmup_steps, ctx.measure_steps) or 1
    st = _State(lp.Window(ctx.warmup_steps, ctx.measure_steps), fallback)
    window, workers, gb = st.window, st.workers, float(ctx.global_batch)
    facts = lp.Scanner(st.handler, starts=_starts, needles=("epoch",)).run(lines)
    measured = [w for w in workers if w.records]
    figs = [f for f in (_figures(w, ctx.warmup_steps, ctx.measure_steps, gb) for w in measured) if f is not None]
    extra: dict[str, Any] = {"workers_seen": len(measured), "sinks": len(workers[0].records),
                             "loss_lines": st.losses}
    fig = figs[0] if figs else None
    if len(figs) > 1:
        speeds = [f.speed for f in figs if f.speed is not None]
        extra["workers_measured"] = len(figs)
        extra["per_worker_throughput"] = [f.throughput for f in figs]
        first = figs[0]
        fig = lp.WindowFigures(start=first.start, end=first.end, seconds=statistics.median(f.seconds for f in figs),
                               throughput=statistics.median(f.throughput for f in figs),
                               latency_ms=statistics.median(f.latency_ms for f in figs),
                               speed=statistics.median(speeds) if speeds else None, speed_points=first.speed_points)
    reached = max([window.max_step] + [w.end for w in measured]) >= ctx.warmup_steps + ctx.measure_steps
    res = lp.finish(window, facts, ctx, global_batch=gb, figures=fig if reached else None, complete=reached,
                    extra=extra, no_memory_reason="MindSpore model_zoo logs report no GPU memory")
    res.steps_seen = max([window.max_step] + [w.end for w in measured])
    if res.status == Status.UNMEASURED and not workers[0].records:
        res.reason = (f"the log's steps reach {res.steps_seen} but no TimeMonitor record (epoch time, per step time) "
                      "times them: add TimeMonitor to the callbacks")
    elif res.status == Status.UNMEASURED:
        ends = [r[1] for r in workers[0].records]
        res.reason = (f"the sinks in the log do not tile the window {ctx.warmup_steps}->"
                      f"{ctx.warmup_steps + ctx.measure_steps} (sinks end at steps {ends[:8]}"
                      f"{' ...' if len(ends) > 8 else ''}): make data_sink_steps divide warmup_steps and measure_steps")
    return res
