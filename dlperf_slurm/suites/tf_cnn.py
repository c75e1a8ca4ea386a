"""Synthetic-data baselines: ``tf-cnn`` (tensorflow/benchmarks tf_cnn_benchmarks.py) and ``horovod-synthetic``
(Horovod's examples ``*_synthetic_benchmark.py``) — the network sanity baseline of a scaling study.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from dlperf_slurm.suites import ParseContext, RunResult, Suite, register


@register
class TfCnnResNet50(Suite):
    framework = "tf-cnn"
    model = "resnet50"
    description = "tf_cnn_benchmarks.py --model=resnet50 (synthetic unless data = real)"
    sample_unit = "img/s"
    launcher = "mpirun"
    launchers = ("mpirun", "horovodrun", "srun")
    precisions = ("fp32", "fp16", "amp")
    supports_xla = True
    axes = {"variable_update": ("horovod", "replicated", "parameter_server"), "data": ("synthetic", "real")}
    axis_defaults = {"variable_update": "horovod", "data": "synthetic"}
    options = {"workdir": "/workspace/benchmarks/scripts/tf_cnn_benchmarks", "data_dir": "/data/imagenet",
               "python": "python3"}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        update = cell.param("variable_update", "horovod")
        argv = [options["python"], f"{options['workdir']}/tf_cnn_benchmarks.py", "--model=resnet50",
                f"--batch_size={cell.batch_size}", f"--num_batches={measure.measure_steps}",
                f"--num_warmup_batches={measure.warmup_steps}", f"--variable_update={update}",
                "--display_every=10", "--num_gpus=" + ("1" if update == "horovod" else str(cell.gpus_per_node))]
        if cell.precision in ("fp16", "amp"):
            argv.append("--use_fp16")
        if cell.xla:
            argv.append("--xla_compile")
        if cell.param("data", "synthetic") == "real":
            argv += [f"--data_dir={options['data_dir']}", "--data_name=imagenet"]
        return argv


@register
class HorovodSyntheticResNet50(Suite):
    framework = "horovod-synthetic"
    model = "resnet50"
    description = "Horovod examples/pytorch/pytorch_synthetic_benchmark.py (or the tensorflow2 one) --model resnet50"
    sample_unit = "img/s"
    launcher = "horovodrun"
    launchers = ("horovodrun", "mpirun", "srun")
    precisions = ("fp32", "fp16")
    options = {"script": "/workspace/horovod/examples/pytorch/pytorch_synthetic_benchmark.py", "python": "python3",
               "batches_per_iter": 10}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        bpi = options["batches_per_iter"]
        argv = [options["python"], options["script"], "--model", "resnet50", "--batch-size", str(cell.batch_size),
                "--num-warmup-batches", str(measure.warmup_steps), "--num-batches-per-iter", str(bpi),
                "--num-iters", str(max(1, measure.measure_steps // bpi))]
        if cell.precision == "fp16":
            argv.append("--fp16-allreduce")
        return argv
