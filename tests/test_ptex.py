"""The pytorch-examples/resnet50 suite: the parser on real ProgressMeter lines of pytorch/examples imagenet/main.py
(each fixture says where it comes from), the launch spec per shape, and collect's medians and speedups against
DLPerf's published per-repeat figures (DLPerf PyTorch/resnet50v1.5/README.md)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from dlperf_slurm import cli, suites
from dlperf_slurm import parsing as lp
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.status import Status

FIX = Path(__file__).parent / "fixtures" / "real" / "pytorch-examples" / "49ec0bd"
RN50 = suites.get("pytorch-examples/resnet50")
# DLPerf's own logs, as its PyTorch/resnet50v1.5/README.md pastes them ("两机测试" and "多机测试"; copied to
# /work/shared/fixtures/real-log-excerpts/): pytorch/examples 49ec0bd main.py, display(i): 0-based indices.
DLPERF_2N8G = (FIX / "pytorch_examples_rn50_2n8g.excerpt.log").read_text()
DLPERF_4N8G = (FIX / "pytorch_examples_rn50_4n8g_interleaved_ranks.excerpt.log").read_text()
# pytorch/examples PR #1032 (https://github.com/pytorch/examples/pull/1032), "Output before this change": two ranks
# of `main.py --multiprocessing-distributed --world-size 1 --rank 0` print the last step (display(i + 1): 1-based),
# then validation's Test: lines (no training steps).
PR1032 = """\
Epoch: [0][626/626]     Time  3.895 ( 3.075)    Data  2.053 ( 2.954)    Loss 4.4438e+00 (5.4188e+00)    Acc@1  13.70 (  7.03)   Acc@5  39.04 ( 18.14)
Epoch: [0][626/626]     Time  3.892 ( 3.075)    Data  2.063 ( 1.639)    Loss 4.3967e+00 (5.4165e+00)    Acc@1  10.27 (  7.05)   Acc@5  34.93 ( 18.32)
Test: [ 1/25]   Time  6.812 ( 6.812)    Loss 4.5951e+00 (4.5951e+00)    Acc@1  18.75 ( 18.75)   Acc@5  33.98 ( 33.98)
Test: [ 1/25]   Time  7.230 ( 7.230)    Loss 4.3132e+00 (4.3132e+00)    Acc@1  18.36 ( 18.36)   Acc@5  38.28 ( 38.28)
"""


def _parse(text: str, nodes=1, gpus=1, bs=128, warmup=26, measure=100):
    return RN50.parse(lp.iter_text_lines(text), ParseContext(nodes=nodes, gpus_per_node=gpus, batch_size=bs,
                                                             warmup_steps=warmup, measure_steps=measure))


def _times(text: str) -> dict[int, list[float]]:
    """index -> the Time values printed for it (every rank), read straight from the text."""
    out: dict[int, list[float]] = {}
    for i, t in re.findall(r"Epoch: \[0\]\[\s*(\d+)/\s*\d+\]\s+Time\s+(\S+)", text):
        out.setdefault(int(i), []).append(float(t))
    return out


# ------------------------------------------------------------------------------------------ real lines

def test_dlperf_two_node_log_time_column_and_zero_based_steps():
    res = _parse(DLPERF_2N8G, nodes=2, gpus=8, warmup=2, measure=8)
    assert res.status == Status.OK, res.reason
    assert res.extra["indices"] == "0-based (display(i))"
    t = _times(DLPERF_2N8G)  # index i ends step i + 1: steps 3..10 are indices 2..9
    window = sum(t[i][0] for i in range(2, 10))
    assert res.window == {"start": 2, "end": 10, "steps": 8, "seconds": pytest.approx(window),
                                   "speed_points": 8}
    assert res.throughput == pytest.approx(2 * 8 * 128 * 8 / window)  # global batch: 2 nodes x 8 GPUs x 128
    assert res.throughput_speed == pytest.approx(sum(2048 / t[i][0] for i in range(2, 10)) / 8)


def test_dlperf_four_node_log_two_ranks_interleaved_mean_per_step():
    """One rank's tail (indices 5..13) then another's head (0..5): steps 1..6 printed by one or two ranks."""
    res = _parse(DLPERF_4N8G, nodes=4, gpus=8, warmup=3, measure=8)
    assert res.status == Status.OK, res.reason
    t = _times(DLPERF_4N8G)
    assert len(t[5]) == 2 and res.extra["ranks_per_step_max"] == 2 and res.extra["ranks_per_step_min"] == 1
    mean = {i: sum(v) / len(v) for i, v in t.items()}
    window = sum(mean[i] for i in range(3, 11))  # steps 4..11
    assert res.window["seconds"] == pytest.approx(window)
    assert res.throughput == pytest.approx(4096 * 8 / window)


@pytest.mark.parametrize("label", ["0: ", "[1,0]<stdout>:", "   1: "])
def test_rank_labels_every_label_is_read(label):
    """The same real lines behind srun --label's and mpirun's prefixes: every rank's lines are read (one node's
    ranks share a label), so the figures do not change."""
    plain = _parse(DLPERF_2N8G, nodes=2, gpus=8, warmup=2, measure=8)
    labelled = "".join(label + line + "\n" for line in DLPERF_2N8G.splitlines())
    res = _parse(labelled, nodes=2, gpus=8, warmup=2, measure=8)
    assert res.status == Status.OK and res.throughput == pytest.approx(plain.throughput)
    assert res.extra["ranks_seen"] == 1


def test_two_labels_interleaved_line_by_line():
    """DLPerf's 4-node excerpt split between two labels, alternating lines as srun interleaves two nodes."""
    lines = [l for l in DLPERF_4N8G.splitlines() if l]
    text = "".join(f"{k % 2}: {l}\n" for k, l in enumerate(lines))
    res = _parse(text, nodes=4, gpus=8, warmup=3, measure=8)
    assert res.status == Status.OK and res.extra["ranks_seen"] == 2
    assert res.throughput == pytest.approx(_parse(DLPERF_4N8G, nodes=4, gpus=8, warmup=3, measure=8).throughput)


def test_pr1032_one_based_two_ranks_and_test_lines_ignored():
    res = _parse(PR1032, nodes=1, gpus=2, bs=256, warmup=0, measure=626)
    assert res.extra["indices"] == "1-based (display(i + 1))" and res.steps_seen == 626
    assert res.extra["ranks_per_step_max"] == 2
    assert res.status == Status.OK  # the one line times the window: 626 steps at the mean of both ranks' Time
    assert res.throughput == pytest.approx(512 / ((3.895 + 3.892) / 2))


def test_line_cut_by_buffering_is_glued():
    line = DLPERF_2N8G.splitlines()[-1]
    at = line.index("Loss")
    whole = _parse(line + "\n", nodes=2, gpus=8, warmup=0, measure=16)
    cut = _parse(line[:at] + "\n" + line[at:] + "\n", nodes=2, gpus=8, warmup=0, measure=16)
    assert whole.throughput == pytest.approx(cut.throughput) and "garbled_lines" not in cut.extra


def test_stops_before_the_window_end_is_incomplete():
    res = _parse(DLPERF_2N8G, nodes=2, gpus=8)  # 16 steps of a 26 + 100 window
    assert res.status == Status.INCOMPLETE and res.throughput is None


# ------------------------------------------------------------------------------------------ launch spec

@pytest.mark.parametrize("nodes,gpus", [(1, 1), (1, 4), (1, 8), (2, 8), (4, 8)])
def test_dlperf_flags_per_shape(nodes, gpus):
    cell = Cell(suite=RN50.name, model="resnet50", framework="pytorch-examples", nodes=nodes, gpus_per_node=gpus,
                batch_size=128, precision="fp32", xla=False, launcher="mp_spawn")
    argv = RN50.program(cell, Measure(repeats=1, warmup_steps=26, measure_steps=100), RN50.options)
    node_batch = 128 * gpus  # DLPerf's total_bz: the node's batch (main.py divides it by its GPUs)
    assert argv == ["python3", "/workspace/examples/imagenet/main.py", "--arch", "resnet50", "--epochs", "1",
                    "--batch-size", str(node_batch), "--lr", f"{node_batch / 1000:g}", "--workers", "8",
                    "--momentum", "0.125", "--print-freq", "1", "--multiprocessing-distributed",
                    "--dist-backend", "nccl", "/data/imagenet"]
    assert RN50.drop_reason(cell) is None
    # FP32 only: DLPerf's README says AMP "No", and main.py has no AMP flag
    assert "no precision 'amp'" in RN50.drop_reason(dataclasses.replace(cell, precision="amp"))


def test_dummy_option_replaces_the_data_dir():
    cell = Cell(suite=RN50.name, model="resnet50", framework="pytorch-examples", nodes=1, gpus_per_node=1,
                batch_size=128, precision="fp32", xla=False, launcher="mp_spawn")
    argv = RN50.program(cell, Measure(), {**RN50.options, "dummy": True})
    assert argv[-1] == "--dummy" and "/data/imagenet" not in argv
    assert RN50.option_error("dist_backend", "mpi") and RN50.option_error("dist_backend", "gloo") is None


# --------------------------------------------------------------------- DLPerf's published table, rebuilt

def _log(g: int, gb: int, target: float) -> str:
    """Lines in main.py's ProgressMeter format (pytorch/examples 49ec0bd, display(i), as in DLPerf's pasted logs),
    G ranks of node 0 per step (what DLPerf's log held: the tee on the first node), 130 steps; the Time values
    (3 decimals, as main.py prints them) of the window's steps 27..126 sum, per step averaged over the ranks, to
    global batch x 100 / ``target``."""
    k = round(g * gb * 100 / target * 1000)  # thousandths over the window's 100 x G lines
    base, extra = divmod(k, 100 * g)
    lines, n = [], 0
    for i in range(130):
        for r in range(g):
            if 26 <= i < 126:
                t = (base + (1 if n < extra else 0)) / 1000
                n += 1
            else:
                t = 0.9
            lines.append(f"Epoch: [0][{i:4d}/5005]\tTime {t:6.3f} ({t:6.3f})\tData  0.106 ( 0.075)\t"
                         f"Loss 6.9828e+00 (6.9828e+00)\tAcc@1   0.78 (  0.78)\tAcc@5   1.56 (  1.56)")
    return "\n".join(lines) + "\n"


# DLPerf PyTorch/resnet50v1.5/README.md, "FP32 & W/O XLA & Use DALI", batch 128, worker=8: the per-repeat figures
# extract_pytorch_logs_time.py printed (README "数据处理"), then the published median and speedup per shape.
RUNS = {"1n1g": {2: 353.62, 4: 354.44, 3: 354.02, 5: 354.47, 1: 354.61},
        "1n4g": {2: 1367.67, 4: 1336.61, 3: 1367.89, 5: 1340.95, 1: 1369.97},
        "1n8g": {2: 2277.07, 4: 2311.41, 3: 2244.24, 5: 2243.7, 1: 2185.75},
        "2n8g": {2: 4484.64, 4: 4401.46, 3: 4347.27, 5: 4372.33, 1: 4038.81},
        "4n8g": {42: 8940.3, 2: 8468.23, 4: 8781.78, 3: 8648.47, 52: 8851.62, 32: 8654.31, 5: 9046.34, 12: 8973.6,
                 22: 8515.95, 1: 8853.15}}
PUBLISHED = {"1n1g": (354.44, 1.00), "1n4g": (1367.67, 3.86), "1n8g": (2244.24, 6.33), "2n8g": (4372.33, 12.34),
             "4n8g": (8816.7, 24.88)}


def test_collect_gives_dlperfs_published_medians_and_speedups(tmp_path):
    root = tmp_path / "physical_j8_dali"
    for shape, runs in RUNS.items():
        n, g = (int(x) for x in re.match(r"(\d+)n(\d+)g", shape).groups())
        (root / shape).mkdir(parents=True)
        for i, v in runs.items():
            (root / shape / f"r50_b128_fp32_{i}.log").write_text(_log(g, n * g * 128, v))
    out = tmp_path / "out"
    assert cli.main(["collect", "--from", str(root), "--suite", RN50.name, "--out", str(out), "--no-plots",
                     "--quiet", "--jobs", "1", "--warmup-steps", "26", "--measure-steps", "100"]) == 0
    cells = {c["shape"]: c for c in json.loads((out / "physical_j8_dali.json").read_text())["cells"]}
    for shape, (median, speedup) in PUBLISHED.items():
        c = cells[shape]
        assert c["n_ok"] == len(RUNS[shape]) and c["published"] == "time", c
        assert c["median"] == pytest.approx(median, abs=0.01), (shape, c["median"])
        assert c["speedup"] == pytest.approx(speedup, abs=0.01), (shape, c["speedup"])


# ------------------------------------------------------------------ torchvision references/classification/train.py

SEW = (Path(__file__).parent / "fixtures" / "real" / "torchvision-references" / "sew-resnet-2021"
       / "sew_resnet_imagenet_issue10.excerpt.log").read_text()


def test_torchvision_metric_logger_lines_are_a_generation_of_this_reader():
    """torchvision's MetricLogger line (rank 0 only, 0-based [i/N], `time` the mean iteration time, `img/s` one
    process's figure, `max mem` its allocator peak): index i ends step i + 1; the speed flavour is img/s x the job's
    processes; the time flavour sums `time` over the window's steps; `max mem` is the allocator memory."""
    rows = {int(i): (float(ips), float(t)) for i, ips, t in
            re.findall(r"\[\s*(\d+)/5005\].*?img/s: (\S+) .*?time: (\S+)  data", SEW)}
    assert sorted(rows)[:2] == [10, 11] and len(rows) == 21
    res = _parse(SEW, nodes=1, gpus=8, bs=32, warmup=42, measure=5)
    assert res.status == Status.OK, res.reason
    assert res.extra["format"] == "torchvision references MetricLogger"
    assert res.throughput_speed == pytest.approx(sum(rows[i][0] for i in range(42, 47)) / 5 * 8)
    assert res.throughput == pytest.approx(256 * 5 / sum(rows[i][1] for i in range(42, 47)))
    assert res.mem_allocator_mib == 3524 and res.mem_peak_mib is None
    # the default window runs past the 79 steps the excerpt holds: INCOMPLETE, not a figure
    res = _parse(SEW, nodes=1, gpus=8, bs=32, warmup=20, measure=100)
    assert res.status == Status.INCOMPLETE and res.steps_seen == 79


@pytest.mark.parametrize("at", ["time: 2.3", "max mem: 3"])
def test_torchvision_line_cut_by_buffering_is_glued(at):
    """Step 43's line cut inside its time, or its max mem, and finished on the next line: read as one line."""
    lines = SEW.splitlines()
    cut = lines[8].index(at) + len(at)
    text = "\n".join(lines[:8] + [lines[8][:cut], lines[8][cut:]] + lines[9:]) + "\n"
    plain = _parse(SEW, nodes=1, gpus=8, bs=32, warmup=42, measure=5)
    res = _parse(text, nodes=1, gpus=8, bs=32, warmup=42, measure=5)
    assert res.status == Status.OK and res.throughput == pytest.approx(plain.throughput)
    assert res.window == plain.window
