"""``tensorpack/resnet50``: the parser on real tensorpack 0.11 output (tests/fixtures/real/tensorpack/SOURCE.md),
the launch spec and drops per variable_update, tf-cnn's local_parameter_device, the seed's table (tensorpack/
benchmarks ResNet-MultiGPU's, rebuilt from runs) and the golden scripts of matrices/tensorpack-vs-tfcnn.toml."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.collect import cells as cellsmod
from dlperf_slurm.matrix import loader
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.rows import RunRow
from dlperf_slurm.model.status import Status
from dlperf_slurm.report import studies, writers
from dlperf_slurm.submit import render
from dlperf_slurm.suites.tensorpack import humanized_seconds

ROOT = Path(__file__).resolve().parents[1]
REAL = Path(__file__).parent / "fixtures" / "real" / "tensorpack"
TP011, ISSUE = REAL / "0.11", REAL / "2019-08"
GOLDEN = Path(__file__).parent / "golden"
TP, TF = suites.get("tensorpack/resnet50"), suites.get("tf-cnn/resnet50")
_EPOCH = re.compile(r"Epoch (\d+) \(global_step (\d+)\) finished, time:([\d.]+) seconds?\.")
_TPUT = re.compile(r"Throughput \(samples/sec\): ([\d.]+)")


def _parse(text: str, bs: int, warmup: int, measure: int, gpus: int = 1):
    return TP.parse(lp.iter_text_lines(text), ParseContext(nodes=1, gpus_per_node=gpus, batch_size=bs,
                                                           warmup_steps=warmup, measure_steps=measure))


def _epochs(text: str) -> list[tuple[int, float]]:
    return [(int(s), float(t)) for _, s, t in _EPOCH.findall(text)]


@pytest.mark.parametrize("name, bs", [("tiny_1x1_gpu_b4_spe20.log", 4), ("tiny_1x1_python-queue_b4_spe10.log", 4),
                                      ("upstream_on_cpu_tp_train.excerpt.log", 2)])
def test_real_epoch_lines_first_epoch_is_the_warmup(name, bs):
    text = (TP011 / name).read_text()
    epochs = _epochs(text)
    spe = epochs[0][0]
    res = _parse(text, bs, spe, epochs[-1][0] - spe)
    assert res.status == Status.OK, res.reason
    assert res.extra["steps_per_epoch"] == [spe] and res.extra["epochs_logged"] == len(epochs)
    timed = epochs[1:]  # every epoch after the first
    seconds = sum(t for _, t in timed)
    assert res.throughput == pytest.approx(bs * spe * len(timed) / seconds)
    assert res.latency_ms == pytest.approx(1000 * seconds / (spe * len(timed)))
    tput = [float(v) for v in _TPUT.findall(text)][1:]
    if tput:  # ThroughputTracker's per-epoch figures, over the same epochs: the speed flavour
        assert res.throughput_speed == pytest.approx(sum(tput) / len(tput))
    else:
        assert res.throughput_speed is None
    assert "GPUMemoryTracker" in res.mem_reason or "PeakMemory" in res.mem_reason


def test_issue_1298_minutes_peak_memory_and_throughput():
    """A FasterRCNN log pasted in tensorpack issue #1298: 2 GPUs x 1 image, 500 steps per epoch, epoch 4 only."""
    text = (ISSUE / "issue1298_fasterrcnn_epoch4.excerpt.log").read_text()
    res = _parse(text, 1, 1500, 500, gpus=2)
    assert res.status == Status.OK, res.reason
    seconds = 3 * 60 + 43  # "3 minutes 43 seconds": the span of the epoch's 500 steps
    assert res.throughput == pytest.approx(2 * 500 / seconds) and res.latency_ms == pytest.approx(seconds * 2)
    assert res.throughput_speed == pytest.approx(float(_TPUT.search(text).group(1)))
    # the two flavours agree within ThroughputTracker's own timing (it leaves out the epoch's setup)
    assert res.throughput_speed == pytest.approx(res.throughput, rel=0.01)
    assert res.mem_gpu0_mib == pytest.approx(7201.6e6 / 2**20) == res.mem_peak_mib
    assert res.extra["epochs_logged"] == 1  # "Estimated Time Left: 3 days ..." is no epoch


def test_window_is_whole_epochs():
    text = (TP011 / "tiny_1x1_gpu_b4_spe20.log").read_text()
    epochs = _epochs(text)
    # epochs 2-3 of 4 (an edge on an epoch end)
    res = _parse(text, 4, 20, 40)
    assert res.status == Status.OK and res.window["start"] == 20 and res.window["end"] == 60
    assert res.throughput == pytest.approx(4 * 40 / (epochs[1][1] + epochs[2][1]))
    # a warm-up edge inside epoch 2 moves to its end: 40 of 50 steps is below the 90% coverage
    res = _parse(text, 4, 30, 50)
    assert res.status == Status.UNMEASURED and "window 30->80" in res.reason
    # a window past the last epoch: the log stops before its end
    res = _parse(text, 4, 20, 100)
    assert res.status == Status.INCOMPLETE


def test_cut_lines_are_glued_and_a_truncated_log_is_incomplete():
    text = (TP011 / "tiny_1x1_python-queue_b4_spe10.log").read_text()
    whole = _parse(text, 4, 10, 20)
    cut = text.replace("time:0.00689 second.", "time:0.006\n89 second.").replace(
        "Throughput (samples/sec): 5858.9", "Throughput (samples/sec): 58\n58.9")
    assert cut != text
    res = _parse(cut, 4, 10, 20)
    assert res.status == Status.OK and res.throughput == whole.throughput
    assert res.throughput_speed == whole.throughput_speed and "garbled_lines" not in res.extra
    stop = text.index("Epoch 3 (global_step 30)")
    res = _parse(text[:stop], 4, 10, 20)
    assert res.status == Status.INCOMPLETE and res.throughput is None


@pytest.mark.parametrize("path", sorted(REAL.rglob("*.log")), ids=lambda p: p.name)
def test_block_path_reads_like_the_line_loop(path):
    for ctx in (ParseContext(nodes=1, gpus_per_node=1, batch_size=4, warmup_steps=10, measure_steps=20),
                ParseContext(nodes=1, gpus_per_node=1, batch_size=4, warmup_steps=20, measure_steps=60)):
        assert repr(TP.parse(lp.read_lines(path), ctx)) == repr(TP.parse((x for x in lp.read_lines(path)), ctx))


def test_oom_reads_oom():
    text = (TP011 / "tiny_1x1_gpu_b4_spe20.log").read_text()
    stop = text.index("[1123 12:54:12 @base.py:282] Epoch 3")
    oom = text[:stop] + ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
                         "tensor with shape[64,256,56,56]\n")
    assert _parse(oom, 4, 20, 60).status == Status.OOM


def test_humanize_time_delta_forms():
    # tensorpack.utils.utils.humanize_time_delta's docstring examples
    assert humanized_seconds("0.264 second") == 0.264
    assert humanized_seconds("1 minute 27 seconds") == 87
    assert humanized_seconds("1 hour 1 second") == 3601
    assert humanized_seconds("1 day 9 hours 2 minutes 3 seconds") == 86400 + 9 * 3600 + 123
    assert humanized_seconds("soon") is None


def test_peak_memory_and_steps_per_sec_monitor_lines():
    # GPUMemoryTracker's and a ThroughputTracker without samples_per_step (steps/sec), as monitor.py prints them
    lines = []
    for e in (1, 2, 3):
        lines += [f"[1123 12:54:05 @base.py:282] Epoch {e} (global_step {50 * e}) finished, time:5 seconds.",
                  "[1123 12:54:05 @monitor.py:476] PeakMemory(MB)/gpu:0: 1.05e+04",
                  f"[1123 12:54:05 @monitor.py:476] PeakMemory(MB)/gpu:1: {1.1e4 + e:.5g}",
                  "[1123 12:54:05 @monitor.py:476] Throughput (steps/sec): 10"]
    res = _parse("\n".join(lines) + "\n", 64, 50, 100, gpus=2)
    assert res.status == Status.OK and res.throughput == pytest.approx(128 * 100 / 10)
    assert res.throughput_speed == pytest.approx(10 * 128)
    assert res.mem_gpu0_mib == pytest.approx(1.05e10 / 2**20)
    assert res.mem_peak_mib == pytest.approx((1.1e4 + 3) * 1e6 / 2**20)


# -------------------------------------------------------------------------------------------- launch

def _cell(suite, nodes, gpus, launcher=None, precision="fp32", xla=False, **params):
    return Cell(suite=suite.name, model="resnet50", framework=suite.framework, nodes=nodes, gpus_per_node=gpus,
                batch_size=64, precision=precision, xla=xla, launcher=launcher or suite.launcher,
                params=tuple(sorted(params.items())))


def test_tensorpack_argv_and_drops():
    m = Measure(repeats=1, warmup_steps=50, measure_steps=450)
    cell = _cell(TP, 1, 8, precision="fp16", xla=True, fake_location="python-queue")
    assert TP.drop_reason(cell) is None
    assert TP.program(cell, m, TP.options) == [
        "python3", TP.options["script"], "--fake-location", "python-queue", "--variable-update", "replicated",
        "--batch", "64", "--use-fp16", "--use-xla-compile"]
    assert TP.environment(cell, TP.options) == {"TF_USE_LEGACY_KERAS": "1"}
    assert "tf_config" in TP.drop_reason(_cell(TP, 1, 8, launcher="mpirun"))
    assert "--job ps/worker" in TP.drop_reason(_cell(TP, 2, 8, variable_update="parameter_server"))
    assert "mpirun or horovodrun" in TP.drop_reason(_cell(TP, 2, 8, variable_update="horovod"))
    assert TP.drop_reason(_cell(TP, 2, 8, launcher="horovodrun", variable_update="horovod")) is None
    assert "zmq-serve" in TP.drop_reason(_cell(TP, 1, 1, fake_location="zmq-consume"))
    assert "precision" in TP.drop_reason(_cell(TP, 1, 1, precision="amp"))


def test_tf_cnn_local_parameter_device_and_one_process_per_node():
    m = Measure(repeats=1, warmup_steps=50, measure_steps=450)
    cell = _cell(TF, 1, 8, launcher="tf_config", variable_update="replicated", local_parameter_device="cpu")
    assert TF.drop_reason(cell) is None
    argv = TF.program(cell, m, TF.options)
    assert "--num_gpus=8" in argv and "--local_parameter_device=cpu" in argv and "--variable_update=replicated" in argv
    assert "--local_parameter_device" not in " ".join(TF.program(_cell(TF, 1, 8), m, TF.options))
    assert "tf_config" in TF.drop_reason(_cell(TF, 1, 8, launcher="mpirun", variable_update="replicated"))
    assert "--ps_hosts" in TF.drop_reason(_cell(TF, 2, 8, launcher="tf_config", variable_update="replicated"))
    assert "not under tf_config" in TF.drop_reason(_cell(TF, 1, 8, launcher="tf_config"))
    assert TF.drop_reason(_cell(TF, 2, 8)) is None  # horovod under mpirun, as before
    # the axis at its default is left out of the id: existing tf-cnn cells keep theirs
    assert _cell(TF, 1, 8).id == "resnet50.tf-cnn.1x8.b64.fp32.xla0"


# ---------------------------------------------------------------------------------- the seed's table

def _row(cls, **kw):
    base = {f.name: None for f in dataclasses.fields(cls)}
    base.update(campaign="tp", launcher="", variant="", extra={}, provenance={}, flags=[], statuses={}, reason="",
                mem_reason="", unit="img/s", published="time", tiny=False, xla=False, precision="fp32",
                garbled_lines=0, steps_seen=500, log="", parse_seconds=0.0, hosts="", model="resnet50")
    base.update(kw)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in base.items() if k in names})


def _readme_tables() -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    update = None
    for line in (REAL / "resnet_multigpu_readme_sep2017.md").read_text().splitlines():
        m = re.match(r"`variable-update=(\w+)`:", line)
        if m:
            update = m.group(1)
            out[update] = []
        elif update and re.match(r"\| \d", line):
            out[update].append([x.strip() for x in line.strip().strip("|").split("|")])
    return out


def test_seed_table_rebuilt_from_runs():
    published = _readme_tables()
    assert sorted(published) == ["parameter_server", "replicated"]
    runs = []
    for update, rows in published.items():
        for gpus, tp, tf in rows:
            g = int(gpus)
            values = dict(zip(("gpu", "cpu", "python-queue"), (float(x) for x in tp.split("/"))))
            values["tf_cnn"] = float(tf)
            for where, v in values.items():
                if where == "tf_cnn":
                    suite, fw, variant = "tf-cnn/resnet50", "tf-cnn", \
                        f"local_parameter_device=cpu, variable_update={update}"
                else:
                    suite, fw = "tensorpack/resnet50", "tensorpack"
                    variant = ", ".join(p for p in (f"fake_location={where}" if where != "gpu" else "",
                                                    f"variable_update={update}" if update != "replicated" else "")
                                        if p)
                cid = f"{fw}.{g}.{where}.{update}"
                for k, d in enumerate((-1.0, 0.0, 2.0)):
                    runs.append(_row(RunRow, suite=suite, framework=fw, cell_id=cid, shape=f"1n{g}g", nodes=1,
                                     gpus_per_node=g, devices=g, batch_size=64, global_batch=64 * g,
                                     variant=variant, repeat=k, run=f"{cid}.r{k}", status=Status.OK,
                                     throughput=v + d, latency_ms=64e3 * g / (v + d)))
    cells = cellsmod.cells_of(runs)
    tables = studies.tensorpack_vs_tfcnn(cells)
    assert [t for t, _, _ in tables] == [
        "variable_update parameter_server · fp32 · XLA off · batch 64/GPU",
        "variable_update replicated · fp32 · XLA off · batch 64/GPU"]
    for title, headers, rows in tables:
        assert headers == ["GPUs", "tensorpack gpu (img/s)", "tensorpack cpu (img/s)",
                           "tensorpack python-queue (img/s)", "tf_cnn (img/s)"]
        theirs = published[title.split()[1]]
        assert [r[0] for r in rows] == [r[0] for r in theirs]
        for mine, (_, tp, tf) in zip(rows, theirs):
            assert [float(x) for x in mine[1:]] == pytest.approx([float(x) for x in tp.split("/")] + [float(tf)])

    class Result:  # what report.markdown reads
        name, collections = "tp", []

    Result.cells, Result.runs = cells, runs
    text = writers.markdown(Result)
    assert "## Tensorpack vs tf_cnn_benchmarks" in text and "| tensorpack gpu (img/s)" in text
    assert studies.markdown([c for c in cells if c.suite != "tf-cnn/resnet50"]) == []


# ------------------------------------------------------------------------------------------- goldens

_GOLDEN_CELLS = {
    "tensorpack_1x8_replicated_python-queue": "resnet50.tensorpack.1x8.b64.fp32.xla0.fake_location-python-queue",
    "tensorpack_1x8_horovod_mpirun": "resnet50.tensorpack.1x8.b64.fp32.xla0.launcher-mpirun.variable_update-horovod",
    "tf_cnn_1x8_replicated_lpd_cpu_tf_config":
        "resnet50.tf-cnn.1x8.b64.fp32.xla0.launcher-tf_config.local_parameter_device-cpu.variable_update-replicated",
}


def test_matrix_plans_the_seed_campaign():
    m = loader.load(ROOT / "matrices" / "tensorpack-vs-tfcnn.toml", site=False)
    ids = {c.id for c in m.cells}
    assert set(_GOLDEN_CELLS.values()) <= ids
    tp = [c for c in m.cells if c.suite == "tensorpack/resnet50"]
    tf = [c for c in m.cells if c.suite == "tf-cnn/resnet50"]
    assert sorted({c.devices for c in tp}) == sorted({c.devices for c in tf}) == [1, 2, 4, 8]
    assert {c.param("fake_location", "gpu") for c in tp} == {"gpu", "cpu", "python-queue"}
    assert not m.dropped


@pytest.mark.parametrize("name", sorted(_GOLDEN_CELLS))
def test_golden_scripts(name, golden):
    m = loader.load(ROOT / "matrices" / "tensorpack-vs-tfcnn.toml", site=False)
    run = next(r for r in loader.runs(m, Path("logs") / m.name) if r.cell.id == _GOLDEN_CELLS[name])
    text = render.render_run(m, run)
    golden(f"{name}", text)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
