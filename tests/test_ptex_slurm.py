"""A real 2-node launch of the ``pytorch-examples/resnet50`` suite on the Slurm test cluster: the suite's rendered
launch (the mp_spawn launcher: srun, one process per node, --world-size 2 --rank $SLURM_NODEID --dist-url
tcp://<first host>:<port>) with main.py swapped for a tiny genuine cut of it (tests/frameworks/ptex/tiny_main.py:
main.py's distributed setup, DDP, ProgressMeter, one --dummy epoch of 40 32x32 images, gloo on CPU); the job is
submitted through the CLI and read back by ``collect``.

Needs the test cluster (tests/slurm/start.sh 2) and the ptex venv (``python tests/frameworks/venvs.py ptex``);
skipped with the reason otherwise. About a minute.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import collect_summary, framework_on_cluster, submit_and_wait  # noqa: E402

from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("ptex")

MATRIX = """suite = "pytorch-examples/resnet50"
name = "ptex-2x1"
[axes]
devices = ["2x1"]
batch_size = [2]
[options]
python = "{python}"
workdir = "{workdir}"
script = "tiny_main.py"
dummy = true
dist_backend = "gloo"
[measure]
repeats = 1
warmup_steps = 2
measure_steps = 6
[slurm]
time = "00:04:00"
gpu_request = "none"
[environment.env]
OMP_NUM_THREADS = "1"
GLOO_SOCKET_IFNAME = "lo"
PYTHONUNBUFFERED = "1"
TINY_IMAGES = "40"
"""


def test_pytorch_examples_2x1_spans_n1_and_n2_and_collect_reads_it(tmp_path):
    logs, (run,) = submit_and_wait(tmp_path, MATRIX.format(python=_py, workdir=HERE / "frameworks" / "ptex"), 240)
    text = run.log.read_text()
    assert run.status == Status.OK, text[-4000:]
    assert run.nodes == "n[1-2]"
    # every rank joined one job: one process per node, rank = node rank x 1 + 0, world = 2 nodes x 1 process,
    # and an all_reduce across both gave 2; srun labels each node's lines with the node number
    joined = {int(label): (int(r), int(w), int(node), int(s)) for label, r, w, node, s in re.findall(
        r"^(\d+): dlperf-test: rank (\d+) of world (\d+) on \S+ \(node rank (\d+), local 0\): all_reduce\(1\) = (\d+)$",
        text, re.M)}
    assert joined == {0: (0, 2, 0, 2), 1: (1, 2, 1, 2)}, text[-4000:]
    # both ranks printed every step of the epoch: 40 images / (2 per node x 2 nodes) = 10 steps
    for label in (0, 1):
        steps = re.findall(rf"^{label}: Epoch: \[0\]\[\s*(\d+)/10\]\tTime ", text, re.M)
        assert [int(s) for s in steps] == list(range(1, 11)), text[-4000:]
    (cell,) = collect_summary(logs, "ptex-2x1")["cells"]
    assert cell["shape"] == "2n1g" and cell["n_ok"] == 1 and cell["median"] > 0, cell
    assert cell["published"] == "time", cell
    # the figure is the suite's time flavour: global batch 4 x 6 steps / the window's summed mean Time (3..8)
    times: dict[int, list[float]] = {}
    for i, t in re.findall(r"^\d+: Epoch: \[0\]\[\s*(\d+)/10\]\tTime\s+(\S+)", text, re.M):
        times.setdefault(int(i), []).append(float(t))
    window = sum(sum(times[i]) / len(times[i]) for i in range(3, 9))
    assert cell["median"] == pytest.approx(4 * 6 / window, rel=1e-3), (cell, times)
    print(f"ptex 2x1: {cell['median']:.2f} img/s over steps 3..8, ranks {sorted(joined)}")
