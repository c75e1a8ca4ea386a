"""``paddle``: PaddlePaddle ResNet-50 v1.5 (PaddleCV ``image_classification/train.py``) and BERT-base (PaddleNLP
``model_zoo/bert/run_pretrain.py``) with DLPerf's flags, batch sizes and window, under ``python -m
paddle.distributed.launch`` (one process per GPU; the launcher template builds the node list from the allocation).

Which output is read: the launcher writes every rank's output to ``<log_dir>/workerlog.N`` and echoes its first
local rank's file to its own stdout (Paddle >= 2.0); across nodes srun labels each node's echo with the node's
number (``0: ``), so the run's log holds global rank 0's lines under label 0 and the Scanner keeps rank 0 (the
programs print their step lines on rank 0 only anyway). The other ranks' files stay in ``<run log>.workerlogs/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dlperf_slurm import parsing as lp
from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.parsing import evals as lp_evals
from dlperf_slurm.suites import REPEAT, RUN_DIR, Suite, register
from dlperf_slurm.words import plural


class _Paddle(Suite):
    framework = "paddle"
    imports = ("paddle",)
    launcher = "paddle"
    launchers = ("paddle",)
    precisions = ("fp32", "amp")
    published = "speed"  # DLPerf's README tables are extract_paddle_logs.py's: the mean of per-step speeds
    ips_scale: str = "nodes"  # what a bare ``ips`` figure (a line with no batch time) must be multiplied by

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return _parse(self, lines, ctx)


@register
class ResNet50(_Paddle):
    model = "resnet50"
    description = "PaddlePaddle/models PaddleCV/image_classification train.py --model=ResNet50 (DLPerf's flags)"
    sample_unit = "img/s"
    evaluations = ("paddleclas",)  # "[Eval][Epoch 2][Avg]... top1: 0.23302, top5: 0.47420"
    # dynamic_loss_scaling: DLPerf published AMP with and without it; dali: its third AMP table (DALI reader)
    axes = {"dynamic_loss_scaling": (True, False), "dali": (False, True)}
    axis_defaults = {"dynamic_loss_scaling": True, "dali": False}
    accuracy = True  # PaddleClas tools/train.py: its epochs, evaluated after each (it has no stop at a target)
    # data_dir: ImageNet as both programs read it (train_list.txt / val_list.txt of "path label" lines under it).
    # Accuracy runs (PaddleCV train.py is Paddle 1.8's, gone from Paddle 2+): PaddleClas's tools/train.py in
    # clas_workdir with its config clas_config, on clas_device; clas_overrides: more of its own -o KEY=VALUE (an lr
    # schedule, the image size, ...), after the suite's
    options = {"workdir": "/workspace/models/PaddleCV/image_classification", "script": "train.py",
               "python": "python3", "data_dir": "/data/imagenet/paddle", "total_images": 1302936,
               "clas_workdir": "/workspace/PaddleClas", "clas_config": "ppcls/configs/ImageNet/ResNet/ResNet50.yaml",
               "clas_device": "gpu", "class_num": 1000, "clas_overrides": []}
    # train.py's steps per epoch, ceil(total_images / batch), divide the step counter in its lr schedule
    option_minimum = {"total_images": (1, "train.py's images per epoch, the length of an epoch in its lr schedule"),
                      "class_num": (2, "the classes of the data set")}

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "clas_device" and value not in ("gpu", "cpu"):
            return 'PaddleClas\'s Global.device: "gpu" or "cpu"'
        if name == "clas_overrides" and not all(isinstance(o, str) and o.count("=") == 1 for o in value):
            return 'a list of PaddleClas -o overrides, each "KEY=VALUE" with one "=" (its config.py splits on it)'
        return None

    def accuracy_error(self, cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        if not options["data_dir"]:
            return ("options.data_dir", "an accuracy run evaluates on real data: set data_dir to the folder of "
                                        "train_list.txt and val_list.txt")
        return None

    def accuracy_program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        """PaddleClas's own tools/train.py (d178931f, 2024-10; ppcls engine since 2.1): Global.epochs of the data
        set, evaluating after every epoch (eval_during_train, eval_interval 1: an "[Eval][Epoch e][Avg]... top1: ,
        top5:" line); it has no flag that stops at a target, so it trains every epoch and collect reads the time to
        target (or NOT_CONVERGED) from those lines. Batch: the sampler's, per card. From scratch (no pretrained
        weights)."""
        d, w, n = options["data_dir"], options["clas_workdir"], measure.epochs
        o = [f"Global.epochs={n}", "Global.eval_during_train=True", "Global.eval_interval=1",
             "Global.print_batch_step=1", f"Global.save_interval={n}", f"Global.device={options['clas_device']}",
             f"Global.output_dir={RUN_DIR}/output", "Arch.pretrained=False", f"Arch.class_num={options['class_num']}",
             f"Global.use_dali={bool(cell.param('dali', False))}", f"Global.seed={REPEAT}"]  # each repeat its seed
        for part, lst in (("Train", "train_list.txt"), ("Eval", "val_list.txt")):
            o += [f"DataLoader.{part}.dataset.image_root={d}/", f"DataLoader.{part}.dataset.cls_label_path={d}/{lst}",
                  f"DataLoader.{part}.sampler.batch_size={cell.batch_size}"]
        if cell.precision == "amp":  # its AMP section (O1, loss scale 128 as DLPerf's)
            o += ["AMP.use_amp=True", "AMP.level=O1", "AMP.scale_loss=128.0",
                  f"AMP.use_dynamic_loss_scaling={bool(cell.param('dynamic_loss_scaling', True))}"]
        argv = [options["python"], f"{w}/tools/train.py", "-c", f"{w}/{options['clas_config']}"]
        for kv in [*o, *options["clas_overrides"]]:
            argv += ["-o", kv]
        return argv


    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        if measure.accuracy:
            return self.accuracy_program(cell, measure, options)
        amp = cell.precision == "amp"
        dali = bool(cell.param("dali", False))
        g = cell.gpus_per_node
        # DLPerf's scripts: 8 reader threads, 12 on one node with 3-4 GPUs, 10 with DALI
        threads = 10 if dali else (12 if cell.nodes == 1 and 2 < g <= 4 else 8)
        argv = [options["python"], f"{options['workdir']}/{options['script']}"]
        if amp:
            argv += ["--use_fp16=True",
                     "--use_dynamic_loss_scaling=" + ("true" if cell.param("dynamic_loss_scaling", True) else "false"),
                     "--scale_loss=128.0", "--fuse_elewise_add_act_ops=true", "--fuse_bn_act_ops=true"]
        return argv + [
            "--data_format=" + ("NHWC" if amp else "NCHW"), f"--data_dir={options['data_dir']}",
            f"--total_images={options['total_images']}", "--class_dim=1000", "--validate=False", "--model=ResNet50",
            f"--batch_size={cell.batch_size * g}",  # train.py's batch is per node (it splits it over the GPUs)
            "--print_step=1", "--save_step=10000", f"--reader_thread={threads}",
            # DLPerf's single-node script decays the lr by cosine, its multi-node one piecewise (as they ran)
            "--lr_strategy=" + ("cosine_decay" if cell.nodes == 1 else "piecewise_decay"), "--lr=0.001",
            "--momentum_rate=0.875", "--image_shape", "3", "224", "224",
            f"--max_iter={measure.warmup_steps + measure.measure_steps}", "--model_save_dir=output/",
            "--l2_decay=0.000030518", "--warm_up_epochs=1", "--use_mixup=False", "--use_label_smoothing=True",
            "--use_dali=" + ("true" if dali else "false"), "--label_smoothing_epsilon=0.1"]

    def environment(self, cell, options: Mapping[str, Any]) -> dict[str, str]:
        env = {"FLAGS_fraction_of_gpu_memory_to_use": "0.8" if cell.param("dali", False) else "0.98"}
        if cell.precision == "amp":
            env.update(FLAGS_conv_workspace_size_limit="4000", FLAGS_cudnn_exhaustive_search="1",
                       FLAGS_cudnn_batchnorm_spatial_persistent="1")
        return env


@register
class BertBase(_Paddle):
    model = "bert-base"
    description = "PaddleNLP model_zoo/bert/run_pretrain.py, seq 128, 20 masked tokens (DLPerf's batch and lr)"
    sample_unit = "seq/s"
    ips_scale = "world"  # run_pretrain.py's ips is per card
    options = {"workdir": "/workspace/PaddleNLP/model_zoo/bert", "script": "run_pretrain.py", "python": "python3",
               "input_dir": "/data/bert/paddle/seq128", "model_name_or_path": "bert-base-uncased"}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        # DLPerf ran PaddleNLP's Paddle-1.8 BERT train.py with --batch_size=BSZ*128 *tokens* per card
        # (--in_tokens, seq 128): that is BSZ sequences per card, run_pretrain.py's --batch_size.
        steps = measure.warmup_steps + measure.measure_steps
        argv = [options["python"], f"{options['workdir']}/{options['script']}", "--model_type=bert",
                f"--model_name_or_path={options['model_name_or_path']}", f"--input_dir={options['input_dir']}",
                "--output_dir=/tmp/paddle_bert_out", "--max_predictions_per_seq=20",
                f"--batch_size={cell.batch_size}", "--learning_rate=1e-4", "--weight_decay=0.01",
                "--warmup_steps=120", f"--max_steps={steps}", "--logging_steps=1", "--save_steps=10000",
                "--device=gpu"]
        if cell.precision == "amp":  # DLPerf: --use_fp16 true --use_dynamic_loss_scaling true --init_loss_scaling 128
            argv += ["--use_amp=True", "--scale_loss=128.0"]
        return argv


# ----------------------------------------------------------------------------------------------- parsing
# Rank 0's step lines: a small table of line formats, one per program generation, tried in order (``_FORMATS``):
#   PaddleCV train.py (models release/1.8, DLPerf's)  [Pass 0, train batch 19] \tloss 6.91, acc1 0.0, acc5 0.0, lr 0.00100, elapse 0.3626 sec  # noqa: E501
#   PaddleCV train.py (release/2.0-beta on)           [Pass 0, train batch 20]   loss ..., batch_cost 0.12865 sec, reader_cost 0.00103 sec, ips 994.94165 images/sec  # noqa: E501
#   PaddleClas tools/static (2020-11/12, before #525) epoch:0   train step:6    loss: ... lr: 0.100000 elapse: 0.183s ips: 1137.76163 images/sec.  # noqa: E501
#   PaddleClas 2.0 (static after #525, dygraph)       epoch:0   train step:10   ... loss: 11.5920 lr: 0.100000, batch_cost: 0.08779 s, reader_cost: 0.00010 s, ips: 121.41242 images/sec.  # noqa: E501
#   PaddleClas 2.1+ (ppcls engine)                    ppcls INFO: [Train][Epoch 3/360][Iter: 0/2503]lr(LinearWarmup): ..., batch_cost: 1.15203s, reader_cost: 0.85557, ips: 444.43222 samples/s, eta: ...  # noqa: E501
#   PaddleNLP BERT train.py (1.8, DLPerf's)           epoch: 4, progress: 1/1, step: 8720, loss: 8.089045, ppl: ..., speed: 5.793753 steps/s, file: ...  # noqa: E501
#   PaddleNLP run_pretrain.py (2.0)                   global step 20, epoch: 0, batch: 19, loss: ..., speed: 4.61 step/s, ips: 147.52 sequences/s  # noqa: E501
#                                                     (also ``ips :218.08``)
#   PaddleNLP run_pretrain.py (2.x)                   global step: 20, epoch: 0, batch: 19, loss: ..., avg_batch_cost: 0.27 sec, ..., ips: 118.5 sequences/sec  # noqa: E501
#   PaddleNLP Trainer (2.4+)                          [    INFO] - loss: 10.70859375, learning_rate: 2e-07, global_step: 20, interval_runtime: 2.5065, interval_samples_per_second: 7.979, ...  # noqa: E501
# each maybe after a logging prefix: ``2020-09-25 10:47:02,989-INFO: `` (millisecond stamps), ``INFO:utils.utility:``.
# Step counters: PaddleCV's batch and PaddleClas's step/iter count within an epoch (from 0), so steps are counted
# across epochs (with ``[Iter: i/N]`` from N, the epoch's length the line states); PaddleNLP's step is global.
# Speed flavour (DLPerf's): global batch / the line's batch time, or for BERT 1.8 ``steps/s x devices per node x
# batch`` (its printed speed already counts the nodes: skip_steps x trainers / time); a line with only ``ips`` is
# scaled by the suite's ``ips_scale``. PaddleClas's static program before #525 prints the running mean of the
# batch times since the epoch's sixth step (``elapse``, reset at index 5), the mean over the steps since the reset
# (``ips`` = per-card batch / that mean): its clock is that mean times the steps since the reset, and a line's speed
# the global batch over the steps since the previous line, by the time between them. The PaddleNLP Trainer's
# ``interval_runtime`` times the steps since the previous logged step (its ``interval_samples_per_second`` is that
# runtime over one batch in 2.4, not over the interval: not read). Time flavour: the stamps at the window's ends when
# the lines carry millisecond stamps, else the batch times summed (DLPerf's logs of these programs have no usable
# stamps).

_NUM = lp.NUM
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{3,6})")
_CV = re.compile(r"\[Pass (\d+), train batch (\d+)\]")
_CLAS = re.compile(r"epoch:\s*(\d+)\s*,?\s*train step:\s*(\d+)")
_PPCLS = re.compile(r"\[Train\]\[Epoch (\d+)/\d+\]\[Iter: (\d+)/(\d+)\]")
_BERT18 = re.compile(r"epoch: (\d+), progress: \d+/\d+, step: (\d+), ")
_NLP = re.compile(r"global step:? (\d+)")
# the Trainer's line always holds its interval's speed metrics (interval_runtime, ...): PaddleOCR's trainer prints
# "epoch: [1/5], global_step: 10, ..." without them, a program no suite covers
_TRAINER = re.compile(r"\bglobal_step: (\d+),(?=.*\binterval_runtime: )")
_LOSS = re.compile(r"\bloss:?\s+(" + _NUM + r")(?:,|\s|$)")
_BATCH_TIME = re.compile(r"\b(?:elapse|batch_cost|avg_batch_cost):? (" + _NUM + r") ?(?:sec|s)\b")
_ELAPSE = re.compile(r"\belapse: (" + _NUM + r")s ")  # PaddleClas static before #525: the running mean
_RUNTIME = re.compile(r"\binterval_runtime: (" + _NUM + r")(?:,|\s|$)")
_IPS = re.compile(r"\bips ?:? ?(" + _NUM + r")(?: ?(?:images|samples|sequences|tokens|words)/s(?:ec)?)?\.?(?:,|\s|$)")
_STEPS_PER_S = re.compile(r"\bspeed: (" + _NUM + r") steps/s\b")
_CLAS_RESET = 5  # PaddleClas's static program resets its batch-time meter at this step index of each epoch


def _wanted(text: str) -> bool:
    """A step record is on the line (a line that holds one also starts one: it is never the tail of another)."""
    return ("train batch" in text or "train step" in text or "progress:" in text or "global step" in text
            or "[Iter: " in text or "global_step: " in text or "[Eval][Epoch " in text)  # and an evaluation


@dataclass(slots=True)
class _State:
    """What a parse learns beside its window, and its line handler (:meth:`handler`)."""

    window: lp.Window
    evals: lp_evals.Reader
    ctx: ParseContext
    gb: float  # the global batch
    per_node: float  # the batch of one node's GPUs (BERT 1.8's steps/s count the nodes)
    ips_scale: int  # what a bare ``ips`` figure is multiplied by: the suite's ``ips_scale``, in nodes or GPUs
    iso: lp.IsoClock = field(default_factory=lp.IsoClock)
    epoch: int | None = None  # the last pass/epoch of a per-epoch counter (ppcls': its first line's epoch)
    offset: int = 0  # the steps of the passes before it
    last: int = 0  # the highest step read in that pass (its batches counted from 1)
    prev: int = 0  # the highest step read
    clock: float = 0.0  # the lines' batch times, summed (the lines without a stamp)
    stamps: int = 0  # steps timed at their stamp
    timed: int = 0  # ... and by their batch time
    forms: set[str] = field(default_factory=set)  # the line formats read
    ips: list[float] = field(default_factory=list)  # the printed ips figures
    # PaddleClas static before #525 (running-mean lines): the epoch of the last, the clock at that epoch's start,
    # the clock of the last line, and (step, clock) of the last line of this epoch after the meter's reset
    cum_epoch: int | None = None
    cum_base: float = 0.0
    cum_last: float = 0.0
    cum_prev: tuple[int, float] | None = None

    def step_of(self, epoch: int, index: int) -> int:
        """PaddleCV counts batches from 0 in each pass (PaddleClas its steps in each epoch): steps are counted
        across passes, from 1."""
        if self.epoch is None:
            self.epoch = epoch
        elif epoch > self.epoch:
            self.offset += self.last
            self.epoch, self.last = epoch, 0
        self.last = max(self.last, index + 1)
        return self.offset + index + 1

    def record(self, text: str) -> tuple[str, int, re.Match, tuple[int, int] | None] | None:
        """The step record on the line, by the table of formats: (format, step, its counter's match, (epoch, index
        in the epoch) of a PaddleClas line), or None."""
        m = _CV.search(text)
        per_epoch = None  # (epoch, index in the epoch) of a cumulative PaddleClas static line
        if m:
            form, step = "paddlecv", self.step_of(int(m.group(1)), int(m.group(2)))
        elif (m := _PPCLS.search(text)) is not None:  # its iter counts from 0 in each epoch of N iters
            epoch, index, length = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if self.epoch is None:
                self.epoch = epoch
            form, step = "ppcls", (epoch - self.epoch) * length + index + 1
        elif (m := _TRAINER.search(text)) is not None:
            form, step = "paddlenlp-trainer", int(m.group(1))
        elif (m := _NLP.search(text)) is not None:
            form, step = "paddlenlp", int(m.group(1))
        elif (m := _BERT18.search(text)) is not None:
            form, step = "bert-1.8", int(m.group(2))
        elif (m := _CLAS.search(text)) is not None:  # its step counts from 0 in each epoch: epoch 0's as printed
            form, step = "paddleclas", self.step_of(int(m.group(1)), int(m.group(2))) - 1
            per_epoch = (int(m.group(1)), int(m.group(2)))
        else:
            return None
        return form, step, m, per_epoch

    def handler(self, text: str, rank: int | None, final: bool) -> int:
        rec = self.record(text)
        if rec is None:
            return lp.CONSUMED if self.evals.read(text) else lp.NOT_MINE
        form, step, m, per_epoch = rec
        body = text[m.end():] if form != "paddlenlp-trainer" else text
        bt, ips, sps = _BATCH_TIME.search(body), _IPS.search(body), _STEPS_PER_S.search(body)
        run = _RUNTIME.search(body) if form == "paddlenlp-trainer" else None
        if not final and (not (bt or ips or sps or run) or text.endswith(tuple("0123456789"))):
            return lp.FRAGMENT  # the figure that ends the line may be cut short: read it with what follows
        loss = _LOSS.search(body)
        span = step - self.prev if step > self.prev else 1
        seconds = speed = None
        cumulative = None  # the clock of a running-mean line (PaddleClas static before #525)
        elapse = _ELAPSE.search(body) if per_epoch is not None else None
        static = elapse is not None
        if per_epoch is not None and elapse is not None:  # its lines before the reset time the epoch's first
            form = "paddleclas-static"                    # steps: no clock of the window's
            cumulative, seconds, speed, span = self.running_mean(per_epoch, elapse, ips, step, span)
        else:
            speed, seconds = self.figures(run, sps, bt, span)
        if ips:
            v = lp.to_float(ips.group(1))
            if v is not None:
                self.ips.append(v)
                if speed is None and not static and v > 0:
                    speed, seconds = v * self.ips_scale, span * self.gb / (v * self.ips_scale)
        stamp = _STAMP.search(text, 0, m.start() + 1)
        t = self.iso.seconds(stamp.group(1).replace(",", ".")) if stamp else None
        if t is not None:
            self.stamps += 1
        elif cumulative is not None:
            self.timed += 1
            t = cumulative
        elif seconds is not None:
            self.clock += seconds
            self.timed += 1
            t = self.clock
        self.prev = max(self.prev, step)
        self.forms.add(form)
        self.evals.trained(text)  # the first stamped one starts a time to target
        self.window.add(step, t, speed=speed, loss=lp.to_float(loss.group(1)) if loss else None,
                        span_from=step - span if seconds is not None else None, span_seconds=seconds)
        return lp.CONSUMED

    def running_mean(self, per_epoch: tuple[int, int], elapse: re.Match, ips: re.Match | None, step: int,
                     span: int) -> tuple[float | None, float | None, float | None, int]:
        """A PaddleClas static line before #525 (its batch time the running mean since the meter's reset): (its
        clock, the seconds and speed since the previous line, and the steps between them)."""
        seconds = speed = cumulative = None
        epoch, index = per_epoch
        if self.cum_epoch != epoch:
            self.cum_epoch, self.cum_base, self.cum_prev = epoch, self.cum_last, None
        mean = lp.to_float(elapse.group(1))
        v = lp.to_float(ips.group(1)) if ips else None
        if v and v > 0:
            mean = self.ctx.batch_size / v  # the same running mean, to ips's five decimals
        if index >= _CLAS_RESET and mean is not None and mean > 0:
            cumulative = self.cum_base + (index - _CLAS_RESET + 1) * mean
            # before the epoch's first line after the reset: the reset itself, the end of step index 4
            prev = self.cum_prev or (step - (index - _CLAS_RESET + 1), self.cum_base)
            if step > prev[0] and cumulative > prev[1]:
                seconds = cumulative - prev[1]
                speed = self.gb * (step - prev[0]) / seconds
                span = step - prev[0]
            self.cum_prev = (step, cumulative)
            self.cum_last = cumulative
        return cumulative, seconds, speed, span

    def figures(self, run: re.Match | None, sps: re.Match | None, bt: re.Match | None,
                span: int) -> tuple[float | None, float | None]:
        """(speed, seconds) of the ``span`` steps a line covers, from the first figure it has of: the Trainer's
        interval_runtime, BERT 1.8's steps/s, the batch time."""
        speed = seconds = None
        if run:
            v = lp.to_float(run.group(1))
            if v and v > 0:
                speed, seconds = self.gb * span / v, v
        elif sps:  # BERT 1.8: steps/s already multiplied by the trainer (node) count
            v = lp.to_float(sps.group(1))
            if v and v > 0:
                speed, seconds = v * self.per_node, span * self.ctx.nodes / v
        elif bt:
            v = lp.to_float(bt.group(1))
            if v and v > 0:
                speed, seconds = self.gb / v, span * v
        return speed, seconds


def _parse(suite: _Paddle, lines: Iterable[str], ctx: ParseContext) -> RunResult:
    gb = float(ctx.global_batch)
    st = _State(lp.Window(ctx.warmup_steps, ctx.measure_steps), lp_evals.Reader(suite.evaluations), ctx, gb,
                per_node=float(ctx.gpus_per_node * ctx.batch_size),
                ips_scale=ctx.nodes if suite.ips_scale == "nodes" else ctx.world_size)
    window, evals = st.window, st.evals
    facts = lp.Scanner(st.handler, starts=_wanted, wanted=_wanted).run(lines)
    extra: dict[str, Any] = {**evals.extra(), "formats": sorted(st.forms)}
    if st.stamps and st.timed:
        extra["clock_mixed"] = f"{plural(st.stamps, 'line')} with stamps, {st.timed} timed by their batch time"
    extra["clock"] = "log stamps" if st.stamps else "sum of the printed batch times"
    if st.ips:
        extra["reported_ips_mean"] = sum(st.ips) / len(st.ips)
    return lp.finish(window, facts, ctx, global_batch=gb, extra=extra,
                     no_memory_reason="the Paddle programs' logs report no GPU memory")
