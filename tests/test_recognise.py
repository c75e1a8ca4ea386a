"""Issue 20, parts 2 and 5: a log its suite reads no step of is UNRECOGNISED when its program finished (never a
launch failure), with the lines that look like progress and the suites that do read it; a failed run's reason
quotes the log's own error line, with its path and line number. Every log here is real program output (each
fixture folder's SOURCE.md says where it comes from)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dlperf_slurm.collect import drive, gather
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.status import Status
from dlperf_slurm.suites import recognise

REAL = Path(__file__).parent / "fixtures" / "real"


def real(name: str) -> Path:
    """A real log of the corpus by its file name, wherever its program's folder keeps it."""
    found = sorted(REAL.rglob(Path(name).name))
    assert found, f"no real log {name} under {REAL}"
    return found[0]
FAILURES = REAL / "failures"


def _line(path: Path, n: int) -> str:
    return path.read_text(errors="replace").splitlines()[n - 1].strip()


def _tree(tmp_path: Path, src: Path, name: str, rc: int | None) -> Path:
    """A DLPerf-style tree holding one real log (and an exit marker with ``rc``: None for none)."""
    shape = tmp_path / "logs" / "1n1g"
    shape.mkdir(parents=True)
    shutil.copy(src, shape / name)
    if rc is not None:
        (shape / name.replace(".log", ".exit")).write_text(json.dumps({"rc": rc, "signal": "", "end": 1.0}))
    return tmp_path / "logs"


def _one(root: Path, suite: str):
    res = drive.collect([gather.runs_from_tree(root, suite, 0, 1)], jobs=1)
    assert len(res.runs) == 1
    return res.runs[0]


# ------------------------------------------------------------------------------------------ the error line

@pytest.mark.parametrize("name,line,starts", [
    ("heat_issue_2007_mpirun_root.log", 3, "mpirun has detected an attempt to run as root"),
    # a traceback wrapped by its paste: the exception line, not the path fragment printed after it
    ("itsd_pytorch_issue_2_traceback.log", 24, "ImportError: cannot import name 'Optional'"),
])
def test_the_last_error_line_of_real_failures(name, line, starts):
    path = FAILURES / name
    n, text = recognise.last_error(path)
    assert (n, text) == (line, _line(path, line)) and text.startswith(starts)


def test_the_error_line_number_past_the_tail_read(tmp_path):
    # a log longer than what last_error reads: its line number still counts every line before
    filler = real("pytorch_examples_rn50_2n8g.excerpt.log").read_text()
    big = tmp_path / "big.log"
    reps = recognise.TAIL_BYTES // len(filler) * 3
    big.write_text(filler * reps + (FAILURES / "itsd_pytorch_issue_2_traceback.log").read_text())
    n, text = recognise.last_error(big)
    assert n == filler.count("\n") * reps + 24 and text == _line(big, n)


@pytest.mark.parametrize("name,line", [("heat_issue_2007_mpirun_root.log", 3),
                                       ("itsd_pytorch_issue_2_traceback.log", 24)])
def test_a_failed_run_quotes_its_logs_own_error_with_path_and_line(tmp_path, name, line):
    root = _tree(tmp_path, FAILURES / name, "r50_b128_fp32_1.log", rc=1)
    row = _one(root, "pytorch-examples/resnet50")
    assert row.status == Status.LAUNCH_FAILED
    log = str(root / "1n1g" / "r50_b128_fp32_1.log")
    assert f"the log's last error ({log}:{line}): {_line(FAILURES / name, line)}" in row.reason, row.reason
    assert row.reason.startswith("exit code 1; no training step in the log")


# ------------------------------------------------------------------------------------------- UNRECOGNISED

# real logs with the suites that read them (test_ngc_tf1, test_parsers, test_tensorpack) and one that does not
FOREIGN = [("ngc-tf1/convnets_training_benchmark_gpu1_fp32_bs128.log", "ngc-tf1/resnet50", "paddle/resnet50"),
           ("pytorch_examples_rn50_2n8g.excerpt.log", "pytorch-examples/resnet50", "ngc-pytorch/resnet50"),
           ("tensorpack/tiny_1x1_gpu_b4_spe20.log", "tensorpack/resnet50", "tf-cnn/resnet50")]


@pytest.mark.parametrize("src,reader,wrong", FOREIGN)
def test_a_finished_run_its_suite_does_not_read_is_unrecognised(tmp_path, src, reader, wrong):
    root = _tree(tmp_path, real(src), "r50_b4_fp32_1.log", rc=0)
    row = _one(root, wrong)
    assert row.status == Status.UNRECOGNISED, row.reason
    assert row.throughput is None and row.extra["log_status"] == Status.LAUNCH_FAILED
    assert f"{wrong} finds no training step it knows in this log (exit code 0;" in row.reason
    assert f"read by {reader}" in row.reason and f"--suite {reader}" in row.reason
    # the quoted progress lines are the log's own, at the line numbers given
    info = row.extra["unread"]
    assert info["readers"] == recognise.readers(real(src), skip=wrong) and reader in info["readers"]
    assert info["progress"], info
    for n, text in info["progress"]:
        assert f"line {n}: {text!r}" in row.reason and _line(real(src), n).startswith(text.rstrip("…"))


def test_a_tree_log_without_exit_marker_unrecognised_with_plenty_of_output(tmp_path):
    root = _tree(tmp_path, real(FOREIGN[0][0]), "r50_b4_fp32_1.log", rc=None)
    row = _one(root, "paddle/resnet50")
    assert row.status == Status.UNRECOGNISED and "no exit marker, plenty of output" in row.reason
    # a failure with little output stays a launch failure, with its own words
    root2 = _tree(tmp_path / "b", FAILURES / "heat_issue_2007_mpirun_root.log", "r50_b4_fp32_1.log", rc=None)
    row2 = _one(root2, "paddle/resnet50")
    assert row2.status == Status.LAUNCH_FAILED and "run as root" in row2.reason


@pytest.mark.parametrize("log,needle", [
    # the formats of issue 20's table, each the first line of a real log of the corpus that holds the needle (the
    # issue quotes them shortened)
    ("PaddleClas/2022-08/issue2186_pplcnet_epoch3.excerpt.log", "[Train][Epoch 3/360][Iter: 0/2503]"),
    ("PaddleNLP/2.3.0.dev/ocnli.a9.ft.b.log", "interval_samples_per_second"),
    ("oneflow-models/fc7cbf8d/resnet50_train_py_of090_cpu_2ranks.log", "[train], epoch: "),
    ("gluon-cv/2020-05/resnest14_train_horovod_8gpu_epochs0-2.excerpt.log", "Speed: 3114.92 samples/sec"),
    ("gluon-nlp/2019-03/bert_base_pretrain_8gpu_steps249-3749.excerpt.log", "[step 249]"),
    ("DeepSpeed/v0.19.8/deepspeed_0198_pipe_cpu_2stages.log", "iter time (s): "),
    ("torchvision-references/sew-resnet-2021/sew_resnet_imagenet_issue10.excerpt.log", "[  10/5005]"),
    ("MindSpore-models/ace23bb8/resnet50_imagenet_8p_lossmonitor.excerpt.log", "epoch: 2 step: 5004"),
])
def test_lines_of_real_programs_look_like_progress(log, needle):
    line = next(ln for ln in (REAL / log).read_text(errors="replace").splitlines() if needle in ln)
    assert recognise.RATE.search(line) or recognise.COUNTER.search(line), line


def test_noise_does_not_look_like_progress():
    for path in (FAILURES / "heat_issue_2007_mpirun_root.log", FAILURES / "itsd_pytorch_issue_2_traceback.log"):
        assert recognise.scan(path.read_text().splitlines()).progress_count == 0


# ------------------------------------------------------------------------------------------- --suite auto

def _shape_tree(root: Path, logs: dict[str, Path]) -> Path:
    for rel, src in logs.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, root / rel)
    return root


def test_auto_reads_the_suite_from_the_logs(tmp_path):
    root = _shape_tree(tmp_path / "dlperf", {
        "1n1g/rn50_b128_fp32_1.log": real("ngc-tf1/convnets_training_benchmark_gpu1_fp32_bs128.log"),
        "1n8g/rn50_b256_amp_1.log": real("ngc-tf1/convnets_training_benchmark_gpu8_amp_bs256.log")})
    suite, notes = gather.tree_suite(root, None)
    assert suite == "ngc-tf1/resnet50"
    assert notes == ["--suite auto: ngc-tf1/resnet50 (its parser reads 2 of 2 sampled logs)"]


def test_auto_breaks_a_tie_of_suites_sharing_a_parser_by_the_path_and_says_so(tmp_path):
    # MXNet's Speedometer lines are read by every MXNet suite's parser: the folder names the program
    src = real("mxnet-gluon-resnet50/mxnet_issue_11284_every_batch.log")
    shared = recognise.readers(src)
    assert len(shared) > 1 and "mxnet-gluon/resnet50" in shared
    root = _shape_tree(tmp_path / "mxnet-gluon", {"1n1g/r50_b64_fp32_1.log": src})
    suite, (note,) = gather.tree_suite(root, "auto")
    assert suite == "mxnet-gluon/resnet50"
    assert "each read 1 of the 1 sampled logs; chose mxnet-gluon/resnet50: the logs' path names its framework" in note
    # a path that names none of them better: the first in name order, said as such
    plain = _shape_tree(tmp_path / "plain", {"1n1g/x_b64_fp32_1.log": src})
    suite, (note,) = gather.tree_suite(plain, "auto")
    assert suite == min(shared) and "first in name order" in note


def test_auto_tells_the_tf_cnn_models_apart_by_a_vgg_in_the_path_when_the_log_names_no_model(tmp_path):
    # tf_cnn_benchmarks prints the same step lines for every --model; a log that keeps its "Model:" header line is
    # read by its model's suite alone (tests/test_log_model.py), an excerpt without it by both tf-cnn suites: the
    # path decides ("vgg_": recognise.MODEL_WORDS)
    src = real("tensorflow_issue23032_1gpu_b32.log")
    assert "Model:" not in src.read_text() and {"tf-cnn/resnet50", "tf-cnn/vgg16"} <= set(recognise.readers(src))
    root = _shape_tree(tmp_path / "ddl", {"1n1g/vgg_b32_fp32_1.log": src})
    suite, (note,) = gather.tree_suite(root, "auto")
    assert suite == "tf-cnn/vgg16" and "chose tf-cnn/vgg16" in note, note
    plain = _shape_tree(tmp_path / "plain", {"1n1g/x_b32_fp32_1.log": src})
    assert gather.tree_suite(plain, "auto")[0] == "tf-cnn/resnet50"  # no word for either: the first in name order


def test_a_suite_that_reads_none_of_the_tree_is_refused_naming_those_that_do(tmp_path):
    root = _shape_tree(tmp_path / "t", {"1n8g/r50_b64_fp32_1.log": real("pytorch_examples_rn50_2n8g.excerpt.log")})
    with pytest.raises(UserError) as err:
        gather.tree_suite(root, "ngc-pytorch/resnet50")
    text = str(err.value)
    assert "\n" not in text and "ngc-pytorch/resnet50 finds no training step in any of 1 sampled logs" in text
    assert "pytorch-examples/resnet50 read them: --suite pytorch-examples/resnet50" in text
    assert gather.tree_suite(root, "pytorch-examples/resnet50") == ("pytorch-examples/resnet50", [])


def test_a_tree_no_suite_reads(tmp_path):
    root = _shape_tree(tmp_path / "t", {"1n1g/r50_b64_fp32_1.log": FAILURES / "heat_issue_2007_mpirun_root.log"})
    # a named suite stays: its runs say why (a launch failure quoting mpirun)
    assert gather.tree_suite(root, "pytorch-examples/resnet50") == ("pytorch-examples/resnet50", [])
    with pytest.raises(UserError, match="no registered suite finds a training step in any of 1 sampled logs"):
        gather.tree_suite(root, None)
    with pytest.raises(UserError, match="unknown suite 'nope'"):
        gather.tree_suite(root, "nope")


def test_collect_from_without_suite_on_the_command_line(tmp_path, capsys):
    from dlperf_slurm import cli

    root = _shape_tree(tmp_path / "t", {"1n8g/r50_b64_fp32_1.log": real("pytorch_examples_rn50_2n8g.excerpt.log")})
    # its one run is an excerpt, too short for the window: every run failed, exit 1 (the summaries are written)
    assert cli.main(["collect", "--from", str(root), "--out", str(tmp_path / "out"), "--no-plots", "--quiet"]) == 1
    assert "--suite auto: pytorch-examples/resnet50" in capsys.readouterr().err
    runs = json.loads((tmp_path / "out" / "t.json").read_text())["runs"]
    assert [r["suite"] for r in runs] == ["pytorch-examples/resnet50"]
    # the wrong suite: refused before anything is written over
    before = (tmp_path / "out" / "t.json").read_bytes()
    assert cli.main(["collect", "--from", str(root), "--suite", "ngc-pytorch/resnet50", "--out",
                     str(tmp_path / "out"), "--no-plots", "--quiet"]) == 2
    assert "read them: --suite pytorch-examples/resnet50" in capsys.readouterr().err
    assert (tmp_path / "out" / "t.json").read_bytes() == before


# ------------------------------------------------------------------------------ an INFO line is no error


TENSORPACK = Path(__file__).parent / "fixtures" / "real" / "tensorpack" / "0.11"
#: NCCL's plugin probe, logged at INFO on every start of NCCL 2.18 and later without a net plugin
NCCL_PROBE = ("n1:2313:2388 [0] NCCL INFO NET/Plugin: Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: "
              "cannot open shared object file: No such file or directory")


@pytest.mark.parametrize("name", ["tiny_1x1_gpu_b4_spe20.log", "tiny_1x1_python-queue_b4_spe10.log"])
def test_a_warning_in_a_real_log_is_not_its_last_error(name):
    """tensorpack's ``WRN /bin/sh: 1: nvidia-smi: not found`` (a CPU machine) was quoted as the run's last error."""
    assert recognise.last_error(TENSORPACK / name) is None


def test_info_lines_are_never_the_last_error_and_a_real_error_after_them_is(tmp_path):
    """INFO lines from committed logs (PaddleNLP's ``[    INFO]``, MXNet's ``NCCL INFO``), NCCL's plugin probe
    ("No such file or directory" at INFO): none is a run's last error; the error line that follows them is."""
    paddle_log = sorted((Path(__file__).parent / "fixtures" / "real" / "PaddleNLP").rglob("*.log"))[0]
    paddle = next(line for line in paddle_log.read_text(errors="replace").splitlines() if "INFO]" in line)
    mxnet = "[1,0]<stdout>:61d7a676ab24:9763:9906 [0] NCCL INFO NET/IB : No device found."
    info = [paddle, mxnet, NCCL_PROBE, paddle + " Error: not found"]  # (the last: error words at INFO)
    log = tmp_path / "a.log"
    log.write_text("\n".join(info) + "\n")
    assert recognise.last_error(log) is None
    log.write_text("\n".join([*info, "torchrun: command not found", *info]) + "\n")
    assert recognise.last_error(log) == (len(info) + 1, "torchrun: command not found")
    log.write_text("\n".join([*info, "ImportError: cannot import name 'INFO' from 'logging'", *info]) + "\n")
    assert recognise.last_error(log)[1].startswith("ImportError")


@pytest.mark.parametrize("name", ["paddledetection_yolov3_train.log", "paddleocr_rec_train.log"])
def test_a_trainer_with_its_own_loss_field_and_a_slashed_date_is_no_keras_log(name):
    """PaddleDetection's and PaddleOCR's trainers stamp each line [MM/DD ...] or [YYYY/MM/DD ...] and print a
    ``loss:`` field: the TF2 suites' Keras progress lines (``step/steps - ... - loss: x``, first on the line) are
    not theirs, and no TF2 suite claims them (before, "05/11" was read as Keras' step 5 of 11); nor do the Paddle
    suites claim PaddleOCR's ``global_step: N,`` (the PaddleNLP Trainer's line holds its interval's speed metrics,
    ``interval_runtime``, which PaddleOCR's does not)."""
    found = recognise.readers(REAL / "unclaimed" / name)
    assert found == [], found  # nor a Paddle suite: PaddleOCR's "global_step: N," is not the PaddleNLP Trainer's
