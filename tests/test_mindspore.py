"""The mindspore suites: DLPerf's flags in the rendered launch, the data-sink parser on REAL lines of the real
programs (each constant names where its lines come from), DLPerf's published per-repeat values through ``collect``,
and the msrun launch streaming every rank's worker log into the run's log (stand-in msrun, real template)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from test_launchers import _run_script, stub_bin  # noqa: F401  (the stand-in launchers' fixture)

from dlperf_slurm import cli, suites
from dlperf_slurm import parsing as lp
from dlperf_slurm.matrix import loader
from dlperf_slurm.model import cell
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.status import Status

REAL = Path(__file__).parent / "fixtures" / "real"

# ---------------------------------------------------------------------------------------- real lines
# mindspore-ai/models research/cv/resnetv2/README_CN.md, lines 168-173 (Ascend 8P, cifar10, data sink of 195):
# MindSpore 1.x TimeMonitor + LossMonitor. (This paste's per step times were edited by hand: 4733.000 / 24.143 is
# 196.04, not 195: the step count comes from LossMonitor's step, the time from the epoch time, as DLPerf summed it.)
RESNETV2 = """\
epoch: 41 step: 195, loss is 0.17125674
epoch time: 4733.000 ms, per step time: 24.143 ms
epoch: 42 step: 195, loss is 0.0011220031
epoch time: 4735.284 ms, per step time: 24.135 ms
epoch: 43 step: 195, loss is 0.105422504
epoch time: 4737.401 ms, per step time: 24.166 ms
"""
# mindspore-ai/models research/cv/vnet/README_CN.md, lines 323-334: sinks of 10 steps, one device
VNET = """\
epoch: 1 step: 10, loss is 0.8907114
epoch time: 195045.276 ms, per step time: 19504.528 ms
epoch: 2 step: 10, loss is 0.8099437
epoch time: 24754.049 ms, per step time: 2475.405 ms
epoch: 3 step: 10, loss is 0.8360894
epoch time: 24741.982 ms, per step time: 2474.198 ms
epoch: 4 step: 10, loss is 0.8259954
epoch time: 23744.493 ms, per step time: 2374.449 ms
epoch: 5 step: 10, loss is 0.8108934
epoch time: 24054.200 ms, per step time: 2405.420 ms
epoch: 6 step: 10, loss is 0.7308113
epoch time: 23846.928 ms, per step time: 2384.693 ms
"""
# mindspore-ai/models official/cv/RetinaNet/README.md, lines 584-593: MindSpore 2.x TimeMonitor ("Train epoch
# time"), an "Epoch time: ..." line of another callback (no unit: not a TimeMonitor record), lr lines; the paste
# skips epoch 2.
RETINANET = """\
epoch: 1 step: 42, loss is 4.347288131713867
lr:[0.000088]
Train epoch time: 992053.072 ms, per step time: 23620.311 ms
Epoch time: 164034.415, per step time: 358.154
epoch: 3 step: 42, loss is 1.8387094736099243
lr:[0.000495]
Train epoch time: 738396.280 ms, per step time: 17580.864 ms
epoch: 4 step: 42, loss is 1.3805917501449585
lr:[0.000695]
Train epoch time: 742051.709 ms, per step time: 17667.898 ms
"""
# mindspore-ai/models official/cv/ResNet/README.md, lines 541-545: today's model zoo ResNet callback, epoch time
# in seconds
ZOO_RESNET = """\
2023-02-17 14:27:29,405:INFO:epoch: [1/90] loss: 1.082604, epoch time: 40.559 s, per step time: 207.995 ms
2023-02-17 14:27:31,711:INFO:epoch: [2/90] loss: 1.045892, epoch time: 2.413 s, per step time: 12.377 ms
2023-02-17 14:27:34,012:INFO:epoch: [3/90] loss: 0.729006, epoch time: 2.486 s, per step time: 12.750 ms
2023-02-17 14:27:36,326:INFO:epoch: [4/90] loss: 0.766412, epoch time: 2.443 s, per step time: 12.529 ms
2023-02-17 14:27:39,646:INFO:epoch: [5/90] loss: 0.655058, epoch time: 2.851 s, per step time: 14.621 ms
"""
# mindspore-ai/models research/cv/centernet_resnet50_v1/README.md, lines 440-443: the BERT-style LossCallBack
# (global step; outputs are tensors) followed by TimeMonitor, sinks of 458 steps
CENTERNET = """\
epoch: 328, current epoch percent: 1.000, step: 150682, outputs are (Tensor(shape=[], dtype=Float32, value= 1.71943), Tensor(shape=[], dtype=Bool, value= False), Tensor(shape=[], dtype=Float32, value= 1024))
epoch time: 236204.566 ms, per step time: 515.730 ms
epoch: 329, current epoch percent: 1.000, step: 151140, outputs are (Tensor(shape=[], dtype=Float32, value= 1.53505), Tensor(shape=[], dtype=Bool, value= False), Tensor(shape=[], dtype=Float32, value= 1024))
epoch time: 235430.151 ms, per step time: 514.040 ms
"""
# mindspore-ai/models official/nlp/Bert/README.md, lines 659 and 710: run_pretrain.py's LossCallBack, losses in
# scientific notation
BERT = """\
epoch: 0.0, current epoch percent: 0.000, step: 1, outputs are (Tensor(shape=[1], dtype=Float32, [ 1.0856101e+01]), Tensor(shape=[], dtype=Bool, False), Tensor(shape=[], dtype=Float32, 65536))
epoch: 0.0, current epoch percent: 0.001, step: 100, outputs are (Tensor(shape=[1], dtype=Float32, [ 1.08209e+01]), Tensor(shape=[], dtype=Bool, False), Tensor(shape=[], dtype=Float32, 65536))
"""
# tests/fixtures/real/MindSpore/2.10.0/mindspore_msrun_2x1_tiny_cpu.log: the whole output of a real 2-node msrun job
# on the test cluster (Slurm job 346: MindSpore 2.10.0 on CPU, tests/frameworks/mindspore_tiny/train.py, the msrun
# launch of templates/launchers/msrun.sh.j2 by hand): both nodes' msrun banners, worker logs streamed as "[rankN]: ",
# interleaved, MindSpore's own [WARNING] lines, and the end of the job (the second node's msrun failing).
MSRUN_2X1 = REAL / "MindSpore" / "2.10.0" / "mindspore_msrun_2x1_tiny_cpu.log"


def ctx(nodes=1, gpus=1, batch=32, warmup=20, measure=100, **options) -> ParseContext:
    return ParseContext(nodes=nodes, gpus_per_node=gpus, batch_size=batch, warmup_steps=warmup,
                        measure_steps=measure, options=options)


def parse(suite: str, text_or_lines, c: ParseContext):
    lines = lp.iter_text_lines(text_or_lines) if isinstance(text_or_lines, str) else text_or_lines
    return suites.get(f"mindspore/{suite}").parse(lines, c)


# ------------------------------------------------------------------------------------------- parsing


def test_sinks_inside_the_window_are_summed_as_dlperf_did():
    # epoch 41's sink of 195 steps ends at step 41 x 195: the three sinks are steps 7800 -> 8385
    c = ctx(gpus=8, batch=32, warmup=7800, measure=585)
    res = parse("resnet50", RESNETV2, c)
    assert res.status == Status.OK, res.reason
    seconds = 4.733 + 4.735284 + 4.737401
    assert res.throughput == pytest.approx(256 * 585 / seconds, rel=1e-12)
    assert res.latency_ms == pytest.approx(1000 * seconds / 585, rel=1e-12)
    assert res.throughput_speed == pytest.approx(sum(256000 / x for x in (24.143, 24.135, 24.166)) / 3, rel=1e-12)
    assert res.window["start"] == 7800 and res.window["end"] == 8385
    assert res.loss_finite is True and res.steps_seen == 8385


def test_vnet_sinks_of_ten_warmup_skips_the_compile_sink():
    res = parse("resnet50", VNET, ctx(warmup=20, measure=40, batch=2))
    assert res.status == Status.OK, res.reason
    seconds = (24741.982 + 23744.493 + 24054.200 + 23846.928) / 1000
    assert res.throughput == pytest.approx(2 * 40 / seconds, rel=1e-12)
    assert res.window == {"start": 20, "end": 60, "steps": 40, "seconds": pytest.approx(seconds),
                                   "speed_points": 4}
    # the window reaches past the log: INCOMPLETE, no figure
    res = parse("resnet50", VNET, ctx(warmup=20, measure=100, batch=2))
    assert res.status == Status.INCOMPLETE and res.throughput is None and res.steps_seen == 60


def test_mindspore2_train_epoch_time_and_a_gap_in_the_sinks():
    # epochs 1, 3, 4 of 42 steps: the window 84 -> 168 is sinks 3 and 4, contiguous
    res = parse("resnet50", RETINANET, ctx(warmup=84, measure=84, batch=1))
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(84 / ((738396.280 + 742051.709) / 1000), rel=1e-12)
    assert "garbled_lines" not in res.extra  # "Epoch time: 164034.415, per step time: 358.154" is no record
    # a window over the missing sink (42 -> 84) cannot be timed: never sum around a hole
    res = parse("resnet50", RETINANET, ctx(warmup=0, measure=168, batch=1))
    assert res.status == Status.UNMEASURED and res.throughput is None
    assert "do not tile the window 0->168" in res.reason and "[42, 126, 168]" in res.reason


def test_model_zoo_resnet_epoch_time_in_seconds():
    res = parse("resnet50", ZOO_RESNET, ctx(gpus=8, batch=32, warmup=195, measure=780))
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(256 * 780 / (2.413 + 2.486 + 2.443 + 2.851), rel=1e-12)
    assert res.steps_seen == 975


def test_bert_loss_callback_global_steps_and_scientific_notation():
    res = parse("bert-base", CENTERNET, ctx(batch=32, warmup=150224, measure=916))
    assert res.status == Status.OK, res.reason
    assert res.window["start"] == 150224 and res.window["end"] == 151140
    assert res.throughput == pytest.approx(32 * 916 / ((236204.566 + 235430.151) / 1000), rel=1e-12)
    res = parse("bert-base", BERT + CENTERNET, ctx(batch=32, warmup=150224, measure=916))
    assert res.status == Status.OK and res.loss_finite is True
    # the BERT lines alone: losses (1.0856101e+01 read as a number) but no TimeMonitor record to time: the run went
    # past the window (step 100 of 70), so it is not short of it, only untimed
    res = parse("bert-base", BERT, ctx(batch=32, warmup=20, measure=50))
    assert res.status == Status.UNMEASURED and res.loss_finite is True and res.steps_seen == 100
    assert "no TimeMonitor record" in res.reason
    res = parse("bert-base", BERT, ctx(batch=32, warmup=20, measure=100))
    assert res.status == Status.INCOMPLETE and res.steps_seen == 100


def test_msrun_rank_labels_rank0_is_read_among_interleaved_ranks():
    res = parse("resnet50", lp.read_lines(MSRUN_2X1), ctx(nodes=2, batch=4, warmup=10, measure=20))
    # rank 0's sinks 2 and 3 (60.427 + 65.003 ms), not rank 1's (55.693 + 66.140 ms)
    assert res.window["seconds"] == pytest.approx(0.060427 + 0.065003, rel=1e-12)
    assert res.extra["workers_seen"] == 1 and res.extra["ranks_seen"] == 2
    # the job's end: srun cancelled the step after the second node's msrun failed (see the cluster test)
    assert res.status == Status.CANCELLED


def test_unlabelled_interleaved_ranks_are_split_into_workers_and_the_median_taken():
    """DLPerf's mpirun --merge-stderr-to-stdout log: every rank's lines, unlabelled, in the order data-parallel ranks
    print them (lockstep: every rank's sink e before any rank's sink e + 1). The real lines of both ranks above, their
    labels taken off, each rank's sinks interleaved with the other's (rank 1 first)."""
    blocks: dict[str, list[list[str]]] = {"1": [[]], "0": [[]]}
    for line in MSRUN_2X1.read_text().splitlines():
        m = re.match(r"\[rank(\d)\]: (.*)", line)
        if m:
            blocks[m.group(1)][-1].append(m.group(2))
            if "epoch time:" in line:
                blocks[m.group(1)].append([])
    text = "\n".join(line for e in range(3) for rank in "10" for line in blocks[rank][e])
    res = parse("resnet50", text, ctx(nodes=2, batch=4, warmup=10, measure=20))
    assert res.status == Status.OK, res.reason
    assert res.extra["workers_measured"] == 2
    per = sorted(res.extra["per_worker_throughput"])
    assert per == pytest.approx(sorted([8 * 20 / (0.060427 + 0.065003), 8 * 20 / (0.055693 + 0.066140)]))
    assert res.throughput == pytest.approx(sum(per) / 2, rel=1e-12)  # the median of two


def test_srun_labels_and_a_record_cut_by_buffering_are_read():
    lines = []
    for line in VNET.splitlines():
        lines.append(f"0: {line}")
        lines.append(f"1: {line}")
    # a record split over two lines by buffering (rank 0): "...per step time: 2474." + "198 ms"
    i = lines.index("0: epoch time: 24741.982 ms, per step time: 2474.198 ms")
    lines[i:i + 1] = ["0: epoch time: 24741.982 ms, per step time: 2474.", "0: 198 ms"]
    res = parse("resnet50", lines, ctx(nodes=1, gpus=2, batch=2, warmup=20, measure=40))
    assert res.status == Status.OK, res.reason
    assert res.throughput == pytest.approx(4 * 40 / ((24741.982 + 23744.493 + 24054.200 + 23846.928) / 1000))
    assert res.extra["ranks_seen"] == 2 and "garbled_lines" not in res.extra


def test_a_nonfinite_loss_is_nonfinite():
    text = VNET.replace("loss is 0.8259954", "loss is nan")
    res = parse("resnet50", text, ctx(warmup=20, measure=40, batch=2))
    assert res.status == Status.NONFINITE and res.loss_finite is False


def test_real_mindspore_lossmonitor_stop_on_a_nan_loss_is_nonfinite(tmp_path):
    """Real MindSpore (the mindspore venv): the tiny program with a learning rate that makes the loss diverge;
    LossMonitor raises 'loss is NAN or INF, ... terminating training' and the run reads NONFINITE (not a crash)."""
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "frameworks"))
    import venvs

    py, why = venvs.python_for("mindspore")
    if py is None:
        pytest.skip(why)
    prog = Path(__file__).parent / "frameworks" / "mindspore_tiny" / "train.py"
    p = subprocess.run([str(py), str(prog), "--lr", "1e30", "--train_steps", "40", "--data_sink_steps", "2"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "ONEDNN_MAX_CPU_ISA": "AVX2", "HOME": str(tmp_path)})
    assert p.returncode != 0 and "loss is NAN or INF" in p.stderr, p.stdout + p.stderr
    res = parse("resnet50", p.stdout + p.stderr, ctx(warmup=2, measure=20, batch=8, data_sink_steps=2))
    assert res.status == Status.NONFINITE and res.loss_finite is False, (res, p.stdout + p.stderr)


# ------------------------------------------------------------------------------- launch specification


def _load(tmp_path: Path, suite: str, body: str) -> cell.Matrix:
    p = tmp_path / "m.toml"
    p.write_text(f'suite = "mindspore/{suite}"\nname = "m"\n' + textwrap.dedent(body))
    return loader.load(p, site=False)


def _argv(m: cell.Matrix, cell) -> list[str]:
    return m.suite_of(cell).program(cell, m.measure, m.options_for(cell))


def test_dlperf_flags_rn50(tmp_path):
    m = _load(tmp_path, "resnet50", """
        [axes]
        devices = ["1x1", "2x8"]
        batch_size = [128]
        precision = ["fp32", "amp"]
        [measure]
        warmup_steps = 100
        measure_steps = 100
        """)
    one, four = [c for c in m.cells if c.precision == "fp32"], [c for c in m.cells if c.precision == "amp"]
    argv = _argv(m, one[0])
    assert argv[1:] == ["/workspace/resnet/train.py", "--net=resnet50", "--dataset=imagenet2012",
                        "--device_target=GPU", "--data_sink_steps=10", "--train_steps=200",
                        "--dataset_path=/data/imagenet/train", "--batch_size=128", "--dtype=fp32"]
    assert _argv(m, four[1])[-3:] == ["--dtype=fp16", "--run_distribute=True", "--device_num=8"]
    assert [c.launcher for c in m.cells] == ["msrun"] * 4


def test_dlperf_flags_bert_gkf_amp_and_sink_from_the_window(tmp_path):
    m = _load(tmp_path, "bert-base", """
        [axes]
        devices = ["1x8"]
        batch_size = [64]
        precision = ["amp"]
        xla = [true]
        [options]
        data_sink_steps = 0
        [measure]
        warmup_steps = 30
        measure_steps = 120
        """)
    argv = _argv(m, m.cells[0])
    for flag in ("--distribute=true", "--enable_lossscale=true", "--enable_graph_kernel=true", "--dtype=fp16",
                 "--data_sink_steps=30", "--train_steps=150", "--enable_data_sink=true", "--batch_size=64"):
        assert flag in argv, (flag, argv)
    with pytest.raises(Exception, match="data_sink_steps"):
        _load(tmp_path, "bert-base", '[axes]\ndevices = ["1x1"]\nbatch_size = [32]\n[options]\ndata_sink_steps = -1\n')
    m = _load(tmp_path, "resnet50", '[axes]\ndevices = ["1x1"]\nbatch_size = [32]\nxla = [true, false]\n')
    assert [d.reason for d in m.dropped] == ["mindspore/resnet50 has no XLA mode"]


def test_msrun_streams_every_ranks_worker_log_into_the_run_log(tmp_path, stub_bin):  # noqa: F811
    """The real msrun template under a stand-in msrun (2 nodes x 2 workers): every worker's whole log reaches the run
    log labelled [rankN]:, and the suite reads rank 0's figure from it."""
    work = tmp_path / "zoo"
    work.mkdir()
    (work / "train.py").write_text("import os, sys\nsys.stdout.write(open(os.environ['FIXTURE']).read())\n")
    fixture = tmp_path / "vnet.log"
    fixture.write_text(VNET)
    stand_in = tmp_path / "pkgs" / "mindspore"  # the job's import check asks the program's python for mindspore
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("# a stand-in: the launcher and the program are stubs in this test\n")
    m = _load(tmp_path, "resnet50", f"""
        [axes]
        devices = ["2x2"]
        batch_size = [2]
        [options]
        workdir = "{work}"
        [measure]
        repeats = 1
        warmup_steps = 20
        measure_steps = 40
        [environment.env]
        FIXTURE = "{fixture}"
        PYTHONPATH = "{stand_in.parent}"
        [health]
        enabled = false  # stand-in launchers on one machine: the gate's own srun step is tested in test_health.py
        """)
    rc, records, log = _run_script(tmp_path, m, stub_bin, slurm=True)
    assert rc == 0, log
    calls = [r for r in records if r["stub"] == "msrun"]
    assert len(calls) == 2 and {r["master_addr"] for r in calls} == {"node1"}
    assert all(r["log_dir"].endswith(".log.msrun") for r in calls)
    for rank in range(4):  # every line of every worker, labelled once
        got = [line[len(f"[rank{rank}]: "):] for line in log.splitlines() if line.startswith(f"[rank{rank}]: ")]
        assert got == VNET.splitlines(), (rank, log)
    [run] = loader.runs(m, tmp_path / "slurm")
    res = m.suite_of(run.cell).parse(lp.read_lines(run.log), ctx(nodes=2, gpus=2, batch=2, warmup=20, measure=40))
    assert res.status == Status.OK and res.extra["ranks_seen"] == 4 and res.extra["workers_seen"] == 1


# ---------------------------------------------------------------- DLPerf's published values through collect

# DLPerf MindSpore/resnet50v1.5/README.md ("Result"): extract_mindspore_logs_time.py's per-repeat values for
# FP32 bs128 and its table's medians and speedups (window: --warmup_batches=100 --train_batches=200)
RN50_FP32 = {"1n1g": [371.01, 371.31, 369.02, 369.81, 369.0], "1n2g": [710.7, 710.68, 709.28, 710.96, 709.78],
             "1n4g": [1418.08, 1419.13, 1419.97, 1418.66, 1417.93],
             "1n8g": [2768.28, 2762.27, 2778.1, 2788.99, 2773.82],
             "2n8g": [5499.46, 5480.69, 5484.01, 5483.22, 5474.62],
             "4n8g": [10758.88, 10716.94, 10731.78, 10724.0, 10757.37]}
RN50_TABLE = {"1n1g": (369.81, 1.0), "1n2g": (710.68, 1.92), "1n4g": (1418.66, 3.84), "1n8g": (2773.82, 7.50),
              "2n8g": (5483.22, 14.83), "4n8g": (10731.78, 29.02)}
# DLPerf MindSpore/bert/README.md ("Result"): FP32 bs32 without graph kernel fusion (window: 20 -> 120)
BERT_FP32 = {"1n1g": [112.18, 112.12, 112.21, 112.18, 112.22], "1n2g": [174.45, 174.4, 174.52, 174.56, 174.38],
             "1n4g": [352.38, 352.76, 352.93, 352.69, 352.54], "1n8g": [704.85, 704.81, 705.25, 704.37, 704.3],
             "2n8g": [1309.64, 1309.94, 1309.7, 1309.76, 1309.42],
             "4n8g": [2458.83, 2450.83, 2457.8, 2458.03, 2451.44]}
BERT_TABLE = {"1n1g": (112.18, 1.0), "1n2g": (174.45, 1.56), "1n4g": (352.69, 3.14), "1n8g": (704.81, 6.28),
              "2n8g": (1309.7, 11.67), "4n8g": (2457.8, 21.91)}


def _dlperf_log(throughput: float, global_batch: int, steps: int, sink: int = 10) -> str:
    """A run's log in the real programs' line format (MindSpore 1.1 LossMonitor + TimeMonitor, as DLPerf's
    mpirun wrote them), its sinks timed so that the window's throughput is ``throughput``; the first sink also
    holds the graph compile."""
    ms = global_batch * sink / throughput * 1000.0
    out = []
    for e in range(1, steps // sink + 1):
        t = ms * (30 if e == 1 else 1)
        out += [f"epoch: {e} step: {sink}, loss is {7.0 - e * 0.01:.4f}",
                f"epoch time: {t:.3f} ms, per step time: {t / sink:.3f} ms"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("suite, model, batch, warmup, measure, published, table", [
    ("mindspore/resnet50", "rn50", 128, 100, 100, RN50_FP32, RN50_TABLE),
    ("mindspore/bert-base", "bert", 32, 20, 100, BERT_FP32, BERT_TABLE)])
def test_dlperf_published_medians_and_speedups(tmp_path, suite, model, batch, warmup, measure, published, table):
    root = tmp_path / f"bz{batch}"
    for shape, values in published.items():
        n, g = int(shape[0]), int(shape[2])
        (root / shape).mkdir(parents=True)
        for r, thr in enumerate(values, 1):
            (root / shape / f"{model}_b{batch}_fp32_{r}.log").write_text(
                _dlperf_log(thr, n * g * batch, warmup + measure))
    out = tmp_path / "out"
    assert cli.main(["collect", "--from", str(root), "--suite", suite, "--warmup-steps", str(warmup),
                     "--measure-steps", str(measure), "--out", str(out), "--no-plots", "--jobs", "1",
                     "--quiet"]) == 0
    cells = {c["shape"]: c for c in json.loads((out / f"{root.name}.json").read_text())["cells"]}
    assert set(cells) == set(table)
    for shape, (median, speedup) in table.items():
        c = cells[shape]
        assert c["n_ok"] == 5 and c["published"] == "time"
        assert abs(c["median"] - median) <= 0.01, (shape, c["median"], median)
        assert abs(c["speedup"] - speedup) <= 0.01, (shape, c["speedup"], speedup)
