"""A real 2-node launch of the ``oneflow/resnet50`` suite on the Slurm test cluster, in DLPerf's form: the suite's
rendered launch (the node_ips launcher: one process per node, srun on n1 and n2, --node_ips built in the job from the
allocation's node list, --ctrl_port the job's port) with its entry script swapped for a tiny genuine OneFlow
data-parallel program (tests/frameworks/oneflow/tiny_train.py) that takes of_cnn_train_val.py's flags and prints its
progress lines; the job is submitted through the CLI and read back by ``collect``.

Needs the test cluster (tests/slurm/start.sh 2) and the oneflow venv (``python tests/frameworks/venvs.py oneflow``:
OneFlow 0.9.0 under Python 3.10, a CUDA 11 build that runs on CPU with the cuDNN/cuBLAS wheels on LD_LIBRARY_PATH);
skipped with the reason otherwise. About a minute.
"""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import collect_summary, framework_on_cluster, nvidia_libs, submit_and_wait  # noqa: E402

from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("oneflow")

MATRIX = """suite = "oneflow/resnet50"
name = "oneflow-2x1"
[axes]
devices = ["2x1"]
batch_size = [2]
[options]
python = "{python}"
workdir = "{workdir}"
script = "tiny_train.py"
data_dir = ""
[measure]
repeats = 1
warmup_steps = 2
measure_steps = 6
[slurm]
time = "00:04:00"
gpu_request = "none"
[environment.env]
OMP_NUM_THREADS = "1"
LD_LIBRARY_PATH = "{libs}"
"""


def test_oneflow_resnet50_2x1_spans_n1_and_n2_and_collect_reads_it(tmp_path):
    libs = nvidia_libs(_py)
    logs, (run,) = submit_and_wait(tmp_path, MATRIX.format(python=_py, workdir=HERE / "frameworks" / "oneflow", libs=libs), 240)
    text = run.log.read_text()
    assert run.status == Status.OK, text[-4000:]
    assert run.nodes == "n[1-2]"
    # both nodes' processes joined one job of world size 2 (srun labels each node's lines with its number), each
    # given the allocation's addresses in node order and the job's port
    joined = {int(label): (int(r), int(w), int(s), ips, int(port)) for label, r, w, s, ips, port in re.findall(
        r"^(\d+): dlperf-test: rank (\d+) of (\d+) on \S+: all_reduce\(1\) = (\d+); node_ips (\S+) ctrl_port (\d+)$",
        text, re.M)}
    want_ips = ",".join(socket.gethostbyname(n) for n in ("n1", "n2"))
    assert {k: v[:4] for k, v in joined.items()} == {0: (0, 2, 2, want_ips), 1: (1, 2, 2, want_ips)}, text[-4000:]
    assert joined[0][4] == joined[1][4] and joined[0][4] != 50051  # the job's port, not OneFlow's default
    assert re.search(r"^0: train: epoch 0, iter 8, loss: \S+, .*samples/s: \S+ \d+\.\d+$", text, re.M), text[-4000:]
    assert not re.search(r"^1: train:", text, re.M)  # the first node prints for the job
    (cell,) = collect_summary(logs, "oneflow-2x1")["cells"]
    assert cell["shape"] == "2n1g" and cell["n_ok"] == 1 and cell["median"] > 0, cell
    assert cell["published"] == "time", cell


def test_oneflow_resnet50_under_oneflow_distributed_launch_uses_the_suites_python(tmp_path):
    """The newer form: ``python -m oneflow.distributed.launch`` (one process per device) from the suite's own
    interpreter (the venv's: a bare ``python`` from PATH has no OneFlow), 1x2 on one node of the cluster."""
    libs = nvidia_libs(_py)
    text = MATRIX.format(python=_py, workdir=HERE / "frameworks" / "oneflow", libs=libs)
    text = text.replace('name = "oneflow-2x1"', 'name = "oneflow-1x2"').replace('devices = ["2x1"]',
                                                                              'devices = ["1x2"]\nlauncher = ["oneflow"]')
    logs, (run,) = submit_and_wait(tmp_path, text, 240)
    log = run.log.read_text()
    assert run.status == Status.OK, log[-4000:]
    assert f"{_py} -m oneflow.distributed.launch --nnodes 1 --nproc_per_node 2" in run.script.read_text()
    ranks = sorted((int(r), int(w), int(s)) for r, w, s in re.findall(
        r"^dlperf-test: rank (\d+) of (\d+) on \S+: all_reduce\(1\) = (\d+);", log, re.M))
    assert ranks == [(0, 2, 2), (1, 2, 2)], log[-4000:]
    (cell,) = collect_summary(logs, "oneflow-1x2")["cells"]
    assert cell["shape"] == "1n2g" and cell["n_ok"] == 1 and cell["median"] > 0, cell
