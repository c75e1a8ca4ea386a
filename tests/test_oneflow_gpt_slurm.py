"""The ``oneflow/gpt`` suite for real on the Slurm test cluster: OneFlow's LiBai (vendored, tests/frameworks/libai:
the real ``tools/train_net.py --config-file configs/gpt2_pretrain.py``) pre-trains a tiny GPT-2 (2 layers x 64,
4 heads, sequence 32) on CPU (``train.dist.device_type=cpu``, the suite's ``device`` option) with the suite's own
rendered launch (``python -m oneflow.distributed.launch`` from the venv's interpreter) and LiBai key=value
overrides, on a tiny data set made with LiBai's own ``tools/preprocess_data.py`` (tests/frameworks/libai_data.py).
One cell, 1x2 (one node, two data-parallel ranks); ``collect`` reads LiBai's own iteration lines
(``lb.utils.events``: consumed samples, ``time: X s/iter``, ``total_throughput``). Not 2x1: across n1 and n2 (one
launcher per node under srun) OneFlow 0.9.0's graph on rank 1 aborts while it allocates the plan
(``register_manager.cpp:89] Check failed: var_blob->AlignedByteSizeOfBlobBody() >= mem_block.mem_size() (0 vs.
16384)``; the same with ``--nnodes 2`` on 127.0.0.1 outside Slurm), and with ``graph.enabled=False`` (and
``dataloader.train.num_workers=0``) the two nodes hang at LiBai's first iteration (killed after 150 s).

Needs the test cluster (tests/slurm/start.sh 2) and the oneflow venv (``python tests/frameworks/venvs.py oneflow``,
which installs LiBai's pip requirements beside OneFlow 0.9.0); skipped with the reason otherwise. A few minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import collect_summary, framework_on_cluster, nvidia_libs, submit_and_wait  # noqa: E402

from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("oneflow")

LIBAI = HERE / "frameworks" / "libai"
WARMUP, MEASURE, MICRO = 3, 6, 2
MATRIX = """suite = "oneflow/gpt"
name = "libai"
[axes]
devices = ["1x2"]
batch_size = [{micro}]
precision = ["fp32"]
model_size = ["2x64x4"]
seq_length = [32]
activation_checkpointing = ["none"]
[options]
python = "{python}"
workdir = "{workdir}"
data_prefix = "{data}/corpus_text_document"
vocab_file = "{data}/gpt2-vocab.json"
merge_file = "{data}/gpt2-merges.txt"
device = "cpu"
overrides = "{overrides}"
[measure]
repeats = 1
warmup_steps = {warmup}
measure_steps = {measure}
[slurm]
time = "00:08:00"
gpu_request = "none"
[environment]
# LiBai's dataset helper Makefile runs the python3 and python3-config first on PATH
setup = ['export PATH="{bindirs}:$PATH"']
[environment.env]
OMP_NUM_THREADS = "1"
LD_LIBRARY_PATH = "{libs}"
# OneFlow 0.9.0 has no CPU layer_norm kernel: tests/frameworks/libai_cpu/sitecustomize.py says what it changes
PYTHONPATH = "{shim}"
"""
OVERRIDES = "dataloader.train.num_workers=0"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    root = tmp_path_factory.mktemp("libai")
    libai = root / "libai"
    shutil.copytree(LIBAI, libai)
    sys.path.insert(0, str(HERE / "frameworks"))
    import venvs

    base = Path(venvs.interpreter("oneflow")[0]).parent  # the venv's base interpreter's bin: its python3-config
    bindirs = f"{Path(_py).parent}:{base}"
    env = {**os.environ, "LD_LIBRARY_PATH": nvidia_libs(_py), "PATH": f"{bindirs}:{os.environ['PATH']}"}
    p = subprocess.run([str(_py), str(HERE / "frameworks" / "libai_data.py"), str(libai), str(root / "data")],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    # LiBai's own Makefile, once here (both nodes' rank 0 would run it at once on the shared folder)
    p = subprocess.run(["make", "-C", str(libai / "libai" / "data" / "data_utils")], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    text = MATRIX.format(python=_py, workdir=libai, data=root / "data", overrides=OVERRIDES, micro=MICRO,
                         warmup=WARMUP, measure=MEASURE, bindirs=bindirs, libs=nvidia_libs(_py),
                         shim=HERE / "frameworks" / "libai_cpu")
    logs, runs = submit_and_wait(root, text, 900)
    rows = {r["shape"]: r for r in collect_summary(logs, "libai")["runs"]}
    runs = {f"{r.cell.nodes}n{r.cell.gpus_per_node}g": r for r in runs}
    return rows, runs


_EVENTS = re.compile(r"^(?:(\d+): )?\[\d\d/\d\d \S+ lb\.utils\.events\]:  (?:eta: \S+  )?iteration: (\d+)/(\d+)  "
                     r"consumed_samples: (\d+)  total_loss: (\S+)  (?:time: (\S+) s/iter  )?", re.M)


def _window(text: str) -> tuple[float, float]:
    """(samples/s, ms per iteration) over the window, from LiBai's own lines: its step timer's mean s/iter x the
    iterations it timed (from the 3rd) is the clock, consumed_samples the samples."""
    rows = {int(i) + 1: (int(c), float(t) * (int(i) + 1 - 2)) for _, i, _, c, _, t in _EVENTS.findall(text) if t}
    a, b = rows[WARMUP], rows[WARMUP + MEASURE]
    return (b[0] - a[0]) / (b[1] - a[1]), 1000 * (b[1] - a[1]) / MEASURE


def _check(rows, runs, shape: str, world: int) -> str:
    row, run = rows[shape], runs[shape]
    text = run.log.read_text()
    assert row["status"] == Status.OK, (row["reason"], text[-4000:])
    # every rank joined one job of the world size: rank 0 prints, the others log into LiBai's output folder
    out = Path(re.search(r"train\.output_dir=(\S+)", run.script.read_text()).group(1))
    ranks = {}
    for f in [run.log, *sorted(out.glob("log.txt.rank*"))]:
        for r, w in re.findall(r"Rank of current process: (\d+)\. World size: (\d+)", f.read_text()):
            ranks[int(r)] = int(w)
    assert ranks == {r: world for r in range(world)}, text[-4000:]
    # LiBai trained warm-up + measure iterations, 0-based, every one logged; samples = micro batch x ranks
    lines = _EVENTS.findall(text)
    assert [(int(i), int(n)) for _, i, n, *_ in lines] == [(i, WARMUP + MEASURE) for i in range(WARMUP + MEASURE)]
    assert [int(c) for _, _, _, c, *_ in lines] == [MICRO * world * (i + 1) for i in range(WARMUP + MEASURE)]
    assert all(float(loss) > 0 for *_, loss, _ in lines)
    # collect read those lines: the window's figures are the ones LiBai's own timer gives
    tput, ms = _window(text)
    assert row["published"] == "time" and float(row["window_steps"]) == MEASURE
    assert float(row["throughput"]) == pytest.approx(tput, rel=1e-9)
    assert float(row["latency_ms"]) == pytest.approx(ms, rel=1e-9)
    assert float(row["throughput_speed"]) > 0  # the mean of LiBai's total_throughput over the window
    return text


def test_libai_one_node_two_ranks_under_oneflow_launch(campaign):
    rows, runs = campaign
    _check(rows, runs, "1n2g", 2)
    script = runs["1n2g"].script.read_text()
    assert f"{_py} -m oneflow.distributed.launch --nnodes 1 --nproc_per_node 2" in script
    assert "tools/train_net.py --config-file" in script and "train.dist.device_type=cpu" in script
