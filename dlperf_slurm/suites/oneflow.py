"""``oneflow``: OneFlow ResNet-50 v1.5 (OneFlow-Benchmark ``Classification/cnns/of_cnn_train_val.py``) and BERT-base
pre-training (``LanguageModeling/BERT/run_pretraining.py``) with DLPerf's flags (DLPerf ``OneFlow/.../scripts/
rn50_train.sh``, ``bert_base_pretrain.sh``), batch sizes and window.

How they launch. DLPerf's form, the ``node_ips`` launcher (default): ONE process per node drives all of its GPUs
(``--num_nodes N --gpu_num_per_node G``) and finds the other nodes by ``--node_ips`` — built by the job from the
allocation's node list, never hard-coded — and ``--ctrl_port`` (the job's port). The newer form, the ``oneflow``
launcher (``python -m oneflow.distributed.launch``, one process per GPU): the same flags without ``--num_nodes`` /
``--gpu_num_per_node`` (a per-process program takes its place from the launcher's RANK / WORLD_SIZE / LOCAL_RANK /
MASTER_ADDR); OneFlow-Benchmark's single-client scripts themselves need ``node_ips``, so point ``workdir`` /
``script`` at a program written for the launcher there.

Flags. Batch: ``--batch_size_per_device`` (per GPU, as the cells). Precision: amp = ``--use_fp16`` (OneFlow's auto
mixed precision; run_pretraining.py then uses a dynamic loss scale, as DLPerf's v0.3.1 reports), and for ResNet-50
the rest of DLPerf's rn50_train.sh (``--channel_last=True --pad_output --fuse_bn_relu=True --fuse_bn_add_relu=True
--nccl_fusion_threshold_mb=16 --nccl_fusion_max_ops=24 --gpu_image_decoder=True``, the script of its FP16 runs; its
FP32 report's runs predate those flags). XLA: both programs have ``--use_xla`` (``config.use_xla_jit``, which needs a
OneFlow built with XLA); DLPerf never used it (every report: "XLA: 未采用"). Steps: DLPerf ran 120 iterations
(ResNet-50: ``--num_examples`` = global batch x 120 in one epoch) or 140 (BERT ``--iter_num``), printing every 20, and
timed iterations 20 -> 120 by the stamps of those two prints; here the programs run warm-up + measure steps
(``--num_examples`` = global batch x steps; ``--iter_num`` = steps: BERT's last 20 steps were never timed) and print
every ``print_every`` steps (0: the largest divisor of both window ends up to 20 — DLPerf's 20 for 20 + 100). Data:
ResNet-50 reads OFRecord ImageNet from ``data_dir`` (DLPerf: 256 parts), or, with ``data_dir = ""``, the program's
synthetic data ("Loading synthetic data."); run_pretraining.py has no synthetic mode: ``data_dir`` is its OFRecord set.

Which lines are read: the progress lines the first node's process prints for the whole job (srun labels them 0):
``train: epoch E, iter I, loss: L, top_1: .., top_k: .., samples/s: S T`` (I counted from 1 in each epoch) and
``step: S, total_loss: L, mlm_loss: .., nsp_loss: .., throughput: X T`` (S from 0): S and X are the global
samples/s since the previous print, T the unix time of the print (older OneFlow-Benchmark printed no T).
Time flavour (DLPerf's extract_*_result.py, published): global batch x steps / the stamps' difference between the
window's ends; without stamps, the clock is the sum of the prints' intervals (batch x steps / samples/s). Speed
flavour (OneFlow-Benchmark's own reports: the mean of the printed figures, the first print discarded): the mean of
the printed figures inside the window.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.parsing import evals as lp_evals
from dlperf_slurm.suites import RUN_DIR, Suite, oneflow_accuracy, register
from dlperf_slurm.words import plural


def print_every(measure, options: Mapping[str, Any]) -> int:
    """How often the programs print (--loss_print_every_n_iter): the option, or the largest divisor up to 20 of both
    window ends, so that a print falls on each (DLPerf: 20, window 20 -> 120)."""
    if options.get("print_every"):
        return int(options["print_every"])
    g = math.gcd(measure.warmup_steps, measure.warmup_steps + measure.measure_steps)
    return max(d for d in range(1, 21) if g % d == 0)


class _OneFlow(Suite):
    framework = "oneflow"
    imports = ("oneflow",)
    launcher = "node_ips"
    launchers = ("node_ips", "oneflow")
    precisions = ("fp32", "amp")
    supports_xla = True  # --use_xla: config.use_xla_jit (a OneFlow built with XLA); DLPerf never used it
    published = "time"  # DLPerf's extractors: stamps of the prints at the window's ends
    # data_part_num: OFRecordDataset CHECKs parallel_num <= data_part_num (an abort)
    option_minimum = {"print_every": (0, "0: auto, else the steps between two prints"),
                      "data_part_num": (1, "the OFRecord part files the reader splits over its ranks")}
    dlperf_window = (20, 100)  # ResNet-50 iters 20 -> 120, BERT steps 19 -> 119 (0-based): ends of steps 20 -> 120

    def node_flags(self, cell) -> list[str]:
        """--num_nodes/--gpu_num_per_node for the one-process-per-node form (the node_ips launcher adds the rest)."""
        if cell.launcher != "node_ips":
            return []
        return [f"--num_nodes={cell.nodes}", f"--gpu_num_per_node={cell.gpus_per_node}"]

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse(lines, ctx, self.evaluations)


@register
class ResNet50(_OneFlow):
    model = "resnet50"
    description = "OneFlow-Benchmark Classification/cnns/of_cnn_train_val.py --model=resnet50 (DLPerf's flags)"
    sample_unit = "img/s"
    evaluations = ("oneflow", "oneflow_models")  # "validation: epoch 47, ..., top_1: 0.76, top_k: 0.93", "[eval]"
    accuracy = True  # of_cnn_train_val.py (node_ips) or Oneflow-Inc/models' train.py (oneflow): suites.oneflow_accuracy
    options = {"workdir": "/workspace/OneFlow-Benchmark/Classification/cnns", "script": "of_cnn_train_val.py",
               "python": "python3", "data_dir": "/datasets/ImageNet/ofrecord", "data_part_num": 256, "print_every": 0,
               **oneflow_accuracy.OPTIONS}
    option_minimum = {**_OneFlow.option_minimum, **oneflow_accuracy.MINIMUM}

    def option_error(self, name: str, value: Any) -> str | None:
        return oneflow_accuracy.option_error(name, value)

    def accuracy_error(self, cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        return oneflow_accuracy.problem(options)

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        if measure.accuracy:
            return oneflow_accuracy.argv(cell, measure, options, self.node_flags(cell), print_every(measure, options))
        steps = measure.warmup_steps + measure.measure_steps
        argv = [options["python"], f"{options['workdir']}/{options['script']}",
                f"--num_examples={cell.batch_size * cell.devices * steps}"]
        if options["data_dir"]:
            argv += [f"--train_data_dir={options['data_dir']}/train",
                     f"--train_data_part_num={options['data_part_num']}"]
        argv += self.node_flags(cell) + [
            "--optimizer=sgd", "--momentum=0.875", "--label_smoothing=0.1", "--learning_rate=0.001",
            f"--loss_print_every_n_iter={print_every(measure, options)}", f"--batch_size_per_device={cell.batch_size}",
            "--val_batch_size_per_device=125", "--num_epoch=1"]
        if cell.precision == "amp":
            argv += ["--use_fp16", "--channel_last=True", "--pad_output", "--fuse_bn_relu=True",
                     "--fuse_bn_add_relu=True", "--nccl_fusion_threshold_mb=16", "--nccl_fusion_max_ops=24",
                     "--gpu_image_decoder=True"]
        if cell.xla:
            argv.append("--use_xla")
        return argv + [f"--log_dir={RUN_DIR}/log", f"--model_save_dir={RUN_DIR}/snapshots", "--model=resnet50"]

    def environment(self, cell, options: Mapping[str, Any]) -> dict[str, str]:
        return {"PYTHONUNBUFFERED": "1", "NCCL_LAUNCH_MODE": "PARALLEL"}  # rn50_train.sh's


@register
class BertBase(_OneFlow):
    model = "bert-base"
    description = "OneFlow-Benchmark LanguageModeling/BERT/run_pretraining.py, seq 128, 20 masked tokens (DLPerf's)"
    sample_unit = "seq/s"
    options = {"workdir": "/workspace/OneFlow-Benchmark/LanguageModeling/BERT", "script": "run_pretraining.py",
               "python": "python3", "data_dir": "/datasets/bert/bert_base_ofrecord", "data_part_num": 32,
               "print_every": 0}

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "data_dir" and not value:
            return "run_pretraining.py has no synthetic mode: data_dir must name its OFRecord data set"
        return None

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        steps = measure.warmup_steps + measure.measure_steps
        argv = [options["python"], f"{options['workdir']}/{options['script']}", *self.node_flags(cell),
                "--learning_rate=1e-4", f"--batch_size_per_device={cell.batch_size}", f"--iter_num={steps}",
                f"--loss_print_every_n_iter={print_every(measure, options)}", "--seq_length=128",
                "--max_predictions_per_seq=20", "--num_hidden_layers=12", "--num_attention_heads=12",
                "--max_position_embeddings=512", "--type_vocab_size=2", "--vocab_size=30522",
                "--attention_probs_dropout_prob=0.1", "--hidden_dropout_prob=0.1", "--hidden_size_per_head=64",
                f"--data_dir={options['data_dir']}", f"--data_part_num={options['data_part_num']}",
                f"--log_dir={RUN_DIR}/log", "--model_save_every_n_iter=10000", "--save_last_snapshot=False",
                f"--model_save_dir={RUN_DIR}/snapshots"]
        if cell.precision == "amp":
            argv.append("--use_fp16")
        if cell.xla:
            argv.append("--use_xla")
        return argv

    def environment(self, cell, options: Mapping[str, Any]) -> dict[str, str]:
        return {"PYTHONUNBUFFERED": "1"}  # bert_base_pretrain.sh's


# ----------------------------------------------------------------------------------------------- parsing
# Both programs' progress lines (util.Metric of each), as DLPerf's extractor docstrings and OneFlow-Benchmark's
# reports and README show them (tests/fixtures/real/oneflow/):
#   train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, samples/s: 3988.891 1597933942.9863544
#   step: 19, total_loss: 9.725, mlm_loss: 8.960, nsp_loss: 0.766, throughput: 54.982 1598056519.8844702
# (``validation: epoch ...`` lines are evaluation, not steps). A line may follow a progress bar's ``\r`` or a rank
# label, and a record cut by buffering is glued back by the Scanner.
# OneFlow-Benchmark's BERT run_pretraining.py before 2020-07-23 (benchmark_util's StepTimer), 0-based iter:
#   iter 19, total_loss: 10.987, mlm_loss: 10.291, nsp_loss: 0.695, speed: 47.756(sec/batch), 40.204(sentences/sec)
# where "sec/batch" is in fact the seconds of the print interval (loss_print_every_n_iter iterations) and
# sentences/sec the global sentences over them; clock: those seconds.
# OneFlow-Inc/models' Vision/classification/image/resnet50 train.py (2021-09 on, which replaced OneFlow-Benchmark),
# every rank printing its own line (metric_local, the default), interleaved:
#   [1] [train], epoch: 0/50, iter: 100/3336, loss: 1.73143, lr: 0.004604, top1: 0.00167, throughput: 161.66
#   [rank:0] [train], epoch: 0/2, iter: 2/12, loss: 1.72641, lr: 0.000000, top1: 0.00000, throughput: 0.58 | 2026-11-27 06:43:13.575  # noqa: E501
# (utils/logger.py: "[{rank}] " until 2021-09-10, then "[rank:{rank}] " and a UTC stamp to the millisecond). Its iter
# counts from 1 within each epoch of N (the line states N); its throughput is the rank's own samples/s over the
# interval (per-device batch x iterations / time): rank 0's lines are read, the figure x GPUs; clock: the stamps,
# else the interval's per-device samples over its throughput.

_NUM = lp.NUM
_CNN = re.compile(r"(?<![A-Za-z_])train: epoch (\d+), iter (\d+), ")
_BERT = re.compile(r"(?<![A-Za-z_])step: (\d+), ")
# the figure and the stamp end the line: a line glued to what follows it (a record cut by buffering whose tail was
# not the next line) fails the lookahead, and the Scanner reads it alone
_FIGURE = re.compile(r"\b(?:samples/s|throughput): (" + _NUM + r")(?>(?:[ \t]+(" + _NUM + r"))?)(?=\s|$)")
_CUT_HEAD = re.compile(r"(?:train: epoch(?: \d+(?:,(?: (?:i(?:t(?:e(?:r(?: \d*)?)?)?)?)?)?)?)?|step: \d*)$")
_LOSS = re.compile(r"(?<![A-Za-z_])(?:total_)?loss: (" + _NUM + r")")
_MODELS = re.compile(r"^\[(?:rank:)?(\d+)\] \[train\], epoch: (\d+)/\d+, iter: (\d+)/(\d+), ")
_MODELS_TPUT = re.compile(r"\bthroughput: (" + _NUM + r")")
_MODELS_STAMP = re.compile(r"\| (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\s*$")
_BERT2020 = re.compile(r"(?<![A-Za-z_])iter (\d+), (?=.*\(sentences/sec\))")
_BERT2020_FIG = re.compile(r"\bspeed: (" + _NUM + r")\(sec/batch\), (" + _NUM + r")\(sentences/sec\)")
_NEEDLES = ("train: epoch", "step: ", "[train], epoch: ", "(sentences/sec)")


@dataclass(slots=True)
class _State:
    """What a parse learns beside its window, and its line handler (:meth:`handler`)."""

    window: lp.Window
    evals: lp_evals.Reader
    ctx: ParseContext
    gb: float  # the global batch
    epoch_clock: lp.EpochClock = field(default_factory=lp.EpochClock)  # the CNN and BERT lines' unix stamps
    iso: lp.IsoClock = field(default_factory=lp.IsoClock)  # OneFlow-Inc/models' UTC stamps
    epoch: int | None = None  # the epoch of the last CNN line (OneFlow-Inc/models': of its first line)
    offset: int = 0  # the CNN steps of the epochs before it (its iter counts from 1 in each epoch)
    last: int = 0  # the highest CNN iter read in that epoch
    prev: int = 0  # the last step read
    clock: float = 0.0  # the printed intervals' seconds, summed (the lines without a stamp)
    stamps: int = 0  # steps timed at their stamp
    timed: int = 0  # ... and by their figure
    forms: set[str] = field(default_factory=set)  # the line formats read

    def step_of(self, epoch: int, it: int) -> int:
        """of_cnn_train_val.py counts iterations from 1 in each epoch: steps are counted across epochs."""
        if self.epoch is None:
            self.epoch = epoch
        elif epoch != self.epoch:
            self.offset += self.last
            self.epoch, self.last = epoch, 0
        self.last = max(self.last, it)
        return self.offset + it

    def add(self, form: str, step: int, t: float | None, seconds: float | None, speed: float | None,
            loss: re.Match | None) -> int:
        """One step read in format ``form``: timed at its stamp ``t``, else on the clock of the printed intervals
        (``seconds`` since the previous step read)."""
        if t is not None:
            self.stamps += 1
        elif seconds is not None:
            self.clock += seconds
            self.timed += 1
            t = self.clock
        self.forms.add(form)
        self.window.add(step, t, speed=speed, loss=lp.to_float(loss.group(1)) if loss else None,
                        span_from=self.prev if seconds is not None else None, span_seconds=seconds)
        self.prev = step
        return lp.CONSUMED

    def models(self, m: re.Match, text: str, final: bool) -> int:
        if int(m.group(1)) != 0:
            return lp.CONSUMED  # another rank's own line: rank 0's are read
        fig = _MODELS_TPUT.search(text, m.end())
        if not final and (fig is None or text.rstrip().endswith(tuple("0123456789."))):
            return lp.FRAGMENT
        if fig is None:
            return lp.NOT_MINE
        epoch, it, length = int(m.group(2)), int(m.group(3)), int(m.group(4))
        if self.epoch is None:
            self.epoch = epoch
        step = (epoch - self.epoch) * length + it
        if step <= self.prev:
            return lp.CONSUMED
        span = step - self.prev
        tput = lp.to_float(fig.group(1))
        speed = tput * self.ctx.world_size if tput is not None else None
        seconds = span * self.ctx.batch_size / tput if tput is not None and tput > 0 else None
        stamp = _MODELS_STAMP.search(text)
        t = self.iso.seconds(stamp.group(1)) if stamp else None
        self.evals.trained(text)
        return self.add("oneflow-models", step, t, seconds, speed, _LOSS.search(text, m.end()))

    def bert2020(self, m: re.Match, text: str) -> int:
        fig = _BERT2020_FIG.search(text, m.end())
        if fig is None:
            return lp.NOT_MINE
        step = int(m.group(1)) + 1  # the 0-based iteration index
        if step <= self.prev:
            return lp.CONSUMED
        seconds, speed = lp.to_float(fig.group(1)), lp.to_float(fig.group(2))
        if seconds is not None and not seconds > 0:
            seconds = None
        return self.add("bert-2020", step, None, seconds, speed, _LOSS.search(text, m.end()))

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        if "(sentences/sec)" in text:
            mb = _BERT2020.search(text)
            if mb is not None:
                return self.bert2020(mb, text)
        if "[train], epoch: " in text:
            mm = _MODELS.search(text)
            if mm is not None:
                return self.models(mm, text, final)
        m = _CNN.search(text)
        if m is not None:
            form, step = "cnns", self.step_of(int(m.group(1)), int(m.group(2)))
        elif (m := _BERT.search(text)) is not None:
            form, step = "bert", int(m.group(1)) + 1  # run_pretraining.py prints the 0-based step index
        elif not final and _CUT_HEAD.search(text):
            return lp.FRAGMENT  # a record cut in its head: its tail follows
        else:
            return lp.CONSUMED if self.evals.read(text) else lp.NOT_MINE
        body = text[m.end():]
        fig = _FIGURE.search(body)
        if not final and (fig is None or text.rstrip().endswith(tuple("0123456789."))):
            return lp.FRAGMENT  # the figure (or the stamp) that ends the line may be cut: read it with what follows
        if fig is None:  # a foreign "step: N, " line, or a record glued to a line that is not its tail: the Scanner
            return lp.NOT_MINE  # then reads the record alone
        if step <= self.prev:  # a print already read (the same record twice: a log and its echo) adds nothing
            return lp.CONSUMED
        span = step - self.prev  # the printed figure is the global samples/s over these steps
        speed = lp.to_float(fig.group(1))
        seconds = span * self.gb / speed if speed is not None and speed > 0 else None
        t = self.epoch_clock.seconds(fig.group(2)) if fig.group(2) else None
        self.evals.trained(text)  # the first stamped one starts a time to target
        return self.add(form, step, t, seconds, speed, _LOSS.search(body))


def _parse(lines: Iterable[str], ctx: ParseContext, evaluations: tuple[str, ...] = ()) -> RunResult:
    gb = float(ctx.global_batch)
    st = _State(lp.Window(ctx.warmup_steps, ctx.measure_steps), lp_evals.Reader(evaluations), ctx, gb)
    window, evals = st.window, st.evals
    # an evaluation line starts a record too: one right after a stamped step line (whose end may look cut) is never
    # glued to it as its tail (models' train.py on one rank: "[rank:0] [eval], ..." follows rank 0's last step line)
    facts = lp.Scanner(st.handler, starts=lambda t: bool(_CNN.search(t) or _BERT.search(t) or _MODELS.search(t)
                                                         or any(n in t for n in evals.needles)),
                       needles=_NEEDLES + evals.needles).run(lines)
    extra: dict[str, Any] = {**evals.extra(), "formats": sorted(st.forms)}
    extra["clock"] = "print stamps" if st.stamps else "sum of the printed intervals (batch x steps / samples/s)"
    if st.stamps and st.timed:
        extra["clock_mixed"] = f"{plural(st.stamps, 'line')} with stamps, {st.timed} timed by their figure"
    return lp.finish(window, facts, ctx, global_batch=gb, extra=extra,
                     no_memory_reason="OneFlow-Benchmark's programs print GPU memory only through nvidia-smi")
