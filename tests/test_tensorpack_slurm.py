"""A real launch of the ``tensorpack/resnet50`` suite on the Slurm test cluster: its rendered launch (tf_config on
one node: the program itself, one process driving the node's devices) with the entry script swapped for a tiny
genuine tensorpack 0.11 program (tests/frameworks/tensorpack/resnet-multigpu.py: tensorpack layers, FakeData /
DummyConstantInput / QueueInput, SimpleTrainer, ThroughputTracker) that takes resnet-multigpu.py's arguments; the
job is submitted through the CLI and read back by ``collect``.

Needs the test cluster (tests/slurm/start.sh 2) and the tensorpack venv (``python tests/frameworks/venvs.py
tensorpack``); skipped with the reason otherwise. About half a minute.

The seed's one campaign (both suites, the summary's "Tensorpack vs tf_cnn_benchmarks" table) also runs the real
tf_cnn_benchmarks.py (ResNet-50 on TF 2.21 CPU through tf.compat.v1, soft placement): the copy vendored in
``tests/frameworks/tensorpack/tf_cnn_benchmarks`` (tensorflow/benchmarks is GitHub-only; its SOURCE.md), or the
checkout's ``scripts/tf_cnn_benchmarks`` that ``TF_CNN_BENCHMARKS_DIR`` names.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import collect_summary, framework_on_cluster, submit_and_wait  # noqa: E402

from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("tensorpack")

# the tiny program runs 3 epochs of 10 steps (resnet-multigpu.py: 10 of 50): epoch 1 warm-up, epochs 2-3 timed
MATRIX = """suite = "tensorpack/resnet50"
name = "tensorpack-1x1"
[axes]
devices = ["1x1"]
batch_size = [4]
fake_location = ["gpu", "python-queue"]
[options]
python = "{python}"
script = "{script}"
[measure]
repeats = 1
warmup_steps = 10
measure_steps = 20
[slurm]
time = "00:04:00"
gpu_request = "none"
[environment.env]
OMP_NUM_THREADS = "1"
"""


def test_tensorpack_resnet50_1x1_on_the_cluster_and_collect_reads_it(tmp_path):
    logs, runs = submit_and_wait(
        tmp_path, MATRIX.format(python=_py, script=HERE / "frameworks" / "tensorpack" / "resnet-multigpu.py"), 240)
    assert len(runs) == 2
    for run in runs:
        text = run.log.read_text()
        assert run.status == Status.OK, text[-4000:]
        assert "Epoch 3 (global_step 30) finished, time:" in text and "Throughput (samples/sec): " in text
        assert "Training has finished!" in text
    cells = collect_summary(logs, "tensorpack-1x1")["cells"]
    assert len(cells) == 2
    for cell in cells:
        assert cell["shape"] == "1n1g" and cell["n_ok"] == 1 and cell["median"] > 0, cell
        assert cell["median_speed"] > 0, cell  # ThroughputTracker's samples/sec over the same two epochs
    print({c["cell_id"] if "cell_id" in c else c.get("id"): (c["median"], c["median_speed"]) for c in cells})


SEED = """suite = ["tensorpack/resnet50", "tf-cnn/resnet50"]
name = "tp-vs-tfcnn"
[axes]
devices = ["1x1"]
batch_size = [2]
launcher = ["tf_config"]
variable_update = ["replicated"]
fake_location = ["gpu", "cpu", "python-queue"]
local_parameter_device = ["cpu"]
[options]
python = "{python}"
[options."tensorpack/resnet50"]
script = "{script}"
[options."tf-cnn/resnet50"]
workdir = "{workdir}"
# on a CPU: NHWC (tf_cnn_benchmarks' default NCHW has a CPU MaxPool only in oneDNN's kernels, which TF enables by
# default only on CPUs with AVX512_VNNI/AMX: without them the run fails "Default MaxPoolingOp only supports NHWC")
extra_args = "--device=cpu --data_format=NHWC"
[measure]
repeats = 1
warmup_steps = 10
measure_steps = 20
[slurm]
time = "00:06:00"
gpu_request = "none"
mem = "3G"  # ResNet-50 in TF on CPU: more than a CPU's default share where the cluster enforces memory
[environment.env]
OMP_NUM_THREADS = "1"
TF_USE_LEGACY_KERAS = "1"  # tf_cnn_benchmarks too uses TF1 layers (tf.nn.rnn_cell) that Keras 3 removed
"""


TF_CNN = os.environ.get("TF_CNN_BENCHMARKS_DIR") or str(HERE / "frameworks" / "tensorpack" / "tf_cnn_benchmarks")


def test_seed_campaign_both_suites_one_table(tmp_path):
    logs, runs = submit_and_wait(tmp_path, SEED.format(
        python=_py, script=HERE / "frameworks" / "tensorpack" / "resnet-multigpu.py", workdir=TF_CNN), 400)
    assert len(runs) == 4 and all(r.status == Status.OK for r in runs), [(r.key, r.status) for r in runs]
    collect_summary(logs, "tp-vs-tfcnn")  # its markdown beside the JSON
    text = (logs.parent / "summaries" / "tp-vs-tfcnn.md").read_text()
    section = text[text.index("## Tensorpack vs tf_cnn_benchmarks"):]
    header = "| GPUs   | tensorpack gpu (img/s)   | tensorpack cpu (img/s)   | tensorpack python-queue (img/s)   |"
    assert header in section, section[:2000]
    row = next(line for line in section.splitlines() if line.startswith("| 1 "))
    values = [float(x) for x in row.strip("| ").split("|")[1:]]
    assert len(values) == 4 and all(v > 0 for v in values), row
    print(section[:1200])
