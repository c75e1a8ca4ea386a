"""Real launches of the ``torchtitan/llama3`` suite on the Slurm test cluster: torchtitan 0.3.0's own trainer
(``python -m torchtitan.train --module llama3 --config llama3_debugmodel``) under the suite's rendered torchrun launch
(one agent a node through srun, a c10d rendezvous on n1), FSDP2 over both nodes (2n1g, dp_shard 2), and FSDP2
across the nodes with tensor parallelism inside each (2n2g, dp_shard 2 x tp 2). The job is submitted through the
CLI and ``collect`` reads torchtitan's own metrics lines into the cells' figures.

The CPU shim (tests/frameworks/torchtitan_cpu/sitecustomize.py, on the jobs' PYTHONPATH from this matrix only)
says what it changes for a CPU with gloo; the ``memory:`` figures it makes are the ranks' peak RSS, a stand-in.
The tokenizer is torchtitan's own test asset (tests/fixtures/torchtitan/tokenizer), the data a small generated
``c4_test``-shaped JSON-lines file. Needs the test cluster (tests/slurm/start.sh 2) and the torchtitan venv
(``python tests/frameworks/venvs.py torchtitan``); skipped with the reason otherwise. About 2-4 minutes.
"""

from __future__ import annotations

import json
import random
import re
import sys
from datetime import datetime
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import collect_summary, framework_on_cluster, submit_and_wait  # noqa: E402

from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("torchtitan")
WARMUP, MEASURE = 2, 4

MATRIX = """suite = "torchtitan/llama3"
name = "titan"
[axes]
devices = ["2x1"]
batch_size = [2]
precision = ["bf16"]
seq_len = [128]
[[include]]
devices = ["2x2"]
tp = 2
[[include]]
devices = ["2x1"]
launcher = "srun"
[options]
python = "{python}"
hf_assets_path = "{tokenizer}"
dataset_path = "{data}"
# torchtitan 0.3.0's default spmd_types backend cannot wrap FSDP2 on torch 2.13 (a version mismatch, GPU or not);
# partial_dtensor is one of its own choices
overrides = "--parallelism.spmd-backend partial_dtensor"
[measure]
repeats = 1
warmup_steps = {warmup}
measure_steps = {measure}
[slurm]
time = "00:10:00"
gpu_request = "none"
[environment]
# the venv's torchrun (a launcher forks the interpreter it runs in), as a center's module or container puts it first
setup = ['export PATH="{bindir}:$PATH"']
[environment.env]
OMP_NUM_THREADS = "1"
GLOO_SOCKET_IFNAME = "lo"
PYTHONPATH = "{shim}"
HF_DATASETS_OFFLINE = "1"
"""

_WORDS = ("the of and to in is was for on that with as by at from his her which were are this had not have but their "
          "they one all been more has when who would there its after can into first new two other time most some "
          "these only many over such years city world state during people under between while where system large "
          "known later part since three through made both each high called around long four name music family").split()


def _data(folder: Path) -> Path:
    """A c4_test-shaped data set (JSON lines with a "text" field) of 200 sentences of common words."""
    r = random.Random(0)
    folder.mkdir(parents=True)
    with open(folder / "data.json", "w") as f:
        for i in range(200):
            text = " ".join(r.choice(_WORDS) for _ in range(r.randint(60, 160)))
            f.write(json.dumps({"text": text + ".", "timestamp": "2019-04-25T00:00:00Z", "url": f"u{i}"}) + "\n")
    return folder


_STEP = re.compile(r"^\[rank0\]:\[titan\] (\S+ \S+) - root - INFO - step:\s*(\d+)\s+loss:\s*(\S+).*?tps: ([\d,]+)",
                   re.M)
_MESH = re.compile(r"^\[rank(\d+)\]:\[titan\] .* Building device mesh with parallelism: pp=(\d+), dp_replicate=(\d+), dp_shard=(\d+), cp=(\d+), "
                   r"tp=(\d+), ep=(\d+)", re.M)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    root = tmp_path_factory.mktemp("titan")
    text = MATRIX.format(python=_py, tokenizer=HERE / "fixtures" / "torchtitan" / "tokenizer",
                         data=_data(root / "c4_test"), shim=HERE / "frameworks" / "torchtitan_cpu",
                         warmup=WARMUP, measure=MEASURE, bindir=Path(_py).parent)
    logs, runs = submit_and_wait(root, text, 600)
    return {(f"{r.cell.nodes}n{r.cell.gpus_per_node}g", r.cell.launcher): r for r in runs}, collect_summary(logs,
                                                                                                        "titan")


@pytest.mark.parametrize("shape,mesh,world", [("2n1g", (1, 1, 2, 1, 1, 1), 2), ("2n2g", (1, 1, 2, 1, 2, 1), 4)])
def test_torchtitan_trains_across_both_nodes_and_collect_reads_its_metrics_lines(campaign, shape, mesh, world):
    runs, summary = campaign
    run = runs[shape, "torchrun"]
    text = run.log.read_text()
    assert run.status == Status.OK, text[-4000:]
    assert run.nodes == "n[1-2]", run.nodes
    # torchtitan built the layout the cell asked for on both nodes (each node's local rank 0 shows its lines,
    # labelled with its global rank: 0, and 1 or 2)
    assert {int(m[0]): tuple(int(v) for v in m[1:]) for m in _MESH.findall(text)} == {0: mesh, world // 2: mesh}, \
        text[-4000:]
    dims = re.search(r"^\[rank0\]:.* Successfully created meshes with active dimensions: \[(.*)\]$", text, re.M)
    assert "Applied FSDP to the model" in text and dims and ("'tp'" in dims.group(1)) == (mesh[4] > 1), text[-4000:]
    assert f"global batch size {2 * 2}," in text and "sequence length 128" in text  # local 2 x dp_shard 2
    assert set(re.findall(r"^\[rank(\d+)\]:", text, re.M)) == {"0", str(world // 2)}, text[-4000:]
    steps = [(datetime.strptime(t, "%Y-%m-%d %H:%M:%S,%f"), int(s), float(loss), int(tps.replace(",", "")))
             for t, s, loss, tps in _STEP.findall(text)]
    assert [s for _, s, _, _ in steps] == list(range(1, WARMUP + MEASURE + 1)), text[-4000:]
    assert all(loss > 0 for _, _, loss, _ in steps) and "Training completed" in text
    # the System section names the trainer's version (the job's provenance, read on the nodes)
    (group,) = summary["system"]["node_groups"]
    assert group["libraries"].get("torchtitan") == "0.3.0" and group["nodes"] == ["n1", "n2"], group
    (cell,) = [c for c in summary["cells"] if c["shape"] == shape and c["launcher"] == "torchrun"]
    assert cell["n_ok"] == 1 and cell["unit"] == "tokens/s", cell
    # the published figure: torchtitan's tps (tokens/s per device) over the window, x the world size
    tps = [t for _, s, _, t in steps if s > WARMUP]
    assert cell["median"] == pytest.approx(world * sum(tps) / len(tps)), cell
    # the time flavour: 4 sequences of 128 tokens a step over the stamps of steps WARMUP .. WARMUP + MEASURE
    seconds = (steps[-1][0] - steps[WARMUP - 1][0]).total_seconds()
    assert cell["median_time"] == pytest.approx(MEASURE * 4 * 128 / seconds), (cell, seconds)
    assert cell["latency_ms"] == pytest.approx(1000 * seconds / MEASURE), cell


#: srun's own label (``--label``, the suite's launcher argument under srun): "<task>: " before every line of a task
_SRUN_STEP = re.compile(r"^0: \[titan\] (\S+ \S+) - root - INFO - step:\s*(\d+)\s+loss:\s*(\S+).*?tps: ([\d,]+)", re.M)


def test_torchtitan_under_srun_one_task_per_rank_across_both_nodes(campaign):
    """The suite's srun launch (one task a GPU, the ranks from Slurm's SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS
    through torch's env:// rendezvous on the job's MASTER_ADDR): both tasks on their own node build FSDP2 over the
    two, and collect reads rank 0's lines behind srun's task label."""
    runs, summary = campaign
    run = runs["2n1g", "srun"]
    text = run.log.read_text()
    assert run.status == Status.OK, text[-4000:]
    assert run.nodes == "n[1-2]", run.nodes
    meshes = {int(t): tuple(int(v) for v in m) for t, *m in re.findall(
        r"^(\d+): \[titan\] .* Building device mesh with parallelism: pp=(\d+), dp_replicate=(\d+), "
        r"dp_shard=(\d+), cp=(\d+), tp=(\d+), ep=(\d+)", text, re.M)}
    assert meshes == {0: (1, 1, 2, 1, 1, 1), 1: (1, 1, 2, 1, 1, 1)}, text[-4000:]
    assert "global batch size 4," in text and "Training completed" in text
    tps = [int(t.replace(",", "")) for _, s, _, t in _SRUN_STEP.findall(text) if int(s) > WARMUP]
    assert len(tps) == MEASURE, text[-4000:]
    (cell,) = [c for c in summary["cells"] if c["launcher"] == "srun"]
    assert cell["n_ok"] == 1 and cell["median"] == pytest.approx(2 * sum(tps) / len(tps)), cell
