"""Accuracy runs of the suites whose programs need a GPU (``[measure] mode = "accuracy"``): their argv, checked
against the programs' own sources only, and the refusal of what they cannot run: ``hugectr/wdl`` (DLPerf's HugeCTR
wdl.py: an AUC every epoch of iterations) and ``mxnet/insightface`` (ArcFace MXNet: LFW verification every epoch of
batches). Their evaluation lines are read from real logs by tests/test_real_corpus.py."""

from __future__ import annotations

import pytest

from dlperf_slurm import suites
from dlperf_slurm.errors import UserError
from dlperf_slurm.matrix import loader

# ------------------------------------------------------------------------------------- hugectr/wdl (argv only)
WDL = """suite = "hugectr/wdl"
[axes]
devices = ["1x8"]
batch_size = [2048]
[options]
{options}
[measure]
mode = "accuracy"
epochs = 3
target = {{ metric = "auc", value = 0.78 }}
"""


def test_hugectr_wdl_accuracy_argv_evaluates_every_epoch_of_iterations(tmp_path):
    """DLPerf's HugeCTR/wdl/scripts/wdl.py (Oneflow-Inc/DLPerf c89430b: --max_iter, --eval_interval, --eval_batchs,
    --seed; its reader repeats the data set, so an epoch is iters_per_epoch iterations)."""
    p = tmp_path / "w.toml"
    p.write_text(WDL.format(options="iters_per_epoch = 4000\nmemwatch = false"))
    m = loader.load(p, site=False)
    argv = suites.get("hugectr/wdl").program(m.cells[0], m.measure, m.options["hugectr/wdl"])
    f = dict(zip(argv[2::2], argv[3::2]))
    assert (f["--max_iter"], f["--eval_interval"], f["--eval_batchs"]) == ("12000", "4000", "20")
    assert f["--batch_size"] == "16384" and f["--seed"] == suites.REPEAT


@pytest.mark.parametrize("options,key", [("memwatch = false", "options.iters_per_epoch"),
                                         ("iters_per_epoch = 10\neval_batches = 0", "options.eval_batches")])
def test_hugectr_wdl_accuracy_run_needs_its_epoch_and_evaluation(tmp_path, options, key):
    p = tmp_path / "w.toml"
    p.write_text(WDL.format(options=options))
    with pytest.raises(UserError) as e:
        loader.load(p, site=False)
    assert key in str(e.value), str(e.value)


# -------------------------------------------------------------------------------- mxnet/insightface (argv only)
FACE = """suite = "mxnet/insightface"
[axes]
devices = ["1x8"]
batch_size = [64]
parallel = ["{parallel}"]
[options]
{options}
[measure]
mode = "accuracy"
epochs = 16
target = {{ metric = "lfw", value = 0.99 }}
"""


@pytest.mark.parametrize("parallel,script", [("data", "train.py"), ("model", "train_parall.py")])
def test_arcface_accuracy_argv_verifies_every_epoch_of_batches(tmp_path, parallel, script):
    """deepinsight/insightface 7fadd420 recognition/arcface_mxnet: train.py / train_parall.py fit until
    config.max_steps batches and verify every --verbose batches (mbatch % verbose == 0, mbatch from 1)."""
    p = tmp_path / "f.toml"
    p.write_text(FACE.format(parallel=parallel, options="iters_per_epoch = 5686"))
    m = loader.load(p, site=False)
    argv = suites.get("mxnet/insightface").program(m.cells[0], m.measure, m.options["mxnet/insightface"])
    assert f"config.max_steps={16 * 5686}" in argv and argv[argv.index("--verbose") + 1] == "5686"
    assert argv[argv.index("--") + 1].endswith(script)


@pytest.mark.parametrize("parallel,options,key", [("data", "", "options.iters_per_epoch"),
                                                  ("partial_fc", "iters_per_epoch = 10", "axes.parallel")])
def test_arcface_accuracy_run_needs_its_epoch_and_no_partial_fc(tmp_path, parallel, options, key):
    p = tmp_path / "f.toml"
    p.write_text(FACE.format(parallel=parallel, options=options).replace('devices = ["1x8"]', 'devices = ["1x8"]\n'
                 + ('launcher = ["horovodrun"]' if parallel == "partial_fc" else "")))
    with pytest.raises(UserError) as e:
        loader.load(p, site=False)
    assert key in str(e.value), str(e.value)
