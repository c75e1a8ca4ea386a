"""A real 2-node launch of the ``mxnet-gluon/resnet50`` suite on the Slurm test cluster under the ``dmlc`` launcher
(MXNet's own kvstore dist_sync: one worker per node through srun, the ps-lite scheduler and server beside the
first node's worker, DMLC_PS_ROOT_URI from the allocation's node list), with its entry script swapped for a tiny
genuine Gluon program (tests/frameworks/mxnet/tiny_train.py) that takes gluon-cv's flags and prints its
``Epoch[0] Batch[N]\\tSpeed: X samples/sec`` lines; the job is submitted through the CLI and read back by ``collect``.

Needs the test cluster (tests/slurm/start.sh 2) and the mxnet venv (``python tests/frameworks/venvs.py mxnet``);
skipped with the reason otherwise. About a minute.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import collect_summary, framework_on_cluster, submit_and_wait  # noqa: E402

from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("mxnet")

MATRIX = """suite = "mxnet-gluon/resnet50"
name = "mxnet-2x1"
[axes]
devices = ["2x1"]
batch_size = [2]
launcher = ["dmlc"]
[options]
python = "{python}"
workdir = "{workdir}"
script = "tiny_train.py"
steps_flag = "--max-batches"
[measure]
repeats = 1
warmup_steps = 2
measure_steps = 6
[slurm]
time = "00:04:00"
gpu_request = "none"
[environment.env]
OMP_NUM_THREADS = "1"
"""


def test_mxnet_gluon_resnet50_dmlc_2x1_spans_n1_and_n2_and_collect_reads_it(tmp_path):
    logs, (run,) = submit_and_wait(tmp_path, MATRIX.format(python=_py, workdir=HERE / "frameworks" / "mxnet"), 300)
    text = run.log.read_text()
    assert run.status == Status.OK, text[-4000:]
    assert run.nodes == "n[1-2]"
    # both workers joined one dist_sync job: srun labels each node's worker with the node number
    joined = {int(label): (int(r), int(w), host, int(s)) for label, r, w, host, s in re.findall(
        r"^(\d+): dlperf-test: worker (\d+) of num_workers=(\d+) on (\S+): dist_sync sum of 1 = (\d+)$", text, re.M)}
    assert sorted(joined) == [0, 1], text[-4000:]
    assert {r for r, _, _, _ in joined.values()} == {0, 1}, joined
    assert all(w == 2 and s == 2 for _, w, _, s in joined.values()), joined
    assert {label: host for label, (_, _, host, _) in joined.items()} == {0: "n1", 1: "n2"}, joined  # one per node
    # ps-lite numbers the workers as they register: worker 0 (the one that prints gluon-cv's lines) is on either node
    (label0,) = [label for label, (r, _, _, _) in joined.items() if r == 0]
    assert f"{label0}: INFO:root:Epoch[0] Batch[8]\tSpeed: " in text, text[-4000:]
    assert f"{1 - label0}: INFO:root:Epoch[0] Batch[" not in text, text[-4000:]
    (cell,) = collect_summary(logs, "mxnet-2x1")["cells"]
    assert cell["shape"] == "2n1g" and cell["n_ok"] == 1 and cell["median"] > 0, cell
    assert cell["published"] == "speed" and cell["median"] == cell["median_speed"], cell
    speeds = [float(v) for v in re.findall(rf"^{label0}: INFO:root:Epoch\[0\] Batch\[(?:[3-8])\]\tSpeed: (\S+) samples/sec",
                                           text, re.M)]
    assert len(speeds) == 6 and abs(cell["median"] - sum(speeds) / len(speeds)) < 0.01, (speeds, cell)
