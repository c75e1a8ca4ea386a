"""Synthetic-data baselines: ``tf-cnn`` (tensorflow/benchmarks tf_cnn_benchmarks.py: ResNet-50 and VGG16) and
``horovod-synthetic`` (Horovod's examples ``*_synthetic_benchmark.py``) — the network sanity baseline of a scaling
study. With ``data = "real"`` tf_cnn_benchmarks also trains on ImageNet TFRecords, and runs the DDL study's accuracy
runs (``[measure] mode = "accuracy"``: its own --num_epochs, evaluation after each epoch and --stop_at_top_1_accuracy).
"""

from __future__ import annotations

import shlex
from typing import Any, Iterable, Mapping

from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.suites import REPEAT, Suite, register, tf_cnn_log


@register
class TfCnnResNet50(Suite):
    framework = "tf-cnn"
    imports = ("tensorflow",)
    model = "resnet50"
    description = "tf_cnn_benchmarks.py --model=resnet50 (synthetic unless data = real)"
    sample_unit = "img/s"
    launcher = "mpirun"
    launchers = ("mpirun", "horovodrun", "srun", "tf_config")
    precisions = ("fp32", "fp16", "amp")
    supports_xla = True
    evaluations = ("tf_cnn",)  # "Accuracy @ 1 = ... [N examples]" (--eval, --eval_during_training_every_n_*)
    # accuracy runs: --num_epochs of the real data, an evaluation of one pass of its validation set after each
    # epoch (--eval_during_training_every_n_epochs=1: after epochs 1..E-1, then its final evaluation), stopping at
    # a top-1 target (--stop_at_top_1_accuracy; a top-5 target has no flag: all epochs, collect reads it)
    accuracy = True
    # local_parameter_device: where replicated / parameter_server keep the shared variables (tf_cnn_benchmarks'
    # default gpu; Tensorpack's benchmark compares against --local_parameter_device=cpu)
    axes = {"variable_update": ("horovod", "replicated", "parameter_server"), "data": ("synthetic", "real"),
            "local_parameter_device": ("gpu", "cpu")}
    axis_defaults = {"variable_update": "horovod", "data": "synthetic", "local_parameter_device": "gpu"}
    # extra_args: more of tf_cnn_benchmarks' flags, after the suite's (split as a shell would, each one word): an
    # accuracy run's optimizer and learning-rate schedule (--optimizer=momentum --piecewise_learning_rate_schedule=...)
    options = {"workdir": "/workspace/benchmarks/scripts/tf_cnn_benchmarks", "data_dir": "/data/imagenet",
               "python": "python3", "extra_args": ""}

    def drop_reason(self, cell) -> str | None:
        if (why := super().drop_reason(cell)) is not None:
            return why
        update = cell.param("variable_update", "horovod")
        if update == "horovod":
            return "variable_update horovod is one rank per GPU: not under tf_config" \
                if cell.launcher == "tf_config" else None
        # replicated / parameter_server: one process per node drives its GPUs (--num_gpus)
        if cell.nodes > 1:
            return (f"variable_update {update} across nodes needs tf_cnn_benchmarks' --job_name/--ps_hosts/"
                    "--worker_hosts processes, which this suite does not start")
        if cell.launcher != "tf_config" and cell.gpus_per_node > 1:
            return (f"variable_update {update}: one process drives all of the node's GPUs (--num_gpus): launcher "
                    f"tf_config, not one per GPU under {cell.launcher}")
        return None

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        update = cell.param("variable_update", "horovod")
        length = (f"--num_epochs={measure.epochs}" if measure.accuracy  # tf_cnn: at most one of the two
                  else f"--num_batches={measure.measure_steps}")
        argv = [options["python"], f"{options['workdir']}/tf_cnn_benchmarks.py", f"--model={self.model}",
                f"--batch_size={cell.batch_size}", length,
                f"--num_warmup_batches={measure.warmup_steps}", f"--variable_update={update}",
                "--display_every=10", "--num_gpus=" + ("1" if update == "horovod" else str(cell.gpus_per_node))]
        if update != "horovod" and cell.param("local_parameter_device", "gpu") != "gpu":
            argv.append(f"--local_parameter_device={cell.param('local_parameter_device', 'gpu')}")
        if cell.precision in ("fp16", "amp"):
            argv.append("--use_fp16")
        if cell.xla:
            argv.append("--xla_compile")
        if cell.param("data", "synthetic") == "real":
            argv += [f"--data_dir={options['data_dir']}", "--data_name=imagenet"]
        if measure.accuracy:
            # --num_eval_epochs: one pass of the validation set (it defaults to --num_epochs passes)
            # each repeat its own seed (tf_cnn's default is the same 1234 for every run)
            argv += ["--eval_during_training_every_n_epochs=1", "--num_eval_epochs=1", f"--tf_random_seed={REPEAT}"]
            if measure.target is not None and measure.target.metric == "top1":
                argv.append(f"--stop_at_top_1_accuracy={measure.target.value:g}")
        return argv + shlex.split(options["extra_args"])

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "extra_args":
            try:
                shlex.split(value)
            except ValueError as err:
                return f"cannot be split into arguments: {err}"
        return None

    def accuracy_error(self, cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        if cell.param("data", "synthetic") != "real":
            return ("axes.data", 'an accuracy run evaluates on real data: set data = ["real"] in [axes] and '
                                 "data_dir in [options] (ImageNet TFRecords: train-* and validation-*)")
        return None

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return tf_cnn_log.parse_tf_cnn(lines, ctx, self.evaluations)


@register
class TfCnnVgg16(TfCnnResNet50):
    """VGG16 (tf_cnn_benchmarks' models/vgg_model.py, ImageNet only; 138,357,544 parameters, 528 MiB of fp32
    gradients a step: the DDL study's communication-bound model). Its program's defaults differ from ResNet-50's only
    inside the program (a constant learning rate of 0.005 where ResNet-50 has a warm-up and steps, unless
    --piecewise_learning_rate_schedule; no batch norm): the argv, the axes and the log are the same."""

    model = "vgg16"
    description = "tf_cnn_benchmarks.py --model=vgg16 (synthetic unless data = real)"


@register
class HorovodSyntheticResNet50(Suite):
    framework = "horovod-synthetic"
    imports = ("horovod",)
    model = "resnet50"
    description = "Horovod examples/pytorch/pytorch_synthetic_benchmark.py (or the tensorflow2 one) --model resnet50"
    sample_unit = "img/s"
    launcher = "horovodrun"
    launchers = ("horovodrun", "mpirun", "srun")
    precisions = ("fp32", "fp16")
    options = {"script": "/workspace/horovod/examples/pytorch/pytorch_synthetic_benchmark.py", "python": "python3",
               "batches_per_iter": 10}
    option_minimum = {"batches_per_iter": (1, "batches per timed iteration")}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        bpi = options["batches_per_iter"]
        argv = [options["python"], options["script"], "--model", "resnet50", "--batch-size", str(cell.batch_size),
                "--num-warmup-batches", str(measure.warmup_steps), "--num-batches-per-iter", str(bpi),
                "--num-iters", str(max(1, measure.measure_steps // bpi))]
        if cell.precision == "fp16":
            argv.append("--fp16-allreduce")
        return argv

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return tf_cnn_log.parse_horovod(lines, ctx)
