"""The model a log says its program ran (tf_cnn_benchmarks' ``Model:       vgg16`` header line, Horovod's synthetic
benchmark's ``Model: resnet50``): its parser records it as printed (``RunResult.extra["log_model"]``), and a suite
does not read a log written for the model of another registered suite of its framework: ``--suite auto`` picks the
log's own suite without a tie, a named wrong suite is refused in one line. Every log here is real program output
(each fixture folder's SOURCE.toml says where it comes from)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.collect import drive, gather
from dlperf_slurm.errors import UserError
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.suites import recognise

REAL = Path(__file__).parent / "fixtures" / "real"
TF_CNN = REAL / "tf_cnn_benchmarks"
HOROVOD = REAL / "horovod-examples"
VGG16 = [TF_CNN / "2017-10" / "tensorpack_issue442_vgg16_b32_2gpu_ps.log",
         TF_CNN / "8fb7907" / "tf_cnn_vgg16_synthetic_cpu_b2_lr1e-6.log",
         TF_CNN / "8fb7907" / "tf_cnn_vgg16_synthetic_cpu_b8_10steps.log"]

# (log, suite whose parser reads it, the model its header line names)
MODELS = [
    (VGG16[0], "tf-cnn/vgg16", "vgg16"),
    (VGG16[1], "tf-cnn/vgg16", "vgg16"),
    (VGG16[2], "tf-cnn/vgg16", "vgg16"),
    (TF_CNN / "8fb7907" / "tf_cnn_vgg16_synthetic_cpu_b2_10steps.log", "tf-cnn/vgg16", "vgg16"),
    (TF_CNN / "8fb7907" / "tf_cnn_resnet20_digits_cpu_2epochs.log", "tf-cnn/resnet50", "resnet20"),
    (TF_CNN / "8fb7907" / "tf_cnn_resnet20_digits_cpu_stop_at_top1.log", "tf-cnn/resnet50", "resnet20"),
    (TF_CNN / "8fb7907" / "tf_cnn_trivial_cpu_b8_train_and_eval.log", "tf-cnn/resnet50", "trivial"),
    (TF_CNN / "2019-06" / "orion_inception3_imagenet_5epochs_2gpu.log", "tf-cnn/resnet50", "inception3"),
    # horovodrun --gloo's "[0]<stdout>:" and mpirun's "[1,0]<stdout>:" rank labels
    (HOROVOD / "0.28.1" / "pytorch_synthetic_benchmark_gloo_2cpu_b2.log", "horovod-synthetic/resnet50", "resnet50"),
    (HOROVOD / "0.28.1" / "pytorch_synthetic_benchmark_mpirun_2cpu_b2.log", "horovod-synthetic/resnet50",
     "resnet50"),
]


@pytest.mark.parametrize("path, suite, model", MODELS, ids=[p.name for p, _, _ in MODELS])
def test_the_parser_records_the_model_the_log_names(path, suite, model):
    ctx = ParseContext(nodes=1, gpus_per_node=2, batch_size=2, warmup_steps=0, measure_steps=1)
    assert any(  # the header line as the program printed it
        line.rpartition(":Model:")[2].strip() == model or line.split() == ["Model:", model]
        for line in path.read_text().splitlines())
    for lines in (lp.read_lines(path), (line for line in lp.read_lines(path))):  # the block path, the line path
        assert suites.get(suite).parse(lines, ctx).extra.get("log_model") == model


def _tree(root: Path, logs: dict[str, Path]) -> Path:
    for rel, src in logs.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, root / rel)
    return root


def _vgg16_tree(root: Path) -> Path:
    # plain file names: nothing in the path says vgg (tmp_path holds the test's name: none of these says it either)
    return _tree(root, {"1n2g/m_b32_fp32_1.log": VGG16[0], "1n1g/m_b2_fp32_1.log": VGG16[1],
                        "1n1g/m_b8_fp32_1.log": VGG16[2]})


def test_a_vgg16_log_is_read_by_tf_cnn_vgg16_only():
    for path in VGG16:
        found = recognise.readers(path)
        assert "tf-cnn/vgg16" in found and "tf-cnn/resnet50" not in found, (path, found)
        assert recognise.written_for(path, "tf-cnn/resnet50") == ("tf-cnn/vgg16", "vgg16")
        assert recognise.written_for(path, "tf-cnn/vgg16") is None


def test_auto_picks_the_suite_of_the_model_the_logs_name_without_a_tie(tmp_path):
    plain = _vgg16_tree(tmp_path / "plain")
    assert recognise.hint_score("tf-cnn/vgg16", str(plain.resolve())) == 0  # the path names neither model
    for root in (plain,
                 _tree(tmp_path / "named", {"1n1g/vgg16_b2_fp32_1.log": VGG16[1],
                                            "1n1g/vgg16_b8_fp32_1.log": VGG16[2]})):
        suite, (note,) = gather.tree_suite(root, "auto")
        assert suite == "tf-cnn/vgg16"
        assert "each read" not in note and "chose" not in note and "tf-cnn/resnet50" not in note, note


def test_a_named_suite_of_another_model_is_refused_in_one_line(tmp_path, capsys):
    root = _vgg16_tree(tmp_path / "ddl")
    with pytest.raises(UserError) as err:
        gather.tree_suite(root, "tf-cnn/resnet50")
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"--from {root}: ")
    assert (f"tf-cnn/resnet50 reads none of 3 sampled logs: they were written for another model "
            f"({root / '1n1g' / 'm_b2_fp32_1.log'} says 'Model: vgg16', not resnet50): --suite tf-cnn/vgg16 "
            "(or leave --suite out: auto)") in text, text
    assert gather.tree_suite(root, "tf-cnn/vgg16") == ("tf-cnn/vgg16", [])
    # the command line: exit 2, the one line, no traceback
    from dlperf_slurm.cli import main

    assert main(["collect", "--from", str(root), "--suite", "tf-cnn/resnet50", "--out", str(tmp_path / "out")]) == 2
    out = capsys.readouterr()
    said = [line for line in (out.out + out.err).splitlines() if line.strip()]
    assert len(said) == 1 and "written for another model" in said[0] and "Traceback" not in out.err, said


@pytest.mark.parametrize("path, model", [(TF_CNN / "8fb7907" / "tf_cnn_resnet20_digits_cpu_2epochs.log", "resnet20"),
                                         (TF_CNN / "2019-06" / "orion_inception3_imagenet_5epochs_2gpu.log",
                                          "inception3")], ids=["resnet20", "inception3"])
def test_a_model_no_other_suite_names_is_read_as_before(tmp_path, path, model):
    # resnet20, inception3: no tf-cnn suite of theirs, so tf-cnn/resnet50 reads them (the corpus runs them so)
    assert {"tf-cnn/resnet50", "tf-cnn/vgg16"} <= set(recognise.readers(path))
    assert recognise.written_for(path, "tf-cnn/resnet50") is None
    root = _tree(tmp_path / "t", {"1n2g/m_b64_fp32_1.log": path})
    assert gather.tree_suite(root, "tf-cnn/resnet50") == ("tf-cnn/resnet50", [])
    run, = drive.collect([gather.runs_from_tree(root, "tf-cnn/resnet50", 0, 1)], jobs=1).runs
    assert run.steps_seen > 0 and run.extra["log_model"] == model, (run.status, run.reason)
