"""A real 2-node launch of the ``deepspeed/gpt`` suite on the Slurm test cluster: the suite's rendered launch (DeepSpeed's
own runner, ``python -m deepspeed.launcher.runner --no_ssh --node_rank $SLURM_NODEID`` on n1 and n2 with a hostfile
built from the allocation) with its entry script swapped for a tiny genuine DeepSpeed program
(tests/frameworks/deepspeed/pretrain_gpt.py: ``deepspeed.initialize`` on a small GPT-like model, ZeRO stage and batch
sizes from the DeepSpeed config the suite writes into the run's folder). The job is submitted through the CLI and
``collect`` reads the DeepSpeed engine's own ``RunningAvgSamplesPerSec=`` lines into the cell's figure.

Needs the test cluster (tests/slurm/start.sh 2) and the deepspeed venv (``python tests/frameworks/venvs.py
deepspeed``); skipped with the reason otherwise. The first run JIT-builds DeepSpeed's shm comm op (25-100 s) into
``~/.cache/dlperf_slurm/torch_extensions``; later runs reuse it. About 1-3 minutes.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "slurm"))
from testlib import cli, framework_on_cluster, wait_campaign  # noqa: E402

from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402

_py, pytestmark = framework_on_cluster("deepspeed")

MATRIX = """suite = "deepspeed/gpt"
name = "deepspeed-2x1"
[axes]
devices = ["2x1"]
batch_size = [2]
precision = ["fp32"]
model_size = ["2x64x4"]
seq_length = [32]
zero_stage = [2]
activation_checkpointing = ["none"]
[options]
python = "{python}"
workdir = "{workdir}"
script = "pretrain_gpt.py"
data_path = ""
[measure]
repeats = 1
warmup_steps = 3
measure_steps = 6
[slurm]
time = "00:08:00"
gpu_request = "none"
[environment.env]
OMP_NUM_THREADS = "1"
GLOO_SOCKET_IFNAME = "lo"
TORCH_EXTENSIONS_DIR = "{extensions}"
"""

_TIMER = re.compile(r"^0: \[(\S+ \S+)\] \[INFO\] \[timer\.py:\d+:stop\] epoch=0/micro_step=\d+/global_step=(\d+), "
                    r"RunningAvgSamplesPerSec=", re.M)


def test_deepspeed_gpt_2x1_spans_n1_and_n2_and_collect_reads_the_engine_lines(tmp_path):
    mx = tmp_path / "deepspeed.toml"
    mx.write_text(MATRIX.format(python=_py, workdir=HERE / "frameworks" / "deepspeed",
                                extensions=Path.home() / ".cache" / "dlperf_slurm" / "torch_extensions"))
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site")
    assert p.returncode == 0, p.stdout + p.stderr
    cdir = logs / "deepspeed-2x1"
    wait_campaign(cdir, 480)
    (run,) = manifest.load_manifest(cdir)
    text = run.log.read_text()
    assert run.status == Status.OK, text[-4000:]
    assert run.nodes == "n[1-2]"
    # every rank joined one job: one DeepSpeed runner per node (srun labels its node's lines), world size 2
    joined = {int(label): (int(r), int(w), int(s)) for label, r, w, h, s in re.findall(
        r"^(\d+): dlperf-test: rank (\d+) of (\d+) on (\S+): all_reduce\(1\) = (\d+)$", text, re.M)}
    assert joined == {0: (0, 2, 2), 1: (1, 2, 2)}, text[-4000:]
    assert Path(f"{run.log}.hostfile").read_text() == "n1 slots=1\nn2 slots=1\n"
    # the suite's DeepSpeed config reached the engine: ZeRO 2, global batch 2 x 2 GPUs, its throughput lines on
    assert re.search(r"zero_optimization_stage \.+ 2$", text, re.M) and re.search(r"train_batch_size \.+ 4$", text, re.M)
    timer = [(datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f"), int(g)) for s, g in _TIMER.findall(text)]
    assert [g for _, g in timer] == list(range(3, 10)), text[-4000:]  # the engine times steps from its 3rd
    out = tmp_path / "summaries"
    p = cli("--logs", str(logs), "collect", "deepspeed-2x1", "--no-plots", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    (cell,) = json.loads((out / "deepspeed-2x1.json").read_text())["cells"]
    assert cell["shape"] == "2n1g" and cell["n_ok"] == 1, cell
    # the time flavour over the engine's stamps: steps 3 -> 9, global batch 4
    seconds = (timer[-1][0] - timer[0][0]).total_seconds()  # exact to the stamps' millisecond
    assert abs(cell["median"] - 4 * 6 / seconds) < 1e-6 * cell["median"], (cell, seconds)
    assert abs(cell["latency_ms"] - 1000 * seconds / 6) < 1e-6 * cell["latency_ms"], cell
    # TFLOP/s per GPU from the model's size in the launch command (2 layers x 64, seq 32): no GPU, so no MFU
    run_extra = json.loads((out / "deepspeed-2x1.json").read_text())["runs"][0]["extra"]
    assert run_extra["flops_per_sample"] > 0 and cell["tflops_per_gpu"] == \
        pytest.approx(cell["median"] * run_extra["flops_per_sample"] / 2 / 1e12) and cell["mfu"] is None
    assert cell["median_speed"] > 0  # the mean of the engine's CurrSamplesPerSec over steps 4..9
