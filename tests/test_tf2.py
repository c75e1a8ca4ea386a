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

from dlperf_slurm import matrix, render

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


def _load(tmp_path: Path, suite: str, python: str = "python3") -> matrix.Matrix:
    p = tmp_path / "m.toml"
    p.write_text(textwrap.dedent(TF2_MATRIX.format(suite=suite, python=python)))
    return matrix.load(p, site=False)


@pytest.mark.parametrize("suite", ["tf2/resnet50", "tf2/bert-base"])
def test_every_run_renders_its_own_model_dir(tmp_path, suite):
    # a campaign folder with a space and shell syntax in its name: the run's folder stays one inert word
    camp = tmp_path / "camp $(touch pwned) 'x'"
    m = _load(tmp_path, suite)
    runs = matrix.runs(m, camp)
    assert len(runs) == 4
    dirs = set()
    for run in runs:
        text = render.render_run(m, run)
        want = f"--model_dir={run.work_dir}/model"
        assert render.shell_quote(want) in text, text
        assert "/tmp/tf2" not in text and "{run_dir}" not in text
        assert f"export DLPERF_RUN_DIR={render.shell_quote(run.work_dir)}\n" in text
        assert 'rm -rf -- "$DLPERF_RUN_DIR" && mkdir -p -- "$DLPERF_RUN_DIR"' in text
        assert text.index("DLPERF_RUN_DIR=") > text.index('if [ -e "$DLPERF_MARKER" ]')  # a ghost keeps it
        if suite == "tf2/resnet50":
            assert "train.resume_checkpoint=false" in text
        dirs.add(run.work_dir)
        assert run.work_dir.parent == run.log.parent and run.work_dir.name == run.log.name[:-4] + ".work"
    assert len(dirs) == 4  # every repeat of every cell its own


def test_a_suite_that_names_no_run_dir_gets_none(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('suite = "pytorch-ddp/resnet50"\nname = "n"\n[axes]\ndevices = ["1x1"]\nbatch_size = [2]\n')
    m = matrix.load(p, site=False)
    text = render.render_run(m, matrix.runs(m, tmp_path)[0])
    assert "DLPERF_RUN_DIR" not in text and f"{matrix.runs(m, tmp_path)[0].base}.work" not in text


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
    run = next(r for r in matrix.runs(m, tmp_path / "camp") if r.cell.nodes == 1 and r.repeat == 1)
    (run.work_dir / "model").mkdir(parents=True)
    (run.work_dir / "model" / "checkpoint").write_text('model_checkpoint_path: "ctl_step_6.ckpt-1"\n')
    [script] = render.write_scripts(m, [run])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, run.log.read_text()
    got = json.loads(seen.read_text())
    assert got["run_dir"] == str(run.work_dir) and got["model_dir"] == f"{run.work_dir}/model"
    assert got["left"] == []  # the stale checkpoint is gone before the program starts
    assert got["argv"][:2] == ["-m", "official.legacy.image_classification.classifier_trainer"]
