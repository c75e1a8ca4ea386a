"""``ngc-pytorch``: NVIDIA DeepLearningExamples PyTorch ResNet-50 v1.5 and BERT, as DLPerf ran them
(NGC PyTorch container). Logs are dllogger's StdOutBackend (``DLL <datetime> - ...``) or JSON stream (``DLLL {...}``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from dlperf_slurm.suites import ParseContext, RunResult, Suite, register


class _NGCPyTorch(Suite):
    framework = "ngc-pytorch"
    launcher = "torchrun"
    launchers = ("torchrun", "srun")
    precisions = ("fp32", "amp")


@register
class ResNet50(_NGCPyTorch):
    model = "resnet50"
    description = "DeepLearningExamples PyTorch/Classification/ConvNets main.py --arch resnet50"
    sample_unit = "img/s"
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
