"""``tf2``: TensorFlow 2 official models (tensorflow/models) ResNet-50 and BERT-base, as DLPerf ran them.
ResNet-50 logs Keras ``TimeHistory`` lines every ``log_steps`` (100) steps; BERT logs ``Train Step:`` lines.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from dlperf_slurm.suites import ParseContext, RunResult, Suite, register


class _TF2(Suite):
    framework = "tf2"
    launcher = "tf_config"
    launchers = ("tf_config",)
    precisions = ("fp32", "amp")
    supports_xla = True


@register
class ResNet50(_TF2):
    model = "resnet50"
    description = "tensorflow/models official/vision/image_classification classifier_trainer.py (Keras)"
    sample_unit = "img/s"
    options = {"workdir": "/workspace/models/official/vision/image_classification", "data_dir": "/data/tfrecords",
               "python": "python3", "log_steps": 100}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        steps = measure.warmup_steps + measure.measure_steps
        overrides = ",".join([
            f"runtime.num_gpus={cell.gpus_per_node}",
            f"train_dataset.batch_size={cell.batch_size}",
            f"train.steps={steps}", "train.epochs=1",
            f"train.time_history.log_steps={options['log_steps']}",
            "runtime.distribution_strategy=" + ("multi_worker_mirrored" if cell.nodes > 1 else "mirrored"),
            "runtime.enable_xla=" + ("true" if cell.xla else "false"),
            "train_dataset.dtype=" + ("float16" if cell.precision == "amp" else "float32"),
        ])
        return [options["python"], f"{options['workdir']}/classifier_trainer.py", "--mode=train",
                "--model_type=resnet", "--dataset=imagenet", "--model_dir=/tmp/tf2_rn50",
                f"--data_dir={options['data_dir']}",
                f"--config_file={options['workdir']}/configs/examples/resnet/imagenet/gpu.yaml",
                f"--params_override={overrides}"]


@register
class BertBase(_TF2):
    model = "bert-base"
    description = "tensorflow/models official/nlp/bert run_pretraining.py, seq 128"
    sample_unit = "seq/s"
    options = {"workdir": "/workspace/models/official/nlp/bert", "input_files": "/data/bert/wiki/*.tfrecord",
               "bert_config_file": "/data/bert/bert_config.json", "python": "python3"}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        argv = [options["python"], f"{options['workdir']}/run_pretraining.py",
                f"--input_files={options['input_files']}", "--max_seq_length=128", "--max_predictions_per_seq=20",
                f"--train_batch_size={cell.global_batch}",
                f"--num_steps_per_epoch={measure.warmup_steps + measure.measure_steps}", "--num_train_epochs=1",
                "--warmup_steps=10000", "--use_next_sentence_label=True", "--train_summary_interval=0",
                "--optimizer_type=adamw", f"--num_gpus={cell.gpus_per_node}",
                "--dtype=" + ("fp16" if cell.precision == "amp" else "fp32"),
                "--enable_xla=" + ("true" if cell.xla else "false"),
                "--model_dir=/tmp/tf2_bert", f"--bert_config_file={options['bert_config_file']}"]
        if cell.nodes > 1:
            argv += ["--distribution_strategy=multi_worker_mirrored", "--all_reduce_alg=nccl"]
        return argv
