"""The InsightFace suites (oneflow/insightface, mxnet/insightface): the parser on real lines (sources in
tests/fixtures/real/insightface/SOURCES.md) with validation interleaved, the launch specs, pyconfig (the config
changes DLPerf made with sed), golden scripts, and DLPerf's "Max num_classes" table kept as a documented fixture."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.matrix import loader
from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.model.status import Status
from dlperf_slurm.submit import render
from dlperf_slurm.workloads import pyconfig

ROOT = Path(__file__).resolve().parent.parent
REAL = Path(__file__).parent / "fixtures" / "real" / "insightface"  # the stand-in's log and the report
LOGS = ("arcface_mxnet_issue807.excerpt.log", "partial_fc_mxnet_dlperf_pr106.excerpt.log",
        "arcface_torch_callback_iccv21_tutorial.excerpt.log", "arcface_mxnet_dmlc_2x1_tiny_cpu_srun_label.log",
        "oneflow_face_node_ips_2x1_tiny_cpu_srun_label.log")


def _real(name: str) -> Path:
    """A log by its file name: in the corpus (tests/fixtures/real/<program>/<version>/) or beside the report."""
    return next(REAL.parent.rglob(name))

OF, MX = suites.get("oneflow/insightface"), suites.get("mxnet/insightface")


def _parse(suite, path_or_text, ctx: ParseContext):
    src = lp.read_lines(path_or_text) if isinstance(path_or_text, Path) else lp.iter_text_lines(path_or_text)
    return suite.parse(src, ctx)


# ------------------------------------------------------------------------------------------ real lines

def test_arcface_mxnet_validation_interval_left_out():
    path = _real("arcface_mxnet_issue807.excerpt.log")
    text = path.read_text()
    recs = [(int(b), float(v)) for b, v in re.findall(r"Batch \[\d+-(\d+)\]\tSpeed: ([\d.]+)", text)]
    # the interval that holds the verification (ending at 32500) printed a speed 8x below its neighbours
    slow = dict(recs)[32500]
    assert slow * 8 < min(v for b, v in recs if b != 32500)
    bs = 8  # any batch: the clock is samples / speed, so the figures scale with it
    res = _parse(MX, path, ParseContext(nodes=1, gpus_per_node=1, batch_size=bs, warmup_steps=32420, measure_steps=120))
    assert res.status == Status.OK, res.reason
    assert res.extra["validations"] == 1 and res.extra["dropped_steps"] == 20
    assert res.extra["dropped_seconds"] == pytest.approx(20 * bs / slow)
    clean = [v for b, v in recs if b > 32420 and b != 32500]
    assert len(clean) == 6 and res.window["steps"] == 120
    assert res.throughput_speed == pytest.approx(sum(clean) / len(clean))  # the slow speed is not averaged
    assert res.throughput == pytest.approx(120 * bs / sum(20 * bs / v for v in clean))
    assert res.loss_finite is True


def test_arcface_mxnet_speed_is_per_node():
    path = _real("arcface_mxnet_issue807.excerpt.log")
    one = _parse(MX, path, ParseContext(nodes=1, gpus_per_node=1, batch_size=8, warmup_steps=32420, measure_steps=120))
    two = _parse(MX, path, ParseContext(nodes=2, gpus_per_node=1, batch_size=8, warmup_steps=32420, measure_steps=120))
    assert two.throughput_speed == pytest.approx(2 * one.throughput_speed)  # DLPerf: Speed x node_num


def test_partial_fc_total_is_global_and_agrees_with_the_stamps():
    path = _real("partial_fc_mxnet_dlperf_pr106.excerpt.log")
    text = path.read_text()
    res = _parse(MX, path, ParseContext(nodes=1, gpus_per_node=8, batch_size=64, warmup_steps=460, measure_steps=220))
    assert res.status == Status.OK, res.reason
    totals = [float(x) for x in re.findall(r"Total:([\d.]+) it/sec", text)][1:]
    assert res.throughput_speed == pytest.approx(sum(totals) / len(totals))
    # the clock (each interval's samples / its Total) against the lines' own millisecond stamps: within 0.1 %
    stamps = [datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f") for s in re.findall(r"0:(\S+ \S+)-Iter", text)]
    assert res.window["seconds"] == pytest.approx((stamps[-1] - stamps[0]).total_seconds(), rel=1e-3)


def test_oneflow_face_2021_speed_lines():
    path = _real("arcface_torch_callback_iccv21_tutorial.excerpt.log")
    res = _parse(OF, path, ParseContext(nodes=1, gpus_per_node=4, batch_size=128, warmup_steps=100, measure_steps=200,
                                        precision="amp"))
    assert res.status == Status.OK, res.reason
    speeds = [float(x) for x in re.findall(r"Speed ([\d.]+) samples/sec", path.read_text())][1:]
    assert res.throughput_speed == pytest.approx(sum(speeds) / len(speeds))
    assert res.extra["formats"] == ["oneflow_face-2021"]


def _legacy(iters: int, validate_at: int | None = None) -> str:
    """Lines in the format of oneflow_face's insightface_train.py, built from its format string
    (callback_util.TrainMetric: "{}: iter {}, loss {}, throughput: {:.3f}", step from 0): no real log of it was
    found (SOURCES.md). Validation output as validation_util / insightface_val print it."""
    out = []
    for step in range(iters):
        if validate_at is not None and step == validate_at:
            out += ["Validation on [lfw]:", "validation: time: 12.345", "[lfw][%d]Accuracy-Flip: 0.99117+-0.00400" % step]
        out.append("train: iter {}, loss {}, throughput: {:.3f}".format(step, 16.5 - step / 100, 2000.0 + step % 3))
    return "\n".join(out) + "\n"


def test_oneflow_face_legacy_lines_and_a_validation():
    res = _parse(OF, _legacy(150), ParseContext(nodes=1, gpus_per_node=8, batch_size=64, warmup_steps=20,
                                                measure_steps=100))
    assert res.status == Status.OK and res.throughput_speed == pytest.approx(2001.0, abs=0.01)
    res = _parse(OF, _legacy(150, validate_at=60), ParseContext(nodes=1, gpus_per_node=8, batch_size=64,
                                                                warmup_steps=20, measure_steps=100))
    assert res.status == Status.OK and res.extra["validations"] == 1 and res.extra["dropped_steps"] == 1


def test_a_log_that_stops_early_is_incomplete_and_oom_reads_oom():
    res = _parse(OF, _legacy(60), ParseContext(nodes=1, gpus_per_node=8, batch_size=64, warmup_steps=20,
                                               measure_steps=100))
    assert res.status == Status.INCOMPLETE
    oom = _legacy(30) + "Check failed: (cudaMalloc) out of memory\n"
    assert _parse(OF, oom, ParseContext(nodes=1, gpus_per_node=8, batch_size=64, warmup_steps=20,
                                        measure_steps=100)).status == Status.OOM


def test_real_dmlc_two_node_train_py_run_reads_the_first_node_times_nodes():
    """The real 2-node dmlc run (tests/test_insightface_slurm.py): both workers print MXNet's Speedometer lines, each
    its own node's samples/s; the first node's (srun label 0) are read, x nodes, never mixed with node 1's."""
    text = (_real("arcface_mxnet_dmlc_2x1_tiny_cpu_srun_label.log")).read_text()
    speeds = {label: [float(v) for v in re.findall(rf"^{label}: INFO:root:Epoch\[0\] Batch \[\d+-(?:[3-8])\]\t"
                                                    r"Speed: (\S+) samples/sec", text, re.M)] for label in (0, 1)}
    assert len(speeds[0]) == len(speeds[1]) == 6 and speeds[0] != speeds[1]
    res = _parse(MX, text, ParseContext(nodes=2, gpus_per_node=1, batch_size=2, warmup_steps=2, measure_steps=6))
    assert res.status == Status.OK, res.reason
    assert res.throughput_speed == pytest.approx(2 * sum(speeds[0]) / 6)
    assert res.extra["ranks_seen"] == 2 and res.extra["formats"] == ["arcface-mxnet"]


def test_real_node_ips_two_node_oneflow_face_run_reads_the_first_node():
    text = (_real("oneflow_face_node_ips_2x1_tiny_cpu_srun_label.log")).read_text()
    tput = [float(v) for i, v in re.findall(r"^0: train: iter (\d+), loss \S+, throughput: (\S+)$", text, re.M)
            if 2 <= int(i) <= 7]
    res = _parse(OF, text, ParseContext(nodes=2, gpus_per_node=1, batch_size=2, warmup_steps=2, measure_steps=6))
    assert res.status == Status.OK, res.reason
    assert res.throughput_speed == pytest.approx(sum(tput) / 6) and res.extra["formats"] == ["oneflow_face"]
    assert res.loss_finite is True


@pytest.mark.parametrize("path", [_real(n) for n in LOGS], ids=lambda p: p.name)
@pytest.mark.parametrize("suite", [OF, MX], ids=["oneflow", "mxnet"])
def test_block_path_reads_like_the_line_loop(suite, path):
    for ctx in (ParseContext(nodes=1, gpus_per_node=8, batch_size=64, warmup_steps=460, measure_steps=220),
                ParseContext(nodes=1, gpus_per_node=1, batch_size=8, warmup_steps=32420, measure_steps=120)):
        assert repr(suite.parse(lp.read_lines(path), ctx)) == repr(
            suite.parse((line for line in lp.read_lines(path)), ctx))


# ------------------------------------------------------------------------------------------ launch

def _cell(suite, nodes, gpus, bs=64, launcher=None, **params):
    return Cell(suite=suite.name, model="insightface", framework=suite.framework, nodes=nodes, gpus_per_node=gpus,
                batch_size=bs, precision="fp32", xla=False, launcher=launcher or suite.launcher,
                params=tuple(sorted(params.items())))


def test_oneflow_flags_follow_dlperfs_script():
    cell = _cell(OF, 1, 8, parallel="partial_fc", num_classes=1500000)
    argv = OF.program(cell, Measure(repeats=1, warmup_steps=20, measure_steps=130), OF.options)
    i = argv.index("--")
    assert argv[:5] == ["python3", "-m", "dlperf_slurm.workloads.pyconfig", "--module", "config"]
    assert "dataset.emore.num_classes=1500000" in argv[:i] and "dataset.emore.train_data_part_num=32" in argv[:i]
    rest = argv[i + 1:]
    assert rest[0] == "/workspace/oneflow_face/insightface_train.py"
    for flag in ("--train_batch_size=512", "--train_iter=150", "--device_num_per_node=8", "--model_parallel=1",
                 "--partial_fc=1", "--sample_ratio=0.1", "--num_nodes=1", "--use_fp16=False"):
        assert flag in rest
    assert "--log_dir={run_dir}/log" in rest  # the run's own folder
    assert OF.drop_reason(_cell(OF, 1, 1)) is None
    assert "num_classes" in OF.drop_reason(_cell(OF, 1, 1, num_classes=1.5))


def test_oneflow_across_nodes_under_node_ips_with_the_addresses_in_the_config():
    """insightface_train.py's --node_ips type evals each address (a SyntaxError for "10.0.0.1") and its parse_args
    rejects --ctrl_port: pyconfig moves the launcher's --node_ips into default.node_ips and drops --ctrl_port."""
    cell = _cell(OF, 2, 8, parallel="partial_fc")
    assert OF.launcher == "node_ips" and OF.drop_reason(cell) is None
    argv = OF.program(cell, Measure(repeats=1, warmup_steps=20, measure_steps=100), OF.options)
    head = argv[:argv.index("--")]
    for a, b in (("--list-arg", "node_ips=default.node_ips"), ("--drop-arg", "ctrl_port"),
                 ("--per-node", "models_root")):
        assert head[head.index(a) + 1] == b
    rest = argv[argv.index("--") + 1:]
    assert {"--num_nodes=2", "--device_num_per_node=8", "--train_batch_size=1024"} <= set(rest)
    assert not any(a.startswith(("--node_ips", "--ctrl_port")) for a in rest)  # the launcher adds them
    with pytest.raises(SyntaxError):  # why: the program's own str2list on an address
        [float(y) if type(eval(y)) == float else int(y) for y in "10.0.0.1".split(",")]


def test_mxnet_programs_per_parallel_mode():
    m = Measure(repeats=1, warmup_steps=20, measure_steps=100)
    data = MX.program(_cell(MX, 1, 8, parallel="data"), m, MX.options)
    model = MX.program(_cell(MX, 1, 8, parallel="model"), m, MX.options)
    assert data[data.index("--") + 1].endswith("/train.py") and model[model.index("--") + 1].endswith("/train_parall.py")
    assert "config.max_steps=120" in data and "dataset.emore.num_classes=85742" in data
    assert data[data.index("--per-batch-size") + 1] == "64"
    pfc_cell = _cell(MX, 2, 8, launcher="horovodrun", parallel="partial_fc", num_classes=12000000)
    pfc = MX.program(pfc_cell, m, MX.options)
    assert pfc[pfc.index("--") + 1].endswith("/partial_fc/mxnet/train_memory.py")
    assert ["--after", "generate_config"] == pfc[5:7] and "config.num_classes=12000000" in pfc
    assert MX.drop_reason(pfc_cell) is None and MX.environment(pfc_cell, MX.options)["HOROVOD_CACHE_CAPACITY"] == "1024"
    assert "horovodrun" in MX.drop_reason(_cell(MX, 1, 8, parallel="partial_fc"))
    assert "--kvstore" not in data  # one node: the program's own "device" kvstore, as DLPerf ran it


def test_mxnet_train_py_across_nodes_under_dmlc_and_train_parall_on_one_node():
    m = Measure(repeats=1, warmup_steps=20, measure_steps=100)
    cell = _cell(MX, 2, 8, launcher="dmlc", parallel="data")
    assert MX.drop_reason(cell) is None
    argv = MX.program(cell, m, MX.options)
    rest = argv[argv.index("--") + 1:]
    assert rest[0].endswith("/train.py") and rest[rest.index("--kvstore") + 1] == "dist_device_sync"
    assert argv[argv.index("--per-node") + 1] == "models-root"
    assert "dmlc" in MX.drop_reason(_cell(MX, 2, 8, parallel="data"))  # tf_config cannot join the nodes
    for c in (_cell(MX, 2, 8, launcher="dmlc", parallel="model"), _cell(MX, 1, 8, launcher="dmlc", parallel="model")):
        assert "parall_module_dist" in MX.drop_reason(c)
    assert "dist kvstore" in MX.option_error("kvstore", "device") and MX.option_error("kvstore", "dist_sync") is None


def test_pyconfig_changes_the_config_the_script_imports(tmp_path):
    (tmp_path / "config.py").write_text(
        "class D(dict):\n    __getattr__ = dict.__getitem__\n    def __setattr__(s, k, v): s[k] = v\n"
        "config = D(num_classes=0)\ndataset = D(emore=D(num_classes=85742, parts=16))\n"
        "def generate_config(ds):\n    config.num_classes = dataset[ds]['num_classes']\n")
    (tmp_path / "train.py").write_text(
        "import sys\nfrom config import config, dataset, generate_config\ngenerate_config('emore')\n"
        "print('classes', config.num_classes, dataset.emore.parts, sys.argv[1:])\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm.workloads.pyconfig", "--set",
                        "dataset.emore.num_classes=1800000", "--set", "dataset.emore.parts=1", "--",
                        str(tmp_path / "train.py"), "--network", "r100"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "classes 1800000 1 ['--network', 'r100']"
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm.workloads.pyconfig", "--after", "generate_config",
                        "--set", "config.num_classes=7", "--", str(tmp_path / "train.py")],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0 and p.stdout.splitlines()[-1] == "classes 7 16 []", p.stderr
    assert pyconfig.literal("0.1") == 0.1 and pyconfig.literal("emore") == "emore"


def test_pyconfig_takes_launcher_flags_off_the_command_line(tmp_path):
    """What the node_ips launcher appends, as insightface_train.py needs it: the addresses into the config, the
    control port dropped, the models root one folder per node (SLURM_NODEID)."""
    (tmp_path / "cfg.py").write_text("class D(dict):\n    __getattr__ = dict.__getitem__\n"
                                     "default = D(node_ips=['192.168.1.13'])\n")
    (tmp_path / "train.py").write_text("import sys\nfrom cfg import default\nprint(default.node_ips, sys.argv[1:])\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "SLURM_NODEID": "1"}
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm.workloads.pyconfig", "--module", "cfg",
                        "--list-arg", "node_ips=default.node_ips", "--drop-arg", "ctrl_port",
                        "--per-node", "models_root", "--", str(tmp_path / "train.py"), "--num_nodes=2",
                        "--models_root=/r/models", "--node_ips=10.0.0.1,10.0.0.2", "--ctrl_port=29511"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "['10.0.0.1', '10.0.0.2'] ['--num_nodes=2', '--models_root=/r/models/node1']"
    assert "--ctrl_port=29511 taken off" in p.stdout
    assert pyconfig.take_arg(["--a", "1", "--b=2", "--a=3"], "a") == (["--b=2"], "3")


@pytest.mark.parametrize("name, cell, suffix", [
    ("oneflow-insightface", "insightface.oneflow.1x8.b64.fp32.xla0.parallel-partial_fc", ""),
    ("oneflow-insightface", "insightface.oneflow.2x8.b64.fp32.xla0.parallel-partial_fc", "_2x8"),
    ("mxnet-insightface", "insightface.mxnet.4x8.b64.fp32.xla0.launcher-horovodrun.parallel-partial_fc", ""),
    ("mxnet-insightface", "insightface.mxnet.2x8.b64.fp32.xla0.launcher-dmlc.parallel-data", "_2x8_dmlc")])
def test_golden_scripts(name, cell, suffix, golden):
    m = loader.load(ROOT / "matrices" / f"{name}.toml", site=False)
    run = [r for r in loader.runs(m, Path("logs") / m.name) if r.cell.id == cell][-1]  # its last repeat
    text = render.render_run(m, run)
    golden(f"insightface_{name}{suffix}", text)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


# ------------------------------------------------------------------- DLPerf's Max num_classes (documentation)

def test_dlperfs_max_num_classes_table_transcribed():
    """DLPerf's "Max num_classes" (found by hand; the search for it is another feature): kept verbatim as a fixture
    so the search has the published boundary to compare with; here only its transcription is checked."""
    rows = [[x.strip() for x in line.strip().strip("|").split("|")]
            for line in (REAL / "dlperf_insightface_report_v1_max_num_classes.md").read_text().splitlines()
            if line.startswith("| 1 ")]
    table = {(int(r[0]), int(r[1])): (int(r[6]), int(r[7])) for r in rows}
    assert all(r[2] == "64" and r[3:6] == ["True", "True", "True"] for r in rows)
    assert table == {(1, 1): (2_000_000, 1_800_000), (1, 8): (13_500_000, 12_000_000)}


@pytest.mark.parametrize("suite, column, extra", [
    ("oneflow/insightface", 6, 'precision = ["amp"]'),  # DLPerf's runs: FP16, model parallel + partial FC
    ("mxnet/insightface", 7, 'precision = ["fp32"]\nlauncher = ["horovodrun"]')])  # this suite has no fp16
def test_search_num_classes_renders_each_probe_with_its_num_classes(tmp_path, suite, column, extra):
    """``search --axis num_classes`` at render level (DLPerf's "Max num_classes" table): every probe cell's script
    sets the FC width it probes in the config, and a probe that runs out of memory above DLPerf's published value
    (the fixture's table) makes the search land on that value."""
    import dataclasses

    from dlperf_slurm.matrix import search

    rows = [[x.strip() for x in line.strip().strip("|").split("|")]
            for line in (REAL / "dlperf_insightface_report_v1_max_num_classes.md").read_text().splitlines()
            if line.startswith("| 1 ")]
    published = {f"{r[0]}x{r[1]}": int(r[column]) for r in rows}
    (tmp_path / "m.toml").write_text(f'suite = "{suite}"\nname = "maxc"\n[axes]\ndevices = {list(published)!r}\n'
                                     f'batch_size = [64]\nparallel = ["partial_fc"]\n{extra}\n'.replace("'", '"'))
    m = loader.load(tmp_path / "m.toml", site=False)
    key = "dataset.emore.num_classes" if suite.startswith("oneflow") else "config.num_classes"
    seen: list[tuple[str, int]] = []

    def probe(cells, measure):
        pm = dataclasses.replace(m, cells=cells, dropped=[], measure=measure)
        out = {}
        for run in loader.runs(pm, Path("logs") / pm.name):
            text = render.render_run(pm, run)
            (value,) = {int(v) for v in re.findall(rf"--set {re.escape(key)}=(\d+)", text)}
            assert value == run.cell.param("num_classes", suites.get(suite).axis_defaults["num_classes"])
            shape = f"{run.cell.nodes}x{run.cell.gpus_per_node}"
            seen.append((shape, value))
            out[run.cell.id] = Status.OK if value <= published[shape] else Status.OOM
        return out

    found = search.run_search(m, "num_classes", tmp_path, probe, 100_000, 25_600_000, 100_000, (2, 3),
                              out=lambda s: None)
    assert {s.key.split(".")[2]: s.ok for s in found} == published
    assert all(s.oom == s.ok + 100_000 for s in found)
    assert {shape for shape, _ in seen} == set(published) and len(seen) == sum(len(s.probes) for s in found)
    assert all(len(s.probes) <= search.bound(100_000, 25_600_000, 100_000) for s in found)
