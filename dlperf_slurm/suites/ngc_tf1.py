"""``ngc-tf1``: NVIDIA DeepLearningExamples TensorFlow 1 ResNet-50 v1.5 (``TensorFlow/Classification/ConvNets``
``main.py``) and BERT-base pre-training (``TensorFlow/LanguageModeling/BERT`` ``run_pretraining.py``), as DLPerf ran
them in the NGC TF1 container (``nvcr.io/nvidia/tensorflow:20.03-tf1-py3``, DLE checkout ``fed7ba99``): one Horovod
rank per GPU, started by ``mpirun`` or ``horovodrun`` from the batch shell, or by ``srun --mpi=pmix|pmi2`` (the
ranks' PMI: what DLE's own TF1 BERT ``run.sub`` does with ``--mpi=pmi2``).

Flag spellings follow the DLE checkout (option ``dle``): ``fed7ba99`` (DLPerf's: ConvNets ``--precision=fp32
--use_tf_amp --use_static_loss_scaling --loss_scale=128 --use_dali --use_cosine_lr``; BERT ``--use_fp16``, XLA off
by default) or ``master`` (ConvNets ``--amp --static_loss_scale=128 --dali --cosine_lr``; BERT ``--amp``/``--noamp``
and ``--use_xla``/``--nouse_xla``, both on by default there, so both are always said). ``--use_xla`` is valid in both
ConvNets parsers (an alias of ``--xla`` on master).

The measurement window (warm-up W, measured M steps), in the programs' own terms:
  ConvNets  ``--iter_unit=batch --num_iter=W+M --warmup_steps=W-1 --display_every=1``: its logging hook prints a
            step's ``total_ips`` (``--mode=training_benchmark``) or ``imgs_per_sec`` (``--mode=train``) from its
            0-based step ``warmup_steps`` on, i.e. from 1-based step W, so the log times the window's both ends.
            (fed7ba99's ``--mode=train`` hook logs from its step 20 whatever the flag, as in DLPerf's logs: the
            window's start is then put back from the first logged step's own batch time, ``global batch / ips``.)
  BERT      ``--num_train_steps=W+M --display_loss_steps=1``: ``Iteration: N`` is 1-based (``global_step + 1``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.suites import RUN_DIR, Suite, register

_DLE = ("fed7ba99", "master")


class _NGCTF1(Suite):
    framework = "ngc-tf1"
    imports = ("tensorflow",)
    launcher = "mpirun"
    launchers = ("mpirun", "horovodrun", "srun")
    precisions = ("fp32", "amp")
    supports_xla = True
    # parsing: the per-step throughput metric(s), the run summary's, and how a logged step maps to a 1-based step
    speed_keys: tuple[str, ...] = ()
    summary_key: str = ""

    def drop_reason(self, cell) -> str | None:
        why = super().drop_reason(cell)
        if why is None and cell.launcher == "srun" and not any(a.startswith("--mpi=") for a in cell.launcher_args):
            why = (f"{self.name} under srun needs the ranks' PMI for Horovod: add launcher_args = "
                   "[\"--mpi=pmix\"] (or --mpi=pmi2); without it every rank is a world of one")
        return why

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "dle" and value not in _DLE:
            return f"must be one of {', '.join(_DLE)} (the DeepLearningExamples checkout whose flags to use)"
        return None

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse(self, lines, ctx)


@register
class ResNet50(_NGCTF1):
    model = "resnet50"
    description = ("DeepLearningExamples TensorFlow/Classification/ConvNets main.py --arch=resnet50 "
                   "(--mode=training_benchmark; synthetic data unless data = tfrecords|dali)")
    sample_unit = "img/s"
    published = "speed"  # DLPerf's README table is extract_tensorflow_logs.py's: the mean of the printed imgs_per_sec
    dlperf_window = (20, 100)  # its 120 iterations, the printed speeds of steps 21..120
    axes = {"data": ("synthetic", "tfrecords", "dali"), "mode": ("training_benchmark", "train")}
    axis_defaults = {"data": "synthetic", "mode": "training_benchmark"}
    options = {"python": "python3", "workdir": "/workspace/rn50v15_tf", "script": "main.py",
               "data_dir": "/data/tfrecords", "data_idx_dir": "/data/dali_idx", "dle": "fed7ba99"}
    speed_keys = ("total_ips", "imgs_per_sec")
    summary_key = "train_throughput"

    def drop_reason(self, cell) -> str | None:
        why = super().drop_reason(cell)
        if why is None and cell.param("mode") == "train" and cell.param("data", "synthetic") == "synthetic":
            why = "main.py --mode=train needs data_dir (synthetic data is --mode=training_benchmark only)"
        return why

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        master = options["dle"] == "master"
        data, w = cell.param("data", "synthetic"), measure.warmup_steps
        argv = [options["python"], f"{options['workdir']}/{options['script']}", "--arch=resnet50",
                f"--mode={cell.param('mode', 'training_benchmark')}", "--iter_unit=batch",
                f"--num_iter={w + measure.measure_steps}", f"--batch_size={cell.batch_size}",
                f"--warmup_steps={max(w - 1, 0)}", "--display_every=1", f"--results_dir={RUN_DIR}/results",
                # DLPerf's training hyper-parameters (its single- and multi-node scripts differ in lr_init)
                "--cosine_lr" if master else "--use_cosine_lr", "--label_smoothing=0.1",
                "--lr_init=" + ("0.001" if cell.nodes == 1 else "0.256"), "--lr_warmup_epochs=8",
                "--momentum=0.875", "--weight_decay=3.0517578125e-05", "--weight_init=fan_in"]
        if cell.precision == "amp":
            argv += (["--amp", "--static_loss_scale=128"] if master else
                     ["--precision=fp32", "--use_tf_amp", "--use_static_loss_scaling", "--loss_scale=128"])
        elif not master:
            argv.append("--precision=fp32")
        if data != "synthetic":  # no --data_dir: main.py's synthetic data set
            argv.append(f"--data_dir={options['data_dir']}")
        if data == "dali":
            argv += ["--dali" if master else "--use_dali", f"--data_idx_dir={options['data_idx_dir']}"]
        if cell.xla:
            argv.append("--use_xla")
        if cell.nodes > 1:
            argv.append("--gpu_memory_fraction=0.98")  # DLPerf's multi-node script
        return argv


@register
class BertBase(_NGCTF1):
    model = "bert-base"
    description = ("DeepLearningExamples TensorFlow/LanguageModeling/BERT run_pretraining.py, BERT-base, seq 128, "
                   "Adam (DLPerf's flags; real tfrecords: the program has no synthetic data)")
    sample_unit = "seq/s"
    published = "time"  # DLPerf's README table is extract_tensorflow_logs_time.py's: stamps of Iteration 20 and 120
    dlperf_window = (20, 100)
    options = {"python": "python3", "workdir": "/workspace/bert", "script": "run_pretraining.py",
               "input_files_dir": "/workspace/bert/data/tfrecord",
               "bert_config_file": "/workspace/bert/data/bert_config.json", "dle": "fed7ba99"}
    speed_keys = ("throughput_train",)
    summary_key = "throughput_train"

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        master = options["dle"] == "master"
        argv = [options["python"], f"{options['workdir']}/{options['script']}",
                f"--input_files_dir={options['input_files_dir']}", f"--eval_files_dir={options['input_files_dir']}",
                f"--output_dir={RUN_DIR}/results", f"--dllog_path={RUN_DIR}/bert_dllog.json",
                f"--bert_config_file={options['bert_config_file']}", "--do_train=True", "--do_eval=False",
                f"--train_batch_size={cell.batch_size}", "--eval_batch_size=16", "--max_seq_length=128",
                "--max_predictions_per_seq=20", f"--num_train_steps={measure.warmup_steps + measure.measure_steps}",
                "--num_warmup_steps=10000", "--num_accumulation_steps=1", "--save_checkpoints_steps=10000",
                "--learning_rate=1e-4", "--optimizer_type=adam", "--allreduce_post_accumulation=False",
                "--display_loss_steps=1"]
        if cell.devices > 1:
            argv.append("--horovod")  # DLPerf: --horovod whenever more than one GPU
        amp, xla = cell.precision == "amp", cell.xla
        if master:
            argv += ["--amp" if amp else "--noamp", "--use_xla" if xla else "--nouse_xla"]
        else:
            argv += (["--use_fp16"] if amp else []) + (["--use_xla"] if xla else [])
        return argv


# ----------------------------------------------------------------------------------------------- parsing
# dllogger on rank 0 only (both programs), its StdOutBackend on stdout; real lines (tests/fixtures/real/ngc-tf1/):
#   ConvNets, training_benchmark   DLL 2020-12-16 07:39:49.397291 - (0, 200) total_ips : 8248.821093327622
#   ConvNets, train (DLPerf's)     DLL <stamp> - (0, 20) imgs_per_sec : 361.52  cross_entropy : ...  total_loss : ...
#   ConvNets, summary              DLL 2020-12-16 07:41:10.180123 - () train_throughput : 7810.758929502331
#   ConvNets, parameters           DLL <stamp> - PARAMETER arch : resnet50  mode : training_benchmark  ... batch_size : 256 ...  # noqa: E501
#   BERT                           DLL 2020-12-07 20:04:34.092791 - Iteration: 16  throughput_train : 145.221 seq/s mlm_loss : ...  # noqa: E501
#   BERT, summary                  DLL 2020-12-07 17:14:10.530985 -  throughput_train : 153.458 seq/s
#   JSON stream (the programs write it to a file: log.json / --dllog_path; read when a log holds it)
#                                  DLLL {"timestamp": "1608104389.397291", ..., "type": "LOG", "step": [0, 200], "data": {"total_ips": ...}}  # noqa: E501
# possibly behind Horovod/mpirun's ``[1,0]<stdout>:`` (``--tag-output``; with ``--timestamp-output`` after a date).
# Steps: ConvNets' (epoch, i) is a 0-based step index (the hook's own counter, or global_step), step = i + 1;
# BERT's Iteration is 1-based. ConvNets' speed is one step's (global batch / its session-run time); BERT's
# throughput_train is global batch / the mean step time since its previous line. A step logged again (BERT with
# AMP: a step the loss scaler skipped keeps its number) counts once, at its first line.

_DLL = re.compile(r"DLL (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) - ")
_TUPLE = re.compile(r"\((\d+), (\d+)\) ")
_ITER = re.compile(r"Iteration: (\d+) ")
# ``name : value`` (no look-ahead: a record glued back to the head of the next line still gives its last value)
_METRIC = re.compile(r"(?:^| )([A-Za-z_][\w.]*) : (" + lp.NUM + r")")
_PARAM = re.compile(r"(?:^| )(\w+) : (\S*)")
_TAG = re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:")
_LOSS_KEYS = ("total_loss", "avg_loss_step")


def _metrics(body: str) -> dict[str, str]:
    return {k: v for k, v in _METRIC.findall(body)}


@dataclass
class _State:
    """What a parse learns beside its window, and its line handler (:meth:`handler`): dllogger's records, in its
    text form or its JSON stream."""

    window: lp.Window
    gb: float  # the global batch
    speed_keys: tuple[str, ...]  # the suite's: the step records' speed metric, the first one a record has
    summary_key: str  # the run summary's throughput metric
    per_step: bool  # a line's speed is its own step's (else: since the previous line)
    iso: lp.IsoClock = field(default_factory=lp.IsoClock)
    epoch_clock: lp.EpochClock = field(default_factory=lp.EpochClock)
    prev: int = 0  # the highest step read
    seen: set[int] = field(default_factory=set)  # the steps read (a step's first line counts)
    params: dict[str, str] = field(default_factory=dict)  # the PARAMETER records
    final: float | None = None  # the run summary's own throughput
    json_steps: int = 0  # step records read in dllogger's JSON stream form
    text_steps: int = 0  # ... and in its text form
    keys: set[str] = field(default_factory=set)  # the speed metrics the step records carry

    def add(self, step: int, t: float | None, data: Mapping[str, Any]) -> None:
        speed = key = None
        for k in self.speed_keys:
            if k in data:
                key, speed = k, lp.to_float(data[k])
                break
        if key is None:
            return  # an epoch summary, an eval line: no training step
        loss = next((lp.to_float(data[k]) for k in _LOSS_KEYS if k in data), None)
        self.keys.add(key)
        if step in self.seen:
            return
        self.seen.add(step)
        span = step - 1 if self.per_step else min(self.prev, step - 1)
        self.prev = max(self.prev, step)
        good = speed if lp.finite(speed) and speed > 0 else None
        # the program's own time of the steps the speed covers: lets the window start where no line was logged
        self.window.add(step, t, speed=good, loss=loss, span_from=span,
                        span_seconds=(step - span) * self.gb / good if good is not None else None)

    def text_line(self, text: str, at: int, final: bool) -> int:
        m = _DLL.match(text, at)
        if m is None:
            return lp.NOT_MINE if final or len(text) - at > 40 else lp.FRAGMENT
        body = text[m.end():]
        if not final and not body.endswith(" "):  # dllogger ends every record with a space (value, or unit)
            return lp.FRAGMENT
        if body.startswith("PARAMETER "):
            self.params.update(_PARAM.findall(body[10:]))
            return lp.CONSUMED
        sm = _TUPLE.match(body) or _ITER.match(body)
        if sm is None:
            if body.startswith(("() ", " ")):  # the run summary: step () (ConvNets) or "" (BERT's format_step)
                v = _metrics(body).get(self.summary_key)
                if v is not None:
                    self.final = lp.to_float(v)
            return lp.CONSUMED
        step = int(sm.group(2)) + 1 if sm.re is _TUPLE else int(sm.group(1))
        self.text_steps += 1
        self.add(step, self.iso.seconds(m.group(1)), _metrics(body[sm.end():]))
        return lp.CONSUMED

    def json_line(self, text: str, at: int, final: bool) -> int:
        try:
            obj = json.loads(text[at + 5:])
        except (ValueError, RecursionError):
            return lp.NOT_MINE if final else lp.FRAGMENT
        if not isinstance(obj, dict) or obj.get("type", "LOG") != "LOG" or not isinstance(obj.get("data"), dict):
            return lp.CONSUMED if isinstance(obj, dict) else lp.NOT_MINE
        step, data = obj.get("step"), obj["data"]
        if step == "PARAMETER":
            self.params.update({k: str(v) for k, v in data.items()})
        elif step == [] or step == ():
            if self.summary_key in data:
                self.final = lp.to_float(data[self.summary_key])
        elif isinstance(step, int) and not isinstance(step, bool):  # BERT: Iteration N
            self.json_steps += 1
            self.add(step, self.epoch_clock.seconds(obj.get("timestamp")), data)
        elif (isinstance(step, list) and len(step) == 2 and all(isinstance(x, int) for x in step)):  # ConvNets
            self.json_steps += 1
            self.add(step[1] + 1, self.epoch_clock.seconds(obj.get("timestamp")), data)
        return lp.CONSUMED

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        at = text.find("DLL")
        if at < 0:
            return lp.NOT_MINE
        if at > 0:  # a tag the Scanner did not strip (mpirun --timestamp-output puts a date before it)
            tag = _TAG.search(text, 0, at)
            if tag is not None and tag.group(1) != "0":
                return lp.NOT_MINE
        if text.startswith("DLLL {", at):
            return self.json_line(text, at, final)
        return self.text_line(text, at, final)


def _parse(suite: _NGCTF1, lines: Iterable[str], ctx: ParseContext) -> RunResult:
    gb = float(ctx.global_batch)
    st = _State(lp.Window(ctx.warmup_steps, ctx.measure_steps), gb, suite.speed_keys, suite.summary_key,
                per_step=suite.model == "resnet50")
    window = st.window
    facts = lp.Scanner(st.handler, starts=lambda t: "DLL" in t, needles=("DLL",)).run(lines)
    extra: dict[str, Any] = {"formats": [f for f, n in (("dllogger-json", st.json_steps),
                                                          ("dllogger-text", st.text_steps)) if n],
                             "metrics": sorted(st.keys)}
    params = st.params
    if params:
        extra["parameters"] = {k: params[k] for k in ("mode", "batch_size", "num_iter", "warmup_steps",
                                                      "display_every", "use_xla", "use_tf_amp", "amp", "xla")
                               if k in params}
        bs = params.get("batch_size")
        if bs is not None and bs.isdigit() and int(bs) != ctx.batch_size:
            extra["batch_mismatch"] = f"log batch_size {bs} per GPU, expected {ctx.batch_size}"
    if st.final is not None:
        extra["reported_throughput"] = st.final
    return lp.finish(window, facts, ctx, global_batch=gb, extra=extra,
                     no_memory_reason="DeepLearningExamples TF1 logs report no GPU memory")
