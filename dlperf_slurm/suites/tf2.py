"""``tf2``: TensorFlow 2 Model Garden (tensorflow/models) ResNet-50 and BERT-base, as DLPerf ran them.

ResNet-50 is ``official.legacy.image_classification.classifier_trainer`` (DLPerf: r2.3.0
``official/vision/image_classification/classifier_trainer.py``); it logs Keras ``TimeHistory`` lines every
``log_steps`` steps (by default the largest count that divides both the warm-up and the measured window, so the
window's ends are logged). BERT is ``official.legacy.bert.run_pretraining``; it logs a ``Train Step:`` line per
step. By default the programs are the installed Model Garden's modules (``pip install tf-models-official``;
``tests/frameworks/tf2.txt`` is a CPU recipe); the ``script`` option runs a checkout's file instead.

Every run writes its model, checkpoints and summaries to ``model_dir = <run>.work/model`` (``suites.RUN_DIR``),
which the job script empties at each start, and ResNet-50 runs with ``train.resume_checkpoint=false``: no repeat
restores another one's checkpoint and times nothing real (DLPerf's scripts ``rm -rf`` their one model dir before
each run). In a container, mount the campaign folder so the program can write there.

Multi-worker runs (``tf_config`` launcher, one worker per node, MultiWorkerMirroredStrategy): ResNet-50 works with
two CPU workers. BERT reads its input files sharded by file across workers, so ``input_files`` must match at least
one file per worker: with a single file, worker 1 has no data and the run dies at the first step with
``Collective instance 274 expected type 0 and data_type 1 but got type 0 and data_type 9`` (TF 2.21 CPU; the
``upstream-on-cpu`` failure). ``python -m dlperf_slurm.workloads.tf2_bert_data`` writes a small data set in shards.
"""

from __future__ import annotations

import math
import re
import shlex
import statistics
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.model.status import Status
from dlperf_slurm.suites import RUN_DIR, Suite, register

MODEL_DIR = f"{RUN_DIR}/model"  # each run's own, emptied at every start


class _TF2(Suite):
    framework = "tf2"
    imports = ("tensorflow",)
    launcher = "tf_config"
    launchers = ("tf_config",)
    precisions = ("fp32", "amp")
    supports_xla = True
    prefer: str = "timehistory"  # parsing: which progress lines time the window ("timehistory" or "trainstep")
    # options both programs share: the interpreter, the program (an installed module, or a checkout's script),
    # runtime num_gpus (-1: the cell's GPUs per node; 0 on CPU machines) and extra arguments (split as a shell
    # would, each passed on as one word)
    common_options = {"python": "python3", "script": "", "num_gpus": -1, "extra_args": ""}

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse_tf2(self.prefer, lines, ctx)

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "num_gpus" and value < -1:
            return "must be -1 (the cell's GPUs per node) or a count >= 0"
        if name == "extra_args":
            try:
                shlex.split(value)
            except ValueError as err:
                return f"cannot be split into arguments: {err}"
        return None

    def entry(self, options: Mapping[str, Any]) -> list[str]:
        """``python -m MODULE``, or ``python SCRIPT`` when the ``script`` option names a checkout's file."""
        if options["script"]:
            return [options["python"], options["script"]]
        return [options["python"], "-m", options["module"]]

    @staticmethod
    def num_gpus(cell, options: Mapping[str, Any]) -> int:
        return cell.gpus_per_node if options["num_gpus"] < 0 else options["num_gpus"]


@register
class ResNet50(_TF2):
    model = "resnet50"
    description = "TF Model Garden official.legacy.image_classification.classifier_trainer (Keras, TimeHistory)"
    sample_unit = "img/s"
    published = "speed"  # DLPerf's TF2 table: extract_tensorflow_logs.py, the mean of TimeHistory's examples/second
    dlperf_window = (100, 500)  # DLPerf: 600 steps, TimeHistory every 100, the first interval skipped
    options = {**_TF2.common_options, "module": "official.legacy.image_classification.classifier_trainer",
               "data_dir": "/data/tfrecords",
               "builder": "records",  # the data set builder: "records" (ImageNet TFRecords in data_dir), "synthetic"
               "config_file": "",  # --config_file (DLPerf: configs/examples/resnet/imagenet/gpu.yaml); "": defaults
               "params_override": "",  # more key=value overrides, after this suite's
               "log_steps": 0}  # 0: gcd(warmup_steps, measure_steps)

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "builder" and value not in ("records", "synthetic", "tfds"):
            return "must be records, synthetic or tfds"
        if name == "log_steps" and value < 0:
            return "must be >= 0 (0: gcd(warmup_steps, measure_steps))"
        return super().option_error(name, value)

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        steps = measure.warmup_steps + measure.measure_steps
        log_steps = options["log_steps"] or math.gcd(measure.warmup_steps, measure.measure_steps)
        overrides = [
            f"runtime.num_gpus={self.num_gpus(cell, options)}",
            "runtime.distribution_strategy=" + ("multi_worker_mirrored" if cell.nodes > 1 else "mirrored"),
            "runtime.enable_xla=" + ("true" if cell.xla else "false"),
            *(f"{d}.{k}={v}" for d in ("train_dataset", "validation_dataset") for k, v in (
                ("builder", options["builder"]), ("batch_size", cell.batch_size),
                ("use_per_replica_batch_size", "true"),
                ("dtype", "float16" if cell.precision == "amp" else "float32"))),
            f"train.steps={steps}", "train.epochs=1",
            # a fresh model every run; no checkpoint or TensorBoard writes (outside the window: DLPerf's runs
            # wrote one after it) and no evaluation after it
            "train.resume_checkpoint=false", "train.callbacks.enable_checkpoint_and_export=false",
            "train.callbacks.enable_tensorboard=false", "evaluation.skip_eval=true",
        ]
        if options["params_override"]:
            overrides.append(options["params_override"])
        argv = [*self.entry(options), "--mode=train_and_eval", "--model_type=resnet", "--dataset=imagenet",
                f"--model_dir={MODEL_DIR}", f"--data_dir={options['data_dir']}",
                f"--log_steps={log_steps}"]  # the flag: it wins over train.time_history.log_steps
        if options["config_file"]:
            argv.append(f"--config_file={options['config_file']}")
        return [*argv, "--params_override=" + ",".join(overrides), *shlex.split(options["extra_args"])]


@register
class BertBase(_TF2):
    model = "bert-base"
    description = "TF Model Garden official.legacy.bert.run_pretraining (custom loop), seq 128"
    sample_unit = "seq/s"
    prefer = "trainstep"
    dlperf_window = (20, 100)  # DLPerf: the 20th to the 120th Train Step line
    options = {**_TF2.common_options, "module": "official.legacy.bert.run_pretraining",
               "input_files": "/data/bert/wiki/*.tfrecord", "bert_config_file": "/data/bert/bert_config.json",
               "all_reduce_alg": "nccl"}  # multi-worker only; "": TF's choice (CPU workers)

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        argv = [*self.entry(options), f"--input_files={options['input_files']}", "--max_seq_length=128",
                "--max_predictions_per_seq=20", f"--train_batch_size={cell.global_batch}",
                f"--num_steps_per_epoch={measure.warmup_steps + measure.measure_steps}", "--num_train_epochs=1",
                "--warmup_steps=10000", "--use_next_sentence_label=True", "--train_summary_interval=0",
                "--optimizer_type=adamw", f"--num_gpus={self.num_gpus(cell, options)}",
                "--dtype=" + ("fp16" if cell.precision == "amp" else "fp32"),
                "--enable_xla=" + ("true" if cell.xla else "false"),
                f"--model_dir={MODEL_DIR}", f"--bert_config_file={options['bert_config_file']}"]
        if cell.nodes > 1:
            argv.append("--distribution_strategy=multi_worker_mirrored")
            if options["all_reduce_alg"]:
                argv.append(f"--all_reduce_alg={options['all_reduce_alg']}")
        return [*argv, *shlex.split(options["extra_args"])]


# ----------------------------------------------------------------------------------------------- parsing
# absl/glog lines (suites-reference.md §3.8, §3.9):
#   I0826 15:13:29.256277 140405777909504 keras_utils.py:133] TimeHistory: 39.13 seconds, 327.08 examples/second between steps 100 and 200  # noqa: E501
#   I0826 15:13:29.256277 140405777909504 model_training_utils.py:444] Train Step: 20/120  / loss = 8.02...
#   600/600 - 239s - loss: 10.4633 - accuracy: 0.1303 - top_5_accuracy: 0.2842       (Keras progress)
# TimeHistory logs every ``log_steps`` steps (coarse): the window is measured over the logged intervals that lie
# wholly inside it (method.md), from the glog timestamps (no year in them: see GlogClock); the speed flavour is
# the mean of ``examples/second`` over the same intervals (DLPerf's published TF2 figure).
# With MultiWorkerMirrored every worker logs. With ``srun -l`` labels, rank 0 (the chief) is read; unlabelled
# workers are told apart by the glog thread id, each is measured, and the median across workers is the run's
# figure (method.md, "Which rank").

_NUM = lp.NUM  # a number, nan or inf

_GLOG = re.compile(r"([IWEF])(\d{4}) (\d\d:\d\d:\d\d\.\d+)\s+(\d+) [^\]]*\] ")
_GLOG_START = re.compile(r"[IWEF]\d{4}")
_TIMEHISTORY = re.compile(
    r"TimeHistory: (" + _NUM + r") seconds, (" + _NUM + r") examples/second between steps (\d+) and (\d+)\s*$")
_TRAINSTEP = re.compile(r"Train Step: (\d+)/(\d+)\s+/ loss = (\S+?)(?:\s|$)")
# Keras' own progress line: ``step/steps`` first on the line (or after a carriage return: a progress bar's updates
# on one line), the metrics joined with " - ". Not a trainer's line whose time stamp is ``[MM/DD hh:mm:ss]`` or
# ``[YYYY/MM/DD ...]`` before its own ``loss:`` field (PaddleDetection's, PaddleOCR's): no suite reads those.
_KERAS = re.compile(r"(?:^|\r)[ \t]*(\d+)/(\d+) [^\r]*? - loss: (\S+?)(?:\s|$)")
_MAX_STREAMS = 64


def _starts(text: str) -> bool:
    return bool(_GLOG.match(text))


def _wanted(text: str) -> bool:
    """Lines the handler must see: records, and short glog lines that may be a record cut by buffering."""
    return "TimeHistory" in text or "Train Step" in text or "loss: " in text or (len(text) < 100 and text[:1] in "IWEF")


# For the block path: every line the handler does anything with holds one of these, or is one of _wanted's short
# lines (a record cut inside its glog header or keyword): _BLOCK_SHORT. A needle per glog header ("I0", ...) took
# every glog line of a TF log, noise included (150 lines a log on DLPerf's TF2 logs instead of 7).
_BLOCK_NEEDLES = ("TimeHistory", "Train Step", "loss: ")
_KEYWORDS = ("TimeHistory:", "Train Step:")
# Of the short lines, the handler takes as a record's head only those cut inside the glog header (its level and 4
# digits, then no "]" but maybe as the last character: a whole header ends with "] " and holds no other) or right
# after a header, inside a keyword (the header, then a prefix of one: also a header after another writer's torn
# bytes); the Hyperscan sieve finds those (a superset: any such line, of any length; any line ending so), where the
# length rule took every short glog line of a TF job's start-up (14 a log on the bench's: 0.03 ms a log)
_HEADS = (rb"^[IWEF][0-9]{4}[^\]\n]*\]?$",
          rb"\] (?:" + b"|".join(sorted({re.escape(k[:n].encode()) for k in _KEYWORDS for n in range(1, 12)}))
          + rb")?$")
_BLOCK_SHORT = lp.Short("IWEF", 100, _HEADS)


class _Streams:
    """One Window per worker: lines of one worker share a glog thread id; a step seen twice under one id starts
    another worker's stream (thread ids can coincide across hosts)."""

    def __init__(self, ctx: ParseContext):
        self.ctx = ctx
        self.streams: list[tuple[str, Any, set]] = []

    def window(self, key: str, step: int):

        for k, w, seen in self.streams:
            if k == key and step not in seen:
                seen.add(step)
                return w
        if len(self.streams) >= _MAX_STREAMS:
            return None
        w = lp.Window(self.ctx.warmup_steps, self.ctx.measure_steps)
        self.streams.append((key, w, {step}))
        return w

    def windows(self) -> list:
        return [w for _, w, _ in self.streams]


def _last_glog(text: str, end: int) -> re.Match | None:
    """The last glog/absl header (``I0826 15:12:50.113950 140405777909504 file.py:133]``) before ``end``."""
    head = None
    for head in _GLOG.finditer(text, 0, end):  # noqa: B007 - the loop keeps the last match
        pass
    return head


def _cut_glog(text: str) -> int:
    """A short glog line that is no record: FRAGMENT where it may be one's head cut by buffering (inside the glog
    header, or inside the record's keyword right after it), else NOT_MINE."""
    g = _GLOG.match(text)
    if g is None:
        if text.find("]", 0, len(text) - 1) < 0:
            return lp.FRAGMENT  # cut inside the glog prefix (a whole one ends with "] ", no other "]")
        g = _last_glog(text, len(text))  # another writer's bytes, then a whole header
        if g is None:
            return lp.NOT_MINE
    msg = text[g.end():]
    if len(msg) < 12 and ("TimeHistory:".startswith(msg) or "Train Step:".startswith(msg)):
        return lp.FRAGMENT  # cut inside the record's keyword
    return lp.NOT_MINE


class _Reader:
    """The line handler (:meth:`handler`) and what it reads: TimeHistory's and Train Step's windows per worker,
    the Keras progress lines' steps and losses."""

    def __init__(self, ctx: ParseContext):
        self.clock = lp.GlogClock()
        self.th, self.ts = _Streams(ctx), _Streams(ctx)
        self.keras = lp.Window(ctx.warmup_steps, ctx.measure_steps)  # Keras progress lines: steps and losses only

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        if "TimeHistory:" in text:
            return self._timehistory(text, final)
        if "Train Step:" in text:
            return self._train_step(text, final)
        if "loss: " in text:
            m = _KERAS.search(text)
            if m:
                self.keras.add(int(m.group(1)), loss=lp.to_float(m.group(3)))
                return lp.CONSUMED
        if not final and text[:1] in "IWEF" and _GLOG_START.match(text):
            return _cut_glog(text)
        return lp.NOT_MINE

    def _timehistory(self, text: str, final: bool) -> int:
        if not final:  # the line ends with a step number: it may be cut short, read it with what follows
            return lp.FRAGMENT
        at = text.rfind("TimeHistory:")
        head = _last_glog(text, at)
        m = _TIMEHISTORY.match(text, at)
        if not m:
            return lp.NOT_MINE
        a, b = int(m.group(3)), int(m.group(4))
        secs, speed = lp.to_float(m.group(1)), lp.to_float(m.group(2))
        t = self.clock.seconds(head.group(2), head.group(3)) if head else None
        w = self.th.window(head.group(4) if head else "", b)
        if w is not None and b > a:
            w.add(b, t, speed=speed, span_from=a, span_seconds=secs)
        return lp.CONSUMED

    def _train_step(self, text: str, final: bool) -> int:
        at = text.rfind("Train Step:")
        head = _last_glog(text, at)
        m = _TRAINSTEP.match(text, at)
        if not m:
            return lp.NOT_MINE if final else lp.FRAGMENT
        if not final and text.endswith(m.group(3)):  # the loss ends the line: it may be cut, wait for more
            return lp.FRAGMENT
        step = int(m.group(1))
        t = self.clock.seconds(head.group(2), head.group(3)) if head else None
        w = self.ts.window(head.group(4) if head else "", step)
        if w is not None:
            w.add(step, t, loss=lp.to_float(m.group(3)))
        return lp.CONSUMED


def _median_figures(figs: list[lp.WindowFigures], extra: dict[str, Any]) -> lp.WindowFigures | None:
    """The run's figures from its measured workers': the first's, or with several the median over them (each
    worker's throughput kept in ``extra``)."""
    fig = None
    if figs:
        fig = figs[0]
        if len(figs) > 1:
            extra["workers_measured"] = len(figs)
            extra["per_worker_throughput"] = [f.throughput for f in figs]
            speeds = [f.speed for f in figs if f.speed is not None]
            fig = lp.WindowFigures(start=fig.start, end=fig.end, seconds=statistics.median(f.seconds for f in figs),
                                   throughput=statistics.median(f.throughput for f in figs),
                                   latency_ms=statistics.median(f.latency_ms for f in figs),
                                   speed=statistics.median(speeds) if speeds else None, speed_points=fig.speed_points)
    return fig


def _parse_tf2(prefer: str, lines: Iterable[str], ctx: ParseContext) -> RunResult:
    r = _Reader(ctx)
    facts = lp.Scanner(r.handler, starts=_starts, wanted=_wanted, block_needles=_BLOCK_NEEDLES,
                       block_short=_BLOCK_SHORT).run(lines)
    th, ts, keras = r.th, r.ts, r.keras
    order = (th, ts) if prefer == "timehistory" else (ts, th)
    source = next((s for s in order if s.streams), order[0])
    windows = source.windows()
    gb = float(ctx.global_batch)
    figs = [f for f in (w.figures(gb) for w in windows) if f is not None]
    extra: dict[str, Any] = {"progress_lines": "TimeHistory" if source is th else "Train Step",
                             "workers_seen": len(windows)}
    if windows:
        primary = max(windows, key=lambda w: (w.reached, w.max_step))
    else:
        primary = keras
    for w in (*windows, keras):  # a non-finite loss anywhere in the run
        if w.nonfinite is not None and primary.nonfinite is None:
            primary.nonfinite = w.nonfinite
        if w.last_loss is not None and primary.last_loss is None:
            primary.last_loss = w.last_loss
    fig = _median_figures(figs, extra)
    reached = any(w.reached for w in windows) if windows else False
    if not windows and keras.points:
        extra["progress_lines"] = "Keras progress only (no TimeHistory / Train Step lines)"
    res = lp.finish(primary, facts, ctx, global_batch=gb, figures=fig if reached else None, complete=reached,
                    extra=extra, no_memory_reason="TensorFlow model-garden logs report no GPU memory")
    if not windows and keras.reached and res.status in (Status.INCOMPLETE, Status.UNMEASURED):
        res.status = Status.UNMEASURED
        res.reason = "the log has Keras progress lines but no TimeHistory or Train Step lines to time the window"
    res.steps_seen = max([w.max_step for w in windows] + [keras.max_step])
    return res
