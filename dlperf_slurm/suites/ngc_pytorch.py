"""``ngc-pytorch``: NVIDIA DeepLearningExamples PyTorch ResNet-50 v1.5 and BERT, as DLPerf ran them
(NGC PyTorch container). Logs are dllogger's StdOutBackend (``DLL <datetime> - ...``) or JSON stream (``DLLL {...}``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

from dlperf_slurm.suites import ParseContext, RunResult, Suite, register


class _NGCPyTorch(Suite):
    framework = "ngc-pytorch"
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

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        argv = [
            options["python"], f"{options['workdir']}/main.py",
            "--arch", "resnet50", "-c", "fanin", "--label-smoothing", "0.1",
            "--data-backend", str(cell.param("data_backend", "synthetic")),
            "-b", str(cell.batch_size), "--epochs", "1",
            "--prof", str(measure.warmup_steps + measure.measure_steps + 1),
            "-p", "1", "--training-only", "--no-checkpoints", "--workspace", "/tmp",
        ]
        if cell.precision == "amp":
            argv += ["--amp", "--dynamic-loss-scale"]
        return argv + [options["data_dir"]]


@register
class BertBase(_NGCPyTorch):
    model = "bert-base"
    description = "DeepLearningExamples PyTorch/LanguageModeling/BERT run_pretraining.py, phase 1, seq 128"
    sample_unit = "seq/s"
    loss_metrics = ("step_loss", "average_loss")
    final_metric = "training_sequences_per_second"
    options = {"workdir": "/workspace/bert", "data_dir": "/data/bert/phase1", "config_file": "/workspace/bert/bert_config.json",
               "python": "python"}

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
#   StdOutBackend  DLL 2020-09-15 14:29:13.473765 - Epoch: 0 Iteration: 1  train.loss : 7.09304  train.total_ips : 267.44 img/s
#                  DLL 2020-09-24 02:10:30.123456 - Training Epoch: 0 Training Iteration: 25  average_loss : 10.48  step_loss : 10.43 ...
#   JSON stream    DLLL {"timestamp": "1570716921.842053", ..., "type": "LOG", "step": [0, 5], "data": {"train.loss": ...}}
# A step is (epoch, iteration); iterations restart each epoch, so steps are counted across epochs. Validation
# lines (a third step element) and the run summary (no step) are not training steps. The window is method.md's:
# the DLL timestamps at the ends of steps ``warmup`` and ``warmup + measure`` (DLPerf's own extractor skipped
# iterations <= 5 first, i.e. a window of 25 -> 125: pass ``--warmup-steps 25`` to reproduce it).

_DLL = re.compile(r"DLL (\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?) - ")
_STEP = re.compile(r"(?:Training )?Epoch: (\d+) (?:Training )?Iteration: (\d+)  ")
_METRIC = re.compile(r"([A-Za-z_][\w.]*) : (\S+)(?: ([A-Za-z%][\w/%]*))?(?=\s|$)")
_PARAM = re.compile(r"\b(batch_size|world_size|amp|fp16|prof|print_freq|train_batch_size|max_steps) : (\S+)")


def _starts(text: str) -> bool:
    return "DLL " in text


def _parse_dllogger(suite: _NGCPyTorch, lines: Iterable[str], ctx: ParseContext) -> RunResult:
    from dlperf_slurm import logparse as lp

    window = lp.Window(ctx.warmup_steps, ctx.measure_steps)
    iso, epoch = lp.IsoClock(), lp.EpochClock()
    gb = float(ctx.global_batch)
    speed_key, loss_keys, final_key = suite.speed_metric, suite.loss_metrics, suite.final_metric
    speed_done = re.compile(re.escape(speed_key or "") + r" : \S+ [A-Za-z%]")
    st: dict[str, Any] = {"epoch": None, "offset": 0, "last_iter": 0, "params": {}, "final": None, "json": 0, "text": 0}

    def step_of(epoch: int, it: int) -> int:
        if st["epoch"] is None:
            st["epoch"] = epoch
        elif epoch > st["epoch"]:
            st["offset"] += st["last_iter"]
            st["epoch"], st["last_iter"] = epoch, 0
        st["last_iter"] = max(st["last_iter"], it)
        return st["offset"] + it

    def add(epoch: int, it: int, t: float | None, speed: float | None, loss: float | None) -> None:
        step = step_of(epoch, it)
        # No span from the printed ips: in real logs train.total_ips is ~2x what the timestamps give (it leaves
        # out part of the iteration), so it cannot stand in for a missing boundary time.
        window.add(step, t, speed=speed if speed is not None and lp.finite(speed) else None, loss=loss)

    def text_line(text: str, at: int, final: bool) -> int:
        m = _DLL.match(text, at)
        if not m:
            return lp.NOT_MINE if final or len(text) - at > 40 else lp.FRAGMENT
        body = text[m.end():]
        sm = _STEP.match(body)
        if not sm:
            if body.startswith("PARAMETER"):
                for k, v in _PARAM.findall(body):
                    st["params"][k] = v
                return lp.CONSUMED
            if not final and len(body) < 60 and not body.startswith("Summary"):
                return lp.FRAGMENT  # maybe cut inside "Epoch: 0 Iteration: 12  ": read it with what follows
            if body.startswith("Summary:") or body.startswith(" "):  # run summary: step ()
                metrics = {k: (v, u) for k, v, u in _METRIC.findall(body)}
                if final_key in metrics and metrics[final_key][1]:
                    st["final"] = lp.to_float(metrics[final_key][0])
            return lp.CONSUMED
        if speed_key is not None:  # complete once the speed metric and its unit are there
            complete = bool(speed_done.search(body))
        else:  # dllogger ends a line with a space after a value without unit
            complete = body.endswith((" ", "\t", "/s", "None"))
        if not complete and not final:
            return lp.FRAGMENT
        metrics = {k: (v, u) for k, v, u in _METRIC.findall(body, sm.end())}
        speed = None
        if speed_key and speed_key in metrics and metrics[speed_key][1]:  # a value cut short has lost its unit
            speed = lp.to_float(metrics[speed_key][0])
        loss = None
        for key in loss_keys:
            if key in metrics:
                val, unit = metrics[key]
                if body.endswith(val):  # the last value on a cut line may be cut too
                    continue
                loss = lp.to_float(val)
                break
        st["text"] += 1
        add(int(sm.group(1)), int(sm.group(2)), iso.seconds(m.group(1)), speed, loss)
        return lp.CONSUMED

    def json_line(text: str, at: int, final: bool) -> int:
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
                    st["params"][k] = data[k]
            return lp.CONSUMED
        if isinstance(step, list) and len(step) == 0:
            v = lp.to_float(data.get(final_key))
            if v is not None:
                st["final"] = v
            return lp.CONSUMED
        if (isinstance(step, list) and len(step) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                              for x in step) and obj.get("type", "LOG") == "LOG"):
            speed = lp.to_float(data.get(speed_key)) if speed_key else None
            loss = None
            for key in loss_keys:
                if key in data:
                    loss = lp.to_float(data[key])
                    break
            st["json"] += 1
            add(step[0], step[1], epoch.seconds(obj.get("timestamp")), speed, loss)
        return lp.CONSUMED

    def handler(text: str, rank: int | None, final: bool) -> int:
        at = text.rfind("DLLL {")
        if at >= 0:
            return json_line(text, at, final)
        at = text.rfind("DLL ")
        if at >= 0:
            return text_line(text, at, final)
        return lp.NOT_MINE

    facts = lp.Scanner(handler, starts=_starts).run(lines)
    extra: dict[str, Any] = {}
    params = st["params"]
    if params:
        extra["parameters"] = dict(params)
        try:
            ws, bs = int(params.get("world_size", 0)), int(params.get("batch_size", params.get("train_batch_size", 0)))
            if ws and bs and ws * bs != ctx.global_batch:
                extra["global_batch_mismatch"] = f"log world_size {ws} x batch_size {bs}, expected {ctx.global_batch}"
        except (TypeError, ValueError):
            pass
    if st["final"] is not None:
        extra["reported_throughput"] = st["final"]
    extra["formats"] = [f for f, n in (("dllogger-json", st["json"]), ("dllogger-text", st["text"])) if n]
    return lp.finish(window, facts, ctx, global_batch=gb, extra=extra,
                     no_memory_reason="DeepLearningExamples logs report no GPU memory")
