"""Accuracy runs of ``mxnet-gluon/resnet50`` (``[measure] mode = "accuracy"``): gluon-cv's own
scripts/classification/imagenet/train_imagenet.py trained for the campaign's epochs on RecordIO data, validating
after each (its flags checked against dmlc/gluon-cv 5677756's argparse), real data and 1x1 cells only; and the real
program run here.

The real run needs the gluoncv venv (``python tests/frameworks/venvs.py gluoncv``) and a gluon-cv checkout
(``$GLUONCV_DIR``: its scripts/classification/imagenet/train_imagenet.py); skipped with the reason otherwise. About
three minutes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dlperf_slurm import suites
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix import loader
from dlperf_slurm.suites import RUN_DIR

HERE = Path(__file__).resolve().parent
SUITE = "mxnet-gluon/resnet50"

ACCURACY = """suite = "mxnet-gluon/resnet50"
name = "gluon-acc"
[axes]
devices = ["{devices}"]
batch_size = [{batch}]
precision = ["{precision}"]
[options]
{options}
[measure]
mode = "accuracy"
epochs = {epochs}
target = {{ metric = "top1", value = {target} }}
repeats = 1
warmup_steps = 5
measure_steps = {measure}
[slurm]
gpu_request = "none"
[environment.env]
OMP_NUM_THREADS = "2"
OMPI_ALLOW_RUN_AS_ROOT = "1"
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM = "1"
"""


def _load(tmp_path, devices="1x1", precision="fp32", options='rec_dir = "/data/rec"', epochs=90, batch=128):
    p = tmp_path / "m.toml"
    p.write_text(ACCURACY.format(devices=devices, batch=batch, precision=precision, options=options, epochs=epochs,
                                 target=0.75, measure=20))
    return loader.load(p, site=False)


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in argv[2:])


def test_accuracy_argv_is_gluon_cvs_train_imagenet_py_for_the_campaigns_epochs(tmp_path):
    m = _load(tmp_path, precision="amp")
    (cell,) = m.cells
    argv = suites.get(SUITE).program(cell, m.measure, m.options[SUITE])
    assert argv[1] == "/workspace/gluon-cv/scripts/classification/imagenet/train_imagenet.py"
    f = _flags(argv)
    assert f["num-epochs"] == "90" and f["model"] == "resnet50_v1b" and "use-rec" in f
    assert (f["rec-train"], f["rec-train-idx"], f["rec-val"], f["rec-val-idx"]) == (
        "/data/rec/train.rec", "/data/rec/train.idx", "/data/rec/val.rec", "/data/rec/val.idx")
    assert f["batch-size"] == "128" and f["num-gpus"] == "1" and f["dtype"] == "float16"
    assert f["save-dir"] == f"{RUN_DIR}/params" and f["num-training-samples"] == "1281167"
    assert not any("target" in a for a in argv)  # it has no stop at a target: every epoch runs


def test_accuracy_device_cpu_and_flags(tmp_path):
    m = _load(tmp_path, options='rec_dir = "/r"\ndevice = "cpu"\naccuracy_flags = ["--lr=0.4", "--input-size=32"]')
    argv = suites.get(SUITE).program(m.cells[0], m.measure, m.options[SUITE])
    assert _flags(argv)["num-gpus"] == "0" and argv[-2:] == ["--lr=0.4", "--input-size=32"]


def test_throughput_runs_keep_dlperfs_train_horovod_py(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text('suite = "mxnet-gluon/resnet50"\n[axes]\ndevices = ["1x8"]\nbatch_size = [128]\n')
    m = loader.load(p, site=False)
    argv = suites.get(SUITE).program(m.cells[0], m.measure, m.options[SUITE])
    assert argv[1].endswith("train_horovod.py") and "--num-epochs=1" in argv


@pytest.mark.parametrize("kw,key,words", [
    (dict(options='rec_dir = ""'), "options.rec_dir", "train.rec"),
    (dict(devices="1x8"), "axes.devices", "1x1 cells"),
])
def test_an_accuracy_run_it_cannot_train_is_refused_naming_the_key(tmp_path, kw, key, words):
    with pytest.raises(UserError) as e:
        _load(tmp_path, **kw)
    msg = str(e.value)
    assert key in msg and words in msg and "\n" not in msg.strip(), msg


def _gluoncv() -> tuple[Path, Path]:
    sys.path.insert(0, str(HERE / "frameworks"))
    import venvs

    py, why = venvs.python_for("gluoncv")
    if py is None:
        pytest.skip(why)
    src = os.environ.get("GLUONCV_DIR")
    workdir = Path(src or "") / "scripts" / "classification" / "imagenet"
    if not src or not (workdir / "train_imagenet.py").is_file():
        pytest.skip("set GLUONCV_DIR to a dmlc/gluon-cv checkout: its scripts/classification/imagenet/train_imagenet.py")
    return py, workdir


@pytest.mark.slow
def test_train_imagenet_accuracy_run_under_the_local_executor(tmp_path):
    """The suite's accuracy argv starts gluon-cv's own train_imagenet.py (under mpirun, one rank, on the CPU) on
    scikit-learn's digits in RecordIO; its per-epoch validations are the run's accuracy, and a target it cannot reach
    in two epochs (top-1 100 %) makes it NOT_CONVERGED, from submit's own status on."""
    py, workdir = _gluoncv()
    import sklearn

    digits = Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz"
    data = tmp_path / "digits"
    subprocess.run([str(py), str(HERE / "frameworks" / "digits_images.py"), str(digits), str(data), "--layout", "rec",
                    "--train", "320", "--val", "96"], check=True, capture_output=True, timeout=120)
    options = textwrap.dedent(f"""\
        python = "{py}"
        workdir = "{workdir}"
        rec_dir = "{data}"
        device = "cpu"
        num_training_samples = 320
        accuracy_flags = ["--input-size=32", "--lr=0.01", "--num-data-workers=1"]""")
    (tmp_path / "m.toml").write_text(ACCURACY.format(devices="1x1", batch=16, precision="fp32", options=options,
                                                     epochs=2, target=1.0, measure=10))
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    base = [sys.executable, "-m", "dlperf_slurm", "--logs", str(tmp_path / "logs")]
    p = subprocess.run(base + ["submit", str(tmp_path / "m.toml"), "--executor", "local", "--no-site", "--wait"],
                       env=env, capture_output=True, text=True, timeout=900)
    (log,) = (tmp_path / "logs" / "gluon-acc" / "1n1g").glob("*.log")
    text = log.read_text()
    assert "NOT_CONVERGED 1" in p.stdout, p.stdout + p.stderr + text[-3000:]
    printed = [(int(e) + 1, round(1 - float(a), 10), round(1 - float(b), 10)) for e, a, b in re.findall(
        r"\[Epoch (\d+)\] validation: err-top1=([\d.]+) err-top5=([\d.]+)", text)]
    assert [e for e, _, _ in printed] == [1, 2], text[-3000:]
    p = subprocess.run(base + ["collect", "gluon-acc", "--no-plots", "--out", str(tmp_path / "s")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = json.loads((tmp_path / "s" / "gluon-acc.json").read_text())["runs"]
    assert run["status"] == "NOT_CONVERGED" and "ended after 2 of 2 epochs" in run["reason"], run
    assert [(e["epoch"], e["top1"], e["top5"]) for e in run["extra"]["evals"]] == printed
    # the window, steps 5 -> 15, inside the first 20-batch epoch; the batches counted across both epochs
    assert (run["window_start"], run["window_end"], run["steps_seen"]) == (5, 15, 40), run
