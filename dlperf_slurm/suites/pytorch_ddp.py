"""``pytorch-ddp``: our built-in PyTorch reference workloads (``dlperf_slurm.workloads``), runnable anywhere.

Launch spec and parser side by side; the log is our own ``:::DLPERF {json}`` line format.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from dlperf_slurm.suites import ParseContext, RunResult, Suite, register


class _PytorchDDP(Suite):
    framework = "pytorch-ddp"
    launcher = "torchrun"
    launchers = ("torchrun", "srun", "mpirun")
    precisions = ("fp32", "amp", "fp16", "bf16")
    supports_xla = True
    xla_name = "torch.compile"
    axes = {"data_location": ("device", "host")}
    axis_defaults = {"data_location": "device"}
    options = {"tiny": False, "threads": 0, "python": "python3", "seed": 0}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        argv = [
            options["python"], "-m", "dlperf_slurm.workloads.train",
            "--model", self.model,
            "--batch-size", str(cell.batch_size),
            "--precision", cell.precision,
            "--compile", str(int(cell.xla)),
            "--warmup-steps", str(measure.warmup_steps),
            "--measure-steps", str(measure.measure_steps),
            "--data-location", str(cell.param("data_location", "device")),
            "--seed", str(options["seed"]),
        ]
        if options["threads"]:
            argv += ["--threads", str(options["threads"])]
        if options["tiny"]:
            argv.append("--tiny")
        return argv


@register
class ResNet50(_PytorchDDP):
    model = "resnet50"
    description = "ResNet-50 v1.5, synthetic ImageNet-shaped data, SGD+momentum, DDP"
    sample_unit = "img/s"


@register
class BertBase(_PytorchDDP):
    model = "bert-base"
    description = "BERT-base pre-training (MLM+NSP), seq 128, synthetic tokens, AdamW, DDP"
    sample_unit = "seq/s"
