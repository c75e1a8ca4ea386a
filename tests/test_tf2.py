"""The tf2 suites without TensorFlow: every run's own model directory (rendered, and emptied by the job script
before the program starts), and ``collect --from`` on a DLPerf TF2 ResNet-50 log tree with DLPerf's own window
by default. The real programs run on the Slurm test cluster in tests/test_tf2_slurm.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dlperf_slurm import cli
from dlperf_slurm.collect import drive, gather
from dlperf_slurm.matrix import loader
from dlperf_slurm.model import cell
from dlperf_slurm.model.status import Status
from dlperf_slurm.submit import render

# ------------------------------------------------------------------------------- each run's own model dir

TF2_MATRIX = """
suite = "{suite}"
name = "own-dirs"
[axes]
devices = ["1x1", "2x1"]
batch_size = [2]
[options]
python = "{python}"
num_gpus = 0
[measure]
repeats = 2
warmup_steps = 2
measure_steps = 4
[slurm]
gpu_request = "none"
"""


def _load(tmp_path: Path, suite: str, python: str = "python3") -> cell.Matrix:
    p = tmp_path / "m.toml"
    p.write_text(textwrap.dedent(TF2_MATRIX.format(suite=suite, python=python)))
    return loader.load(p, site=False)


@pytest.mark.parametrize("suite", ["tf2/resnet50", "tf2/bert-base"])
def test_every_run_renders_its_own_model_dir(tmp_path, suite):
    # a campaign folder with a space and shell syntax in its name: the run's folder stays one inert word
    camp = tmp_path / "camp $(touch pwned) 'x'"
    m = _load(tmp_path, suite)
    runs = loader.runs(m, camp)
    assert len(runs) == 4
    dirs = set()
    for run in runs:
        text = render.render_run(m, run)
        want = f"--model_dir={run.work_dir}/model"
        assert render.shell_quote(want) in text, text
        assert "/tmp/tf2" not in text and "{run_dir}" not in text
        assert f"export DLPERF_RUN_DIR={render.shell_quote(run.work_dir)}\n" in text
        assert 'rm -rf -- "$DLPERF_RUN_DIR" && mkdir -p -- "$DLPERF_RUN_DIR"' in text
        # emptied after the start, whose ghost guard (the job code's dlperf_start) leaves an ended run's folder
        assert text.index("DLPERF_RUN_DIR=") > text.index("\ndlperf_start\n")
        if suite == "tf2/resnet50":
            assert "train.resume_checkpoint=false" in text
        dirs.add(run.work_dir)
        assert run.work_dir.parent == run.log.parent and run.work_dir.name == run.log.name[:-4] + ".work"
    assert len(dirs) == 4  # every repeat of every cell its own


def test_a_suite_that_names_no_run_dir_gets_none(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('suite = "pytorch-ddp/resnet50"\nname = "n"\n[axes]\ndevices = ["1x1"]\nbatch_size = [2]\n')
    m = loader.load(p, site=False)
    text = render.render_run(m, loader.runs(m, tmp_path)[0])
    assert "DLPERF_RUN_DIR" not in text and f"{loader.runs(m, tmp_path)[0].base}.work" not in text


def test_the_job_script_gives_the_program_an_empty_model_dir(tmp_path):
    """An earlier start (a retry, another program) left a checkpoint in the run's folder: the job script empties it
    before the program starts, so nothing can be restored from it."""
    seen = tmp_path / "seen.json"
    fake = tmp_path / "fake python"  # stands for the TF interpreter: records what the program would find
    fake.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""\
        import json, os, sys
        model_dir = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--model_dir="))
        with open({str(seen)!r}, "w") as f:
            json.dump({{"argv": sys.argv[1:], "model_dir": model_dir, "run_dir": os.environ["DLPERF_RUN_DIR"],
                        "left": sorted(os.listdir(os.environ["DLPERF_RUN_DIR"]))}}, f)
        """))
    fake.chmod(0o755)
    m = _load(tmp_path, "tf2/resnet50", python=str(fake))
    camp = tmp_path / "camp $(touch pwned) 'x'"  # the run's folder reaches the program as text, never as shell
    run = next(r for r in loader.runs(m, camp) if r.cell.nodes == 1 and r.repeat == 1)
    (run.work_dir / "model").mkdir(parents=True)
    (run.work_dir / "model" / "checkpoint").write_text('model_checkpoint_path: "ctl_step_6.ckpt-1"\n')
    [script] = render.write_scripts(m, [run])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    r = subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, run.log.read_text()
    assert not (tmp_path / "pwned").exists()
    got = json.loads(seen.read_text())
    assert got["run_dir"] == str(run.work_dir) and got["model_dir"] == f"{run.work_dir}/model"
    assert got["left"] == []  # the stale checkpoint is gone before the program starts
    assert got["argv"][:2] == ["-m", "official.legacy.image_classification.classifier_trainer"]


# ------------------------------------------------------------------ collect --from: DLPerf's TF2 RN50 window

# DLPerf's TF2 ResNet-50 FP32 batch 128 per-run figures (TensorFlow/resnet50v1.5/README.md, the output of its
# extract_tensorflow_logs.py: the mean of TimeHistory's examples/second over steps 100..600), and the medians and
# speedups it published from them. Their logs themselves are not in the repository (a zip on DLPerf's download
# host): the tree below is written in their format from these figures.
DLPERF_RUNS = {
    "1n1g": {1: 323.9, 2: 321.8, 3: 320.18, 4: 322.25, 5: 321.22},
    "1n2g": {1: 575.76, 2: 580.55, 3: 574.66, 4: 571.71, 5: 563.93},
    "1n4g": {1: 1145.76, 2: 1143.46, 3: 1167.06, 4: 1122.51, 5: 1128.34},
    "1n8g": {1: 2494.22, 2: 2441.07, 3: 2458.74, 4: 2480.44, 5: 2455.28},
    "2n8g": {1: 4864.58, 2: 4918.45, 3: 4829.93, 4: 4849.68, 5: 4789.87},
    "4n8g": {1: 9369.06, 2: 9402.51, 3: 9418.44, 4: 9420.23, 5: 9454.31},
}
DLPERF_PUBLISHED = {"1n1g": (321.8, 1.0), "1n2g": (574.66, 1.79), "1n4g": (1143.46, 3.55), "1n8g": (2458.74, 7.64),
                    "2n8g": (4849.68, 15.07), "4n8g": (9418.44, 29.27)}
_SPREAD = (0.37, -0.21, 0.05, -0.14, -0.07)  # the five measured intervals around the run's mean (sum 0)


def _glog(t: float) -> str:
    h, rem = divmod(t, 3600)
    mi, s = divmod(rem, 60)
    return f"I0826 {int(h):02d}:{int(mi):02d}:{s:09.6f} 140405777909504 keras_utils.py:133] "


def dlperf_rn50_log(shape: str, mean_speed: float, batch: int = 128) -> str:
    """A log as DLPerf's TF2 runs wrote it (suites-reference.md §3.8): TimeHistory every 100 of 600 steps, the
    first interval slow (graph building), then the Keras progress line."""
    nodes, gpus = (int(x) for x in shape[:-1].split("n"))
    gb = nodes * gpus * batch
    speeds = [round(mean_speed / 2.9, 2)] + [round(mean_speed + d, 2) for d in _SPREAD]
    t = 15 * 3600 + 10 * 60 + 34.0
    out = ["I0826 15:10:30.000000 140405777909504 classifier_trainer.py:326] Global batch size: %d" % gb]
    for k, sp in enumerate(speeds):
        secs = gb * 100 / sp
        t += secs
        out.append(_glog(t) + f"TimeHistory: {secs:.2f} seconds, {sp:.2f} examples/second between steps "
                              f"{100 * k} and {100 * (k + 1)}")
    out.append("600/600 - 239s - loss: 10.4633 - accuracy: 0.1303 - top_5_accuracy: 0.2842")
    return "\n".join(out) + "\n"


@pytest.fixture()
def dlperf_tree(tmp_path) -> Path:
    root = tmp_path / "bz128"
    for shape, runs in DLPERF_RUNS.items():
        (root / shape).mkdir(parents=True)
        for rep, speed in runs.items():
            (root / shape / f"rn50_b128_fp32_{rep}.log").write_text(dlperf_rn50_log(shape, speed))
    return root


def _cells(out: Path, stem: str) -> dict[str, dict]:
    return {c["shape"]: c for c in json.loads((out / f"{stem}.json").read_text())["cells"]}


def test_collect_from_uses_dlperfs_window_and_gives_its_published_medians(dlperf_tree, tmp_path):
    out = tmp_path / "out"
    assert cli.main(["collect", "--from", str(dlperf_tree), "--suite", "tf2/resnet50", "--out", str(out),
                     "--no-plots", "--jobs", "1", "--quiet"]) == 0
    cells = _cells(out, "bz128")
    assert set(cells) == set(DLPERF_PUBLISHED)
    for shape, (median, speedup) in DLPERF_PUBLISHED.items():
        c = cells[shape]
        assert c["status"] == Status.OK and c["n_ok"] == 5, c
        assert abs(c["median"] - median) <= 0.005 + 1e-9, (shape, c["median"], median)  # published at 2 decimals
        assert abs(c["speedup"] - speedup) <= 0.005 + 1e-9, (shape, c["speedup"], speedup)
        assert c["published"] == "speed"
    doc = json.loads((out / "bz128.json").read_text())
    run = next(r for r in doc["runs"] if r["shape"] == "1n1g")
    assert (run["window_start"], run["window_end"]) == (100, 600)
    assert any("DLPerf extraction window" in n for n in doc["sources"][0]["notes"])


def test_an_explicit_window_wins_over_the_suites(dlperf_tree):
    # the whole run, the slow first interval included: the mean of all six intervals' speeds
    whole = drive.collect([gather.runs_from_tree(dlperf_tree, "tf2/resnet50", 0, 600)], jobs=1)
    one = next(c for c in whole.cells if c.shape == "1n1g")
    six = sorted((round(p / 2.9, 2) + sum(round(p + d, 2) for d in _SPREAD)) / 6 for p in DLPERF_RUNS["1n1g"].values())
    assert one.status == Status.OK and one.median == pytest.approx(six[2], rel=1e-9)
    assert one.median < DLPERF_PUBLISHED["1n1g"][0] - 30
    assert {(r.window_start, r.window_end) for r in whole.runs} == {(0, 600)}
    # the generic default (skip 20, time 100) is not on TimeHistory's 100-step grid: nothing can be timed
    generic = drive.collect([gather.runs_from_tree(dlperf_tree, "tf2/resnet50", 20, 100)], jobs=1)
    assert {r.status for r in generic.runs} == {Status.UNMEASURED}
    assert "window 20->120" in generic.runs[0].reason
    # one flag given: the other one stays the suite's
    mixed = gather.runs_from_tree(dlperf_tree, "tf2/resnet50", warmup_steps=200)
    assert {(s.warmup_steps, s.measure_steps) for s in mixed.runs} == {(200, 500)}


def test_a_suite_without_a_dlperf_window_keeps_the_default(tmp_path):
    d = tmp_path / "t" / "1n1g"
    d.mkdir(parents=True)
    (d / "m_b8_fp32_0.log").write_text("nothing\n")
    col = gather.runs_from_tree(tmp_path / "t", "pytorch-ddp/resnet50")
    assert {(s.warmup_steps, s.measure_steps) for s in col.runs} == {(20, 100)}
    assert not any("DLPerf" in n for n in col.notes)


# ------------------------------------------------------------------------------- a run that died before training

REAL_TF2 = (Path(__file__).parent / "fixtures" / "real" / "tensorflow-models" / "2.20.0"
            / "classifier_trainer_resnet50_synthetic_1x1_b2.log")


@pytest.mark.parametrize("parser", ["blocks", "lines"])
def test_a_mirrored_strategy_line_is_no_error(tmp_path, monkeypatch, parser):
    """A TF2 job that ends before its first step: its reason quotes no "error" from MirroredStrategy's lines
    ("mirrored" holds "rror": the error words were "rror" and took them). The real start-up of a classifier_trainer
    run (tf-models-official 2.20.0, this project's test machine), whole lines up to its first record, its lines
    that say error themselves (oneDNN's round-off note) left out."""
    from dlperf_slurm.parsing import lines as lp

    monkeypatch.setattr(lp, "BLOCKS", parser == "blocks")
    head = []
    for line in REAL_TF2.read_text().splitlines(keepends=True):
        if "TimeHistory" in line or " - loss: " in line:
            break
        if "error" not in line.lower() and ":::DLPERF" not in line:  # our harness's health line left out too
            head.append(line)
    assert any("MirroredStrategy" in line for line in head)
    log = tmp_path / "1n1g" / "rn50_b2_fp32_1.log"
    log.parent.mkdir()
    log.write_text("".join(head))
    [run] = gather.runs_from_tree(tmp_path, "tf2/resnet50", 1, 2).runs
    res = drive.collect([gather.runs_from_tree(tmp_path, "tf2/resnet50", 1, 2)], jobs=1).runs[0]
    assert run.key == res.run
    assert res.status == Status.LAUNCH_FAILED.value
    assert "no training step" in res.reason and "last error" not in res.reason, res.reason


# ------------------------------------------------------------------------- records cut by buffering, torn heads


@pytest.mark.parametrize("parser", ["blocks", "lines"])
@pytest.mark.parametrize("torn", [None, "I0826 15:13:29.25", "I0826 15:13]29.25"])
def test_a_record_whose_message_went_to_the_next_line_is_timed_by_its_header(tmp_path, monkeypatch, parser, torn):
    """A TimeHistory record cut by buffering right after its glog header, the message on the next line; its header
    may follow another writer's torn bytes on the same line (a malformed header, "]" inside or not). The record
    keeps its header's time: the window is timed, one worker. A malformed short line with no whole header after it
    is no record's head (the line that follows it is read alone)."""
    from dlperf_slurm import parsing
    from dlperf_slurm.model.result import ParseContext
    from dlperf_slurm.parsing import lines as lp
    from dlperf_slurm.suites import get

    monkeypatch.setattr(lp, "BLOCKS", parser == "blocks")
    out = []
    for k, step in enumerate(range(100, 1100, 100)):
        head = f"I0826 15:{k // 6:02d}:{k * 10 % 60:02d}.000000 1111 keras_utils.py:133] "
        rec = f"TimeHistory: {10.0:.2f} seconds, {300 + 10 * k} examples/second between steps {step} and {step + 100}"
        if k == 7 and torn is not None:  # inside the window
            out += [torn + head, rec]
        else:
            out.append(head + rec)
    out.insert(3, "I0826 15:00]garbled")  # no whole header: nothing to glue
    p = tmp_path / "cut.log"
    p.write_text("\n".join(out) + "\n")
    ctx = ParseContext(nodes=1, gpus_per_node=1, batch_size=32, warmup_steps=100, measure_steps=800,
                       options=dict(get("tf2/resnet50").options))
    res = get("tf2/resnet50").parse(parsing.read_lines(p), ctx)
    assert res.status == Status.OK and res.extra["workers_seen"] == 1, (res.status, res.reason, res.extra)
    assert res.throughput == pytest.approx(32 * 800 / 80.0) and res.extra.get("garbled_lines", 0) == 0
