"""``ngc-pytorch``: NVIDIA DeepLearningExamples PyTorch ResNet-50 v1.5 and BERT, as DLPerf ran them
(NGC PyTorch container). Logs are dllogger's StdOutBackend (``DLL <datetime> - ...``) or JSON stream (``DLLL {...}``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.parsing import accuracy
from dlperf_slurm.suites import REPEAT, Suite, register


class _NGCPyTorch(Suite):
    framework = "ngc-pytorch"
    imports = ("torch",)
    launcher = "torchrun"
    launchers = ("torchrun", "srun")
    precisions = ("fp32", "amp")
    # parsing: the metric printed per step as the global throughput (None: the log prints none), the loss metrics
    speed_metric: str | None = None
    loss_metrics: tuple[str, ...] = ()
    final_metric: str = ""

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse_dllogger(self, lines, ctx)


@register
class ResNet50(_NGCPyTorch):
    model = "resnet50"
    description = "DeepLearningExamples PyTorch/Classification/ConvNets main.py --arch resnet50"
    sample_unit = "img/s"
    speed_metric = "train.total_ips"
    loss_metrics = ("train.loss",)
    final_metric = "train.total_ips"
    axes = {"data_backend": ("dali-cpu", "dali-gpu", "pytorch", "synthetic")}
    axis_defaults = {"data_backend": "synthetic"}
    options = {"workdir": "/workspace/rn50", "data_dir": "/data/imagenet", "python": "python"}
    # accuracy runs: --epochs of the real data (no --prof, no --training-only), main.py's validation after every
    # epoch (its dllogger epoch record: val.top1, val.top5); it has no flag to stop at a target, so it trains every
    # epoch and collect reads whether and when (the records' timestamps) the target was reached
    accuracy = True

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        length = (["--epochs", str(measure.epochs), "--seed", REPEAT] if measure.accuracy else  # a seed a repeat
                  ["--epochs", "1", "--prof", str(measure.warmup_steps + measure.measure_steps + 1)])
        argv = [
            options["python"], f"{options['workdir']}/main.py",
            "--arch", "resnet50", "-c", "fanin", "--label-smoothing", "0.1",
            "--data-backend", str(cell.param("data_backend", "synthetic")),
            "-b", str(cell.batch_size), *length,
            "-p", "1", *(() if measure.accuracy else ("--training-only",)), "--no-checkpoints",
            "--workspace", "/tmp",
        ]
        if cell.precision == "amp":
            argv += ["--amp", "--dynamic-loss-scale"]
        return argv + [options["data_dir"]]

    def accuracy_error(self, cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        if cell.param("data_backend", "synthetic") == "synthetic":
            return ("axes.data_backend", "an accuracy run evaluates on real data: set data_backend to dali-cpu, "
                                         "dali-gpu or pytorch in [axes] and data_dir in [options] (ImageNet train/ "
                                         "and val/)")
        return None


@register
class BertBase(_NGCPyTorch):
    model = "bert-base"
    description = "DeepLearningExamples PyTorch/LanguageModeling/BERT run_pretraining.py, phase 1, seq 128"
    sample_unit = "seq/s"
    loss_metrics = ("step_loss", "average_loss")
    final_metric = "training_sequences_per_second"
    options = {"workdir": "/workspace/bert", "data_dir": "/data/bert/phase1",
               "config_file": "/workspace/bert/bert_config.json", "python": "python"}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        argv = [
            options["python"], f"{options['workdir']}/run_pretraining.py",
            f"--input_dir={options['data_dir']}", "--output_dir=/tmp/bert_out",
            f"--config_file={options['config_file']}", "--bert_model=bert-base-uncased",
            f"--train_batch_size={cell.batch_size}", "--max_seq_length=128", "--max_predictions_per_seq=20",
            f"--max_steps={measure.warmup_steps + measure.measure_steps + 1}", "--warmup_proportion=1",
            "--num_steps_per_checkpoint=100000", "--learning_rate=6e-3", "--seed=42", "--do_train",
            "--json-summary=/tmp/bert_out/dllogger.json", "--disable_progress_bar", "--log_freq=1",
        ]
        if cell.precision == "amp":
            argv.append("--fp16")
        return argv


# ----------------------------------------------------------------------------------------------- parsing
# dllogger, rank 0 only (suites-reference.md §3.1, §3.2, §7). Two forms, possibly both in one log:
#   StdOutBackend  DLL 2020-09-15 14:29:13.473765 - Epoch: 0 Iteration: 1  train.loss : 7.09304  train.total_ips : 267.44 img/s  # noqa: E501
#                  DLL 2020-09-24 02:10:30.123456 - Training Epoch: 0 Training Iteration: 25  average_loss : 10.48  step_loss : 10.43 ...  # noqa: E501
#   JSON stream    DLLL {"timestamp": "1570716921.842053", ..., "type": "LOG", "step": [0, 5], "data": {"train.loss": ...}}  # noqa: E501
# A step is (epoch, iteration); iterations restart each epoch, so steps are counted across epochs. Validation
# lines (a third step element) and the run summary (no step) are not training steps. The window is method.md's:
# the DLL timestamps at the ends of steps ``warmup`` and ``warmup + measure`` (DLPerf's own extractor skipped
# iterations <= 5 first, i.e. a window of 25 -> 125: pass ``--warmup-steps 25`` to reproduce it).

_DLL = re.compile(r"DLL (\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?) - ")
_STEP = re.compile(r"(?:Training )?Epoch: (\d+) (?:Training )?Iteration: (\d+)  ")
_DLL_STEP = re.compile(r"DLL (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) - (?:Training )?Epoch: (\d+) "
                       r"(?:Training )?Iteration: (\d+)  ")
_PARAM = re.compile(r"\b(batch_size|world_size|amp|fp16|prof|print_freq|train_batch_size|max_steps) : (\S+)")


def _starts(text: str) -> bool:
    return "DLL " in text


def _evaluation(epoch: int, data: dict, stamp: Any) -> accuracy.Evaluation | None:
    """An epoch record's ``val.top1``/``val.top5`` (percents; epochs from 0) as an Evaluation, None if out of
    range."""
    top1, top5 = lp.to_float(data.get("val.top1")), lp.to_float(data.get("val.top5"))
    if top1 is None or not 0 <= top1 <= 100 or (top5 is not None and not 0 <= top5 <= 100):
        return None
    return accuracy.Evaluation(epoch + 1, None, lp.to_float(stamp), top1 / 100,
                               top5 / 100 if top5 is not None else None)


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _metric(body: str, key: str, start: int = 0) -> tuple[str, str, bool] | None:
    """``(value, unit, ends_line)`` of ``key : value[ unit]`` in a dllogger line body, None if absent. dllogger
    writes one space and the unit after a value that has one, two spaces before the next metric otherwise."""
    tag = key + " : "
    i = body.find(tag, start)
    while i > start and body[i - 1] != " ":
        i = body.find(tag, i + 1)
    if i < 0:
        return None
    j = i + len(tag)
    k = body.find(" ", j)
    if k < 0:
        return body[j:], "", True
    if k + 1 < len(body) and body[k + 1] != " ":
        e = body.find(" ", k + 1)
        return body[j:k], body[k + 1:] if e < 0 else body[k + 1:e], False
    return body[j:k], "", False


@dataclass
class _State:
    """What a parse learns beside its window, and its line handler (:meth:`handler`): dllogger's records, in its
    text form or its JSON stream."""

    window: lp.Window
    speed_key: str | None  # the suite's metric of a step record's speed
    loss_keys: tuple[str, ...]  # ... of its loss (the first one the record has)
    final_key: str  # ... of the run summary's throughput
    iso: lp.IsoClock = field(default_factory=lp.IsoClock)  # the text form's stamps
    epoch_clock: lp.EpochClock = field(default_factory=lp.EpochClock)  # the JSON stream's unix stamps
    epoch: int | None = None  # the epoch of the last step record
    offset: int = 0  # the steps of the epochs before it (a step's number counts across epochs)
    last_iter: int = 0  # the highest iteration read in this epoch
    params: dict[str, Any] = field(default_factory=dict)  # the PARAMETER records
    final: float | None = None  # the run summary's own throughput
    json_steps: int = 0  # step records read in dllogger's JSON stream form
    evals: list[accuracy.Evaluation] = field(default_factory=list)  # the epoch records' val.top1/val.top5
    first: float | None = None  # the first training step record's unix time (the start of a time to target)
    text_steps: int = 0  # ... and in its text form

    def add(self, epoch: int, it: int, t: float | None, speed: float | None, loss: float | None) -> None:
        if epoch != self.epoch:
            if self.epoch is None:
                self.epoch = epoch
            elif epoch > self.epoch:
                self.offset += self.last_iter
                self.epoch, self.last_iter = epoch, 0
        if it > self.last_iter:
            self.last_iter = it
        # No span from the printed ips: in real logs train.total_ips is ~2x what the timestamps give (it leaves
        # out part of the iteration), so it cannot stand in for a missing boundary time.
        self.window.add(self.offset + it, t, speed=speed if speed is not None and math.isfinite(speed) else None,
                        loss=loss)

    def text_line(self, text: str, at: int, final: bool) -> int:
        m = _DLL_STEP.match(text, at)  # the common case, one regex: a training step line
        if m is None:
            return self.other_line(text, at, final)
        end = m.end()
        speed = None
        speed_key = self.speed_key
        if speed_key is not None:  # complete once the speed metric and its unit are there
            got = _metric(text, speed_key, end)
            if got is None or not got[1]:  # a value cut short has lost its unit
                if not final:
                    return lp.FRAGMENT
            else:
                speed = _float(got[0])
        elif not final and not text.endswith((" ", "\t", "/s", "None")):  # dllogger ends with a space (no unit)
            return lp.FRAGMENT
        loss = None
        for key in self.loss_keys:
            got = _metric(text, key, end)
            if got is not None and not got[2]:  # the last value on a cut line may be cut too
                loss = _float(got[0])
                break
        self.text_steps += 1
        self.add(int(m.group(2)), int(m.group(3)), self.iso.seconds(m.group(1)), speed, loss)
        return lp.CONSUMED

    def other_line(self, text: str, at: int, final: bool) -> int:
        m = _DLL.match(text, at)
        if not m:
            return lp.NOT_MINE if final or len(text) - at > 40 else lp.FRAGMENT
        body = text[m.end():]
        sm = _STEP.match(body)
        if sm:  # a step line in a shape the fast regex does not take (e.g. "T" between date and time)
            self.text_steps += 1
            got = _metric(body, self.speed_key, sm.end()) if self.speed_key else None
            self.add(int(sm.group(1)), int(sm.group(2)), self.iso.seconds(m.group(1).replace("T", " ")),
                     _float(got[0]) if got and got[1] else None, None)
            return lp.CONSUMED
        if body.startswith("PARAMETER"):
            for k, v in _PARAM.findall(body):
                self.params[k] = v
            return lp.CONSUMED
        if not final and len(body) < 60 and not body.startswith("Summary"):
            return lp.FRAGMENT  # maybe cut inside "Epoch: 0 Iteration: 12  ": read it with what follows
        if body.startswith("Summary:") or body.startswith(" "):  # run summary: step ()
            got = _metric(body, self.final_key)
            # a unit, or another metric after it, says the number ended (BERT's training_sequences_per_second has
            # no unit: '-  e2e_train_time : 931.02  training_sequences_per_second : 4058.34  final_loss : ...')
            if got is not None and (got[1] or not got[2] or final):
                self.final = _float(got[0])
        return lp.CONSUMED

    def json_line(self, text: str, at: int, final: bool) -> int:
        try:
            obj = json.loads(text[at + 5:])
        except (ValueError, RecursionError):
            return lp.NOT_MINE if final else lp.FRAGMENT
        if not isinstance(obj, dict):
            return lp.NOT_MINE
        step, data = obj.get("step"), obj.get("data")
        if not isinstance(data, dict):
            return lp.CONSUMED
        if step == "PARAMETER":
            for k in ("batch_size", "world_size", "amp", "fp16", "prof", "print_freq", "train_batch_size", "max_steps"):
                if k in data:
                    self.params[k] = data[k]
            return lp.CONSUMED
        if isinstance(step, list) and len(step) == 0:
            v = lp.to_float(data.get(self.final_key))
            if v is not None:
                self.final = v
            return lp.CONSUMED
        if (isinstance(step, list) and len(step) == 1 and isinstance(step[0], int) and not isinstance(step[0], bool)
                and "val.top1" in data):  # the epoch's record (Logger.end_epoch): its validation, in percent
            e = _evaluation(step[0], data, obj.get("timestamp"))
            if e is not None and len(self.evals) < 100_000:
                self.evals.append(e)
            return lp.CONSUMED
        if (isinstance(step, list) and len(step) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                              for x in step) and obj.get("type", "LOG") == "LOG"):
            if self.first is None:
                self.first = lp.to_float(obj.get("timestamp"))
            speed = lp.to_float(data.get(self.speed_key)) if self.speed_key else None
            loss = None
            for key in self.loss_keys:
                if key in data:
                    loss = lp.to_float(data[key])
                    break
            self.json_steps += 1
            self.add(step[0], step[1], self.epoch_clock.seconds(obj.get("timestamp")), speed, loss)
        return lp.CONSUMED

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        at = text.rfind("DLL")  # the last record on the line (a record glued after a fragment is still read)
        if at < 0:
            return lp.NOT_MINE
        if at > 0 and text[at - 1] == "D" and text.startswith("DLLL {", at - 1):
            return self.json_line(text, at - 1, final)
        if text.startswith("DLL ", at):
            return self.text_line(text, at, final)
        at = text.rfind("DLLL {")
        if at >= 0:
            return self.json_line(text, at, final)
        at = text.rfind("DLL ")
        return self.text_line(text, at, final) if at >= 0 else lp.NOT_MINE


def _parse_dllogger(suite: _NGCPyTorch, lines: Iterable[str], ctx: ParseContext) -> RunResult:
    st = _State(lp.Window(ctx.warmup_steps, ctx.measure_steps), suite.speed_metric, suite.loss_metrics,
                suite.final_metric)
    window, gb = st.window, float(ctx.global_batch)
    facts = lp.Scanner(st.handler, starts=_starts, needles=("DLL",)).run(lines)
    extra: dict[str, Any] = {}
    params = st.params
    if params:
        extra["parameters"] = dict(params)
        try:
            ws, bs = int(params.get("world_size", 0)), int(params.get("batch_size", params.get("train_batch_size", 0)))
            if ws and bs and ws * bs != ctx.global_batch:
                extra["global_batch_mismatch"] = f"log world_size {ws} x batch_size {bs}, expected {ctx.global_batch}"
        except (TypeError, ValueError):
            pass
    if st.final is not None:
        extra["reported_throughput"] = st.final
    extra["formats"] = [f for f, n in (("dllogger-json", st.json_steps), ("dllogger-text", st.text_steps)) if n]
    if st.evals:  # the time to target runs from the first training record (one print interval after the start)
        extra.update(accuracy.extra(st.evals, first_step_time=st.first))
    return lp.finish(window, facts, ctx, global_batch=gb, extra=extra,
                     no_memory_reason="DeepLearningExamples logs report no GPU memory")
