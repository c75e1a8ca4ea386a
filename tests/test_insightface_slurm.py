"""Real 2-node launches of the InsightFace suites on the Slurm test cluster, as the suites render them, with the entry
scripts swapped for tiny genuine programs that take the real programs' flags and config module and do real
distributed steps:

- ``oneflow/insightface`` under the ``node_ips`` launcher: one OneFlow process per node (n1, n2), started through
  ``python -m dlperf_slurm.workloads.pyconfig``, which moves the launcher's ``--node_ips`` into the config's
  ``default.node_ips`` (insightface_train.py's own flag type cannot read an address), drops ``--ctrl_port`` (its strict
  parser would reject it) and gives each node its own models root (tests/frameworks/oneflow/tiny_face.py, with
  face_config.py for sample_config.py);
- ``mxnet/insightface`` (ArcFace ``train.py``, data parallel) under the ``dmlc`` launcher: one MXNet worker per node,
  ``Module.fit`` over a ``dist_device_sync`` kvstore, MXNet's own Speedometer lines on every worker
  (tests/frameworks/mxnet/tiny_face.py, with face_config.py for config.py).

Each job is submitted through the CLI and read back by ``collect``. Needs the test cluster (tests/slurm/start.sh 2)
and the oneflow / mxnet venvs (``python tests/frameworks/venvs.py oneflow|mxnet``); each test skips with the reason
otherwise. A minute or two each.
"""

from __future__ import annotations

import re
import socket
import statistics
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import REPO, collect_summary, framework_on_cluster, nvidia_libs, submit_and_wait  # noqa: E402

from dlperf_slurm.model.status import Status  # noqa: E402

_of, _of_marks = framework_on_cluster("oneflow")
_mx, _mx_marks = framework_on_cluster("mxnet")

COMMON = """[measure]
repeats = 1
warmup_steps = 2
measure_steps = 6
[slurm]
time = "00:05:00"
gpu_request = "none"
mem = "3G"
[environment.env]
OMP_NUM_THREADS = "1"
PYTHONPATH = "{repo}"
"""

ONEFLOW = """suite = "oneflow/insightface"
name = "of-face-2x1"
[axes]
devices = ["2x1"]
batch_size = [2]
parallel = ["data"]
num_classes = [1000]
[options]
python = "{python}"
workdir = "{workdir}"
script = "tiny_face.py"
config_module = "face_config"
""" + COMMON + """LD_LIBRARY_PATH = "{libs}"
"""

MXNET = """suite = "mxnet/insightface"
name = "mx-face-2x1"
[axes]
devices = ["2x1"]
batch_size = [2]
parallel = ["data"]
launcher = ["dmlc"]
num_classes = [100]
[options]
python = "{python}"
workdir = "{workdir}"
script = "tiny_face.py"
config_module = "face_config"
frequent = 1
""" + COMMON + """CUDA_VISIBLE_DEVICES = ""
"""


def _labelled(pattern: str, text: str) -> dict[int, tuple]:
    """srun --label's node number -> the groups of the line matching ``pattern`` on that node."""
    return {int(m[0]): m[1:] for m in re.findall(r"^(\d+): " + pattern + "$", text, re.M)}


def _marked(marks):
    """Apply a framework's marks (slurm, slow, and the skips when the cluster or its venv is missing) to one test."""
    def deco(fn):
        for mark in marks:
            fn = mark(fn)
        return fn
    return deco


@_marked(_of_marks)
def test_oneflow_face_node_ips_2x1_joins_n1_and_n2_and_collect_reads_it(tmp_path):
    libs = nvidia_libs(_of)
    text = ONEFLOW.format(python=_of, workdir=HERE / "frameworks" / "oneflow", repo=REPO, libs=libs)
    logs, (run,) = submit_and_wait(tmp_path, text, 300)
    log = run.log.read_text()
    assert run.status == Status.OK, log[-4000:]
    assert run.nodes == "n[1-2]"
    joined = _labelled(r"dlperf-test: rank (\d+) of (\d+) on (\S+): all_reduce\(1\) = (\d+); node_ips (\S+); "
                       r"models_root (\S+); num_classes (\d+)", log)
    want_ips = ",".join(socket.gethostbyname(n) for n in ("n1", "n2"))
    assert sorted(joined) == [0, 1], log[-4000:]
    for label, (rank, world, host, total, ips, root, classes) in joined.items():
        # one process per node, ranks in node order, one job of 2, the allocation's addresses from the config
        assert (int(rank), int(world), host, int(total), ips) == (label, 2, f"n{label + 1}", 2, want_ips), joined
        assert root.endswith(f".work/models/node{label}") and int(classes) == 1000, joined
        assert re.search(rf"^{label}: pyconfig: face_config\.default\.node_ips = \[", log, re.M), log[-4000:]
        assert re.search(rf"^{label}: pyconfig: --ctrl_port=\d+ taken off", log, re.M), log[-4000:]
    speeds = [float(v) for i, v in re.findall(r"^0: train: iter (\d+), loss \S+, throughput: (\S+)$", log, re.M)
              if 2 <= int(i) <= 7]
    assert len(speeds) == 6, log[-4000:]
    assert not re.search(r"^1: train:", log, re.M)  # the first node prints for the job
    (cell,) = collect_summary(logs, "of-face-2x1")["cells"]
    assert cell["shape"] == "2n1g" and cell["n_ok"] == 1 and cell["published"] == "speed", cell
    assert cell["median"] == pytest.approx(statistics.mean(speeds), abs=0.01), (speeds, cell)


@_marked(_mx_marks)
def test_mxnet_face_train_py_dmlc_2x1_joins_n1_and_n2_and_collect_reads_it(tmp_path):
    text = MXNET.format(python=_mx, workdir=HERE / "frameworks" / "mxnet", repo=REPO)
    logs, (run,) = submit_and_wait(tmp_path, text, 300)
    log = run.log.read_text()
    assert run.status == Status.OK, log[-4000:]
    assert run.nodes == "n[1-2]"
    joined = _labelled(r"dlperf-test: worker (\d+) of num_workers=(\d+) on (\S+): dist_device_sync sum of 1 = (\d+); "
                       r"config\.num_workers (\d+); models (\S+); num_classes (\d+)", log)
    assert sorted(joined) == [0, 1], log[-4000:]
    assert {int(r) for r, *_ in joined.values()} == {0, 1}, joined  # ps-lite numbers the workers as they register
    for label, (_r, workers, host, total, cfg_workers, models, classes) in joined.items():
        assert (int(workers), host, int(total), int(cfg_workers)) == (2, f"n{label + 1}", 2, 2), joined
        assert models.endswith(f".work/models/node{label}/r100-arcface-emore") and int(classes) == 100, joined
    # every worker prints its own node's Speedometer lines; the suite reads the first node's, x nodes
    per_node = {label: [float(v) for b, v in re.findall(
        rf"^{label}: INFO:root:Epoch\[0\] Batch \[\d+-(\d+)\]\tSpeed: (\S+) samples/sec", log, re.M) if 3 <= int(b) <= 8]
        for label in (0, 1)}
    assert len(per_node[0]) == len(per_node[1]) == 6, log[-4000:]
    (cell,) = collect_summary(logs, "mx-face-2x1")["cells"]
    assert cell["shape"] == "2n1g" and cell["n_ok"] == 1 and cell["published"] == "speed", cell
    assert cell["median"] == pytest.approx(2 * statistics.mean(per_node[0]), abs=0.01), (per_node, cell)
