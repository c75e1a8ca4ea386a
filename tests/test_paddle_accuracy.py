"""Accuracy runs of ``paddle/resnet50`` (``[measure] mode = "accuracy"``): PaddleClas's own tools/train.py trained
for the campaign's epochs, evaluating after each (its flags checked against PaddleClas d178931f's source: the
``-o`` overrides of ppcls/utils/config.py on ResNet50.yaml's keys), real data only; and the real program run here.

The real run needs the paddleclas venv (``python tests/frameworks/venvs.py paddleclas``) and a PaddleClas checkout
(``$PADDLECLAS_DIR``, d178931f: its ``ppcls`` and ``tools``); skipped with the reason otherwise. About two minutes.
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
from dlperf_slurm.suites import REPEAT, RUN_DIR

HERE = Path(__file__).resolve().parent
SUITE = "paddle/resnet50"

ACCURACY = """suite = "paddle/resnet50"
name = "paddle-acc"
[axes]
devices = ["{devices}"]
batch_size = [16]
precision = ["{precision}"]
[options]
{options}
[measure]
mode = "accuracy"
epochs = {epochs}
target = {{ metric = "top1", value = {target} }}
repeats = 1
warmup_steps = 3
measure_steps = {measure}
[slurm]
gpu_request = "none"
[environment.env]
OMP_NUM_THREADS = "2"
"""


def _load(tmp_path, devices="1x1", precision="fp32", options='data_dir = "/data/imagenet"', epochs=90, target=0.75,
          measure=15):
    p = tmp_path / "m.toml"
    p.write_text(ACCURACY.format(devices=devices, precision=precision, options=options, epochs=epochs,
                                 target=target, measure=measure))
    return loader.load(p, site=False)


def _overrides(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-o")


def test_accuracy_argv_is_paddleclas_train_py_with_its_epochs_and_evaluation(tmp_path):
    m = _load(tmp_path, devices="2x8")
    (cell,) = m.cells
    argv = suites.get(SUITE).program(cell, m.measure, m.options[SUITE])
    assert argv[:4] == ["python3", "/workspace/PaddleClas/tools/train.py", "-c",
                        "/workspace/PaddleClas/ppcls/configs/ImageNet/ResNet/ResNet50.yaml"]
    o = _overrides(argv)
    assert o["Global.epochs"] == "90" and o["Global.eval_during_train"] == "True" and o["Global.eval_interval"] == "1"
    assert o["DataLoader.Train.dataset.image_root"] == "/data/imagenet/"
    assert o["DataLoader.Train.dataset.cls_label_path"] == "/data/imagenet/train_list.txt"
    assert o["DataLoader.Eval.dataset.cls_label_path"] == "/data/imagenet/val_list.txt"
    assert o["DataLoader.Train.sampler.batch_size"] == "16"  # per card (DistributedBatchSampler)
    assert o["Arch.pretrained"] == "False" and o["Arch.class_num"] == "1000" and o["Global.device"] == "gpu"
    assert o["Global.output_dir"] == f"{RUN_DIR}/output" and "AMP.use_amp" not in o
    assert o["Global.seed"] == REPEAT  # each repeat trains from its own seed (the renderer puts the repeat there)
    assert not any("target" in a.lower() for a in argv)  # PaddleClas has no stop at a target: every epoch runs
    # each -o value has one "=" (ppcls/utils/config.py asserts it)
    assert all(argv[i + 1].count("=") == 1 for i, a in enumerate(argv) if a == "-o")


def test_accuracy_amp_and_overrides_follow_the_suites(tmp_path):
    m = _load(tmp_path, precision="amp", options='data_dir = "/d"\nclas_overrides = ["Optimizer.lr.learning_rate=0.4"]')
    (cell,) = m.cells
    argv = suites.get(SUITE).program(cell, m.measure, m.options[SUITE])
    o = _overrides(argv)
    assert o["AMP.use_amp"] == "True" and o["AMP.level"] == "O1" and o["AMP.use_dynamic_loss_scaling"] == "True"
    assert argv[-2:] == ["-o", "Optimizer.lr.learning_rate=0.4"]  # after the suite's: the user's win


def test_throughput_runs_keep_dlperfs_paddlecv_train_py(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text('suite = "paddle/resnet50"\n[axes]\ndevices = ["1x8"]\nbatch_size = [128]\n')
    m = loader.load(p, site=False)
    argv = suites.get(SUITE).program(m.cells[0], m.measure, m.options[SUITE])
    assert argv[1].endswith("PaddleCV/image_classification/train.py") and "--validate=False" in argv


@pytest.mark.parametrize("options,key", [('data_dir = ""', "options.data_dir")])
def test_an_accuracy_run_without_real_data_is_refused_naming_the_option(tmp_path, options, key):
    with pytest.raises(UserError) as e:
        _load(tmp_path, options=options)
    msg = str(e.value)
    assert key in msg and "real data" in msg and "train_list.txt" in msg and "\n" not in msg.strip(), msg


def test_a_bad_override_is_refused(tmp_path):
    with pytest.raises(UserError) as e:
        _load(tmp_path, options='data_dir = "/d"\nclas_overrides = ["Global.epochs"]')
    assert "options.clas_overrides" in str(e.value) and "KEY=VALUE" in str(e.value)


def _paddleclas() -> tuple[Path, Path]:
    sys.path.insert(0, str(HERE / "frameworks"))
    import venvs

    py, why = venvs.python_for("paddleclas")
    if py is None:
        pytest.skip(why)
    clas = os.environ.get("PADDLECLAS_DIR")
    if not clas or not (Path(clas) / "tools" / "train.py").is_file():
        pytest.skip("set PADDLECLAS_DIR to a PaddlePaddle/PaddleClas checkout (d178931f): its tools/train.py")
    return py, Path(clas)


@pytest.mark.slow
def test_paddleclas_accuracy_run_under_the_local_executor(tmp_path):
    """The suite's accuracy argv starts PaddleClas's own tools/train.py (under python -m paddle.distributed.launch,
    on the CPU) on scikit-learn's digits; its per-epoch evaluations are the run's accuracy, and a target it cannot
    reach in two epochs (top-1 100 %) makes it NOT_CONVERGED, from submit's own status on."""
    py, clas = _paddleclas()
    import sklearn

    digits = Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz"
    data = tmp_path / "digits"
    subprocess.run([str(py), str(HERE / "frameworks" / "digits_images.py"), str(digits), str(data), "--layout", "list",
                    "--train", "192", "--val", "96"], check=True, capture_output=True, timeout=120)
    overrides = ["DataLoader.Train.dataset.transform_ops.1.RandCropImage.size=32",
                 "DataLoader.Eval.dataset.transform_ops.1.ResizeImage.resize_short=32",
                 "DataLoader.Eval.dataset.transform_ops.2.CropImage.size=32", "DataLoader.Train.loader.num_workers=0",
                 "DataLoader.Eval.loader.num_workers=0", "Optimizer.lr.learning_rate=0.01"]
    options = textwrap.dedent(f"""\
        python = "{py}"
        clas_workdir = "{clas}"
        clas_device = "cpu"
        data_dir = "{data}"
        class_num = 10
        clas_overrides = {json.dumps(overrides)}""")
    (tmp_path / "m.toml").write_text(ACCURACY.format(devices="1x1", precision="fp32", options=options, epochs=2,
                                                     target=1.0, measure=6))
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    base = [sys.executable, "-m", "dlperf_slurm", "--logs", str(tmp_path / "logs")]
    p = subprocess.run(base + ["submit", str(tmp_path / "m.toml"), "--executor", "local", "--no-site", "--wait"],
                       env=env, capture_output=True, text=True, timeout=900)
    (log,) = (tmp_path / "logs" / "paddle-acc" / "1n1g").glob("*.log")
    text = log.read_text()
    assert "NOT_CONVERGED 1" in p.stdout, p.stdout + p.stderr + text[-3000:]
    # the program's own evaluation lines, one per epoch
    printed = [(int(e), float(a), float(b)) for e, a, b in re.findall(
        r"\[Eval\]\[Epoch (\d+)\]\[Avg\].*?top1: ([\d.]+), top5: ([\d.]+)", text)]
    assert [e for e, _, _ in printed] == [1, 2], text[-3000:]
    p = subprocess.run(base + ["collect", "paddle-acc", "--no-plots", "--out", str(tmp_path / "s")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = json.loads((tmp_path / "s" / "paddle-acc.json").read_text())["runs"]
    assert run["status"] == "NOT_CONVERGED" and "ended after 2 of 2 epochs" in run["reason"], run
    assert [(e["epoch"], e["top1"], e["top5"]) for e in run["extra"]["evals"]] == printed
    # the window, steps 3 -> 9, inside the first 12-step epoch; the steps counted across both epochs
    assert (run["window_start"], run["window_end"], run["steps_seen"]) == (3, 9, 24), run


REAL_LOG = HERE / "fixtures" / "real" / "PaddleClas" / "d178931f" / "ppcls_resnet50_digits_accuracy_run.log"


@pytest.mark.parametrize("target,status", [(0.17, "OK"), (0.5, "NOT_CONVERGED")])
def test_submit_decides_a_run_against_the_campaigns_target(tmp_path, target, status):
    """The local executor decides a run as collect does: the campaign's target read against the evaluations the
    program printed (here a stand-in tools/train.py that prints the committed real log of the suite's accuracy run:
    its best top-1 is 17.5 % at epoch 2)."""
    sys.path.insert(0, str(HERE / "frameworks"))
    import venvs

    py, why = venvs.python_for("paddle")  # the suite's launcher: python -m paddle.distributed.launch
    if py is None:
        pytest.skip(why)
    tools = tmp_path / "clas" / "tools"
    tools.mkdir(parents=True)
    (tools / "train.py").write_text(  # the program's own lines (the job's :::DLPERF events are this run's)
        f"import sys\nsys.stdout.writelines(l for l in open({str(REAL_LOG)!r}) if not l.startswith(':::'))\n")
    options = f'python = "{py}"\nclas_workdir = "{tmp_path / "clas"}"\ndata_dir = "{tmp_path}"'
    (tmp_path / "m.toml").write_text(ACCURACY.format(devices="1x1", precision="fp32", options=options, epochs=3,
                                                     target=target, measure=15))
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm", "--logs", str(tmp_path / "logs"), "submit",
                        str(tmp_path / "m.toml"), "--executor", "local", "--no-site", "--wait"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert f"{status} 1" in p.stdout, p.stdout + p.stderr
