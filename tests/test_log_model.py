"""The model a log says its program ran (tf_cnn_benchmarks' ``Model:       vgg16`` header line, Horovod's synthetic
benchmark's ``Model: resnet50``): its parser records it as printed (``RunResult.extra["log_model"]``). Every log here
is real program output (each fixture folder's SOURCE.toml says where it comes from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf_slurm import suites
from dlperf_slurm import parsing as lp
from dlperf_slurm.model import ParseContext

REAL = Path(__file__).parent / "fixtures" / "real"
TF_CNN = REAL / "tf_cnn_benchmarks"
HOROVOD = REAL / "horovod-examples"
VGG16 = [TF_CNN / "2017-10" / "tensorpack_issue442_vgg16_b32_2gpu_ps.log",
         TF_CNN / "8fb7907" / "tf_cnn_vgg16_synthetic_cpu_b2_lr1e-6.log",
         TF_CNN / "8fb7907" / "tf_cnn_vgg16_synthetic_cpu_b8_10steps.log"]

# (log, suite whose parser reads it, the model its header line names)
MODELS = [
    (VGG16[0], "tf-cnn/vgg16", "vgg16"),
    (VGG16[1], "tf-cnn/vgg16", "vgg16"),
    (VGG16[2], "tf-cnn/vgg16", "vgg16"),
    (TF_CNN / "8fb7907" / "tf_cnn_vgg16_synthetic_cpu_b2_10steps.log", "tf-cnn/vgg16", "vgg16"),
    (TF_CNN / "8fb7907" / "tf_cnn_resnet20_digits_cpu_2epochs.log", "tf-cnn/resnet50", "resnet20"),
    (TF_CNN / "8fb7907" / "tf_cnn_resnet20_digits_cpu_stop_at_top1.log", "tf-cnn/resnet50", "resnet20"),
    (TF_CNN / "8fb7907" / "tf_cnn_trivial_cpu_b8_train_and_eval.log", "tf-cnn/resnet50", "trivial"),
    (TF_CNN / "2019-06" / "orion_inception3_imagenet_5epochs_2gpu.log", "tf-cnn/resnet50", "inception3"),
    # horovodrun --gloo's "[0]<stdout>:" and mpirun's "[1,0]<stdout>:" rank labels
    (HOROVOD / "0.28.1" / "pytorch_synthetic_benchmark_gloo_2cpu_b2.log", "horovod-synthetic/resnet50", "resnet50"),
    (HOROVOD / "0.28.1" / "pytorch_synthetic_benchmark_mpirun_2cpu_b2.log", "horovod-synthetic/resnet50",
     "resnet50"),
]


@pytest.mark.parametrize("path, suite, model", MODELS, ids=[p.name for p, _, _ in MODELS])
def test_the_parser_records_the_model_the_log_names(path, suite, model):
    ctx = ParseContext(nodes=1, gpus_per_node=2, batch_size=2, warmup_steps=0, measure_steps=1)
    assert any(  # the header line as the program printed it
        line.rpartition(":Model:")[2].strip() == model or line.split() == ["Model:", model]
        for line in path.read_text().splitlines())
    for lines in (lp.read_lines(path), (line for line in lp.read_lines(path))):  # the block path, the line path
        assert suites.get(suite).parse(lines, ctx).extra.get("log_model") == model
