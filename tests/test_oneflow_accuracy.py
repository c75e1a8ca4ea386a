"""Accuracy runs of ``oneflow/resnet50`` (``[measure] mode = "accuracy"``): under ``node_ips`` OneFlow-Benchmark's
of_cnn_train_val.py, under ``oneflow`` Oneflow-Inc/models' resnet50 train.py, each for the campaign's epochs of the
OFRecord data set, evaluating after each (flags checked against OneFlow-Benchmark de4698a's config.py /
ofrecord_util.py / optimizer_util.py and models fc7cbf8d's config.py); real data only; and models' train.py run here.

The real run needs the oneflow venv (``python tests/frameworks/venvs.py oneflow``) and an Oneflow-Inc/models checkout
(``$ONEFLOW_MODELS_DIR``: its Vision/classification/image/resnet50/train.py), run on the CPU through
tests/frameworks/oneflow/models_on_cpu.py; skipped with the reason otherwise. About three minutes.
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
SUITE = "oneflow/resnet50"

ACCURACY = """suite = "oneflow/resnet50"
name = "of-acc"
[axes]
devices = ["{devices}"]
batch_size = [{batch}]
precision = ["{precision}"]
launcher = ["{launcher}"]
[options]
{options}
[measure]
mode = "accuracy"
epochs = {epochs}
target = {{ metric = "top1", value = {target} }}
repeats = 1
warmup_steps = 2
measure_steps = {measure}
[slurm]
gpu_request = "none"
[environment.env]
OMP_NUM_THREADS = "2"
{env}
"""


def _load(tmp_path, launcher="node_ips", devices="2x8", precision="fp32", options='data_dir = "/data/of"'):
    p = tmp_path / "m.toml"
    p.write_text(ACCURACY.format(devices=devices, batch=64, precision=precision, launcher=launcher, options=options,
                                 epochs=90, target=0.75, measure=18, env=""))
    return loader.load(p, site=False)


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in argv[2:])


def test_node_ips_accuracy_argv_is_of_cnn_train_val_py_with_its_validation(tmp_path):
    m = _load(tmp_path)
    (cell,) = m.cells
    argv = suites.get(SUITE).program(cell, m.measure, m.options[SUITE])
    assert argv[1] == "/workspace/OneFlow-Benchmark/Classification/cnns/of_cnn_train_val.py"
    f = _flags(argv)
    assert f["num_epochs"] == "90" and f["train_data_dir"] == "/data/of/train"
    assert f["val_data_dir"] == "/data/of/validation" and f["val_data_part_num"] == "256"
    assert f["num_examples"] == "1281167" and f["num_val_examples"] == "50000" and f["num_classes"] == "1000"
    assert f["num_nodes"] == "2" and f["gpu_num_per_node"] == "8" and f["batch_size_per_device"] == "64"
    assert f["loss_print_every_n_iter"] == "2" and f["model_save_dir"] == f"{RUN_DIR}/snapshots"
    assert not any("target" in a for a in argv)  # no stop at a target: every epoch runs


def test_oneflow_launcher_accuracy_argv_is_models_train_py(tmp_path):
    m = _load(tmp_path, launcher="oneflow", precision="amp", options='data_dir = "/data/of"\ngraph = false')
    (cell,) = m.cells
    argv = suites.get(SUITE).program(cell, m.measure, m.options[SUITE])
    assert argv[1] == "/workspace/models/Vision/classification/image/resnet50/train.py"
    f = _flags(argv)
    assert f["ofrecord-path"] == "/data/of" and f["num-epochs"] == "90" and "skip-eval" not in f
    assert (f["num-devices-per-node"], f["num-nodes"], f["train-batch-size"]) == ("8", "2", "64")
    assert f["samples-per-epoch"] == "1281167" and f["val-samples-per-epoch"] == "50000"
    assert "use-fp16" in f and "graph" not in f and "num-classes" not in f  # its model has 1000 outputs


def test_throughput_runs_keep_dlperfs_flags(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text('suite = "oneflow/resnet50"\n[axes]\ndevices = ["1x8"]\nbatch_size = [128]\n')
    m = loader.load(p, site=False)
    argv = suites.get(SUITE).program(m.cells[0], m.measure, m.options[SUITE])
    assert "--num_epoch=1" in argv and not any(a.startswith("--val_data_dir") for a in argv)


def test_synthetic_data_is_refused_for_an_accuracy_run(tmp_path):
    with pytest.raises(UserError) as e:
        _load(tmp_path, options='data_dir = ""')
    msg = str(e.value)
    assert "options.data_dir" in msg and "synthetic" in msg and "\n" not in msg.strip(), msg


def _models() -> tuple[Path, Path, str]:
    sys.path.insert(0, str(HERE / "frameworks"))
    sys.path.insert(0, str(HERE / "slurm"))
    import venvs
    from testlib import nvidia_libs

    py, why = venvs.python_for("oneflow")
    if py is None:
        pytest.skip(why)
    src = os.environ.get("ONEFLOW_MODELS_DIR")
    train = Path(src or "") / "Vision" / "classification" / "image" / "resnet50" / "train.py"
    if not src or not train.is_file():
        pytest.skip("set ONEFLOW_MODELS_DIR to an Oneflow-Inc/models checkout: its "
                    "Vision/classification/image/resnet50/train.py")
    return py, train, nvidia_libs(py)


@pytest.mark.slow
def test_models_train_py_accuracy_run_under_the_local_executor(tmp_path):
    """The suite's accuracy argv under the oneflow launcher starts Oneflow-Inc/models' own train.py (on the CPU
    through models_on_cpu.py) on scikit-learn's digits in OFRecord; its per-epoch evaluations are the run's accuracy,
    and a target it cannot reach in two epochs (top-1 100 %) makes it NOT_CONVERGED, from submit's own status on."""
    py, train, libs = _models()
    import sklearn

    digits = Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz"
    data = tmp_path / "digits"
    subprocess.run([str(py), str(HERE / "frameworks" / "digits_images.py"), str(digits), str(data), "--layout",
                    "ofrecord", "--train", "48", "--val", "16"], check=True, capture_output=True, timeout=120)
    options = textwrap.dedent(f"""\
        python = "{py}"
        models_workdir = "{HERE / 'frameworks' / 'oneflow'}"
        models_script = "models_on_cpu.py"
        data_dir = "{data}"
        data_part_num = 1
        train_examples = 48
        val_examples = 16
        num_classes = 10
        graph = false
        accuracy_flags = ["--lr=0.01", "--warmup-epochs=0"]""")
    env = f'LD_LIBRARY_PATH = "{libs}"\nDLPERF_TEST_PROGRAM = "{train}"'
    (tmp_path / "m.toml").write_text(ACCURACY.format(devices="1x1", batch=8, precision="fp32", launcher="oneflow",
                                                     options=options, epochs=2, target=1.0, measure=2, env=env))
    penv = dict(os.environ, PYTHONPATH=str(HERE.parent))
    base = [sys.executable, "-m", "dlperf_slurm", "--logs", str(tmp_path / "logs")]
    p = subprocess.run(base + ["submit", str(tmp_path / "m.toml"), "--executor", "local", "--no-site", "--wait"],
                       env=penv, capture_output=True, text=True, timeout=900)
    (log,) = (tmp_path / "logs" / "of-acc" / "1n1g").glob("*.log")
    text = log.read_text()
    assert "NOT_CONVERGED 1" in p.stdout, p.stdout + p.stderr + text[-3000:]
    printed = [(int(e) + 1, float(a)) for e, a in re.findall(r"^\[rank:0\] \[eval\], epoch: (\d+)/2, .*?top1: ([\d.]+)",
                                                             text, re.M)]
    assert [e for e, _ in printed] == [1, 2], text[-3000:]
    p = subprocess.run(base + ["collect", "of-acc", "--no-plots", "--out", str(tmp_path / "s")], env=penv,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = json.loads((tmp_path / "s" / "of-acc.json").read_text())["runs"]
    assert run["status"] == "NOT_CONVERGED" and "ended after 2 of 2 epochs" in run["reason"], run
    assert [(e["epoch"], e["top1"]) for e in run["extra"]["evals"]] == printed
    # the window, steps 2 -> 4, inside the first 6-step epoch; the steps counted across both epochs
    assert (run["window_start"], run["window_end"], run["steps_seen"]) == (2, 4, 12), run
