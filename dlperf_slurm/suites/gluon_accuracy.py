"""Accuracy runs of ``mxnet-gluon/resnet50`` (``[measure] mode = "accuracy"``): gluon-cv's own
``scripts/classification/imagenet/train_imagenet.py`` (dmlc/gluon-cv 5677756, its flags checked there), trained for
the campaign's epochs on the ImageNet RecordIO files in ``rec_dir``, validating after every epoch as it always does
(``[Epoch e] validation: err-top1=... err-top5=...``, read by :mod:`dlperf_slurm.parsing.evals`). It has no flag
that stops at a target: it trains every epoch, and collect reads the time to target (or NOT_CONVERGED) from those
lines (they carry no time of their own, so the time to target stays empty unless the log's lines are stamped).

Why train_imagenet.py and not the suite's train_horovod.py: DLPerf's copy of train_horovod.py stops after 120
batches, and gluon-cv's own (``--eval-frequency``) prints ``Epoch[e] Rank[r]\\tValidation-accuracy=...`` lines of
which no real log has been read yet. train_imagenet.py drives one node's GPUs from ONE process (``--num-gpus``),
while the suite's launchers (mpirun, horovodrun: one rank per GPU; dmlc: a worker that must open a dist kvstore,
which train_imagenet.py never does) would start one per GPU: its accuracy runs are 1x1 cells.
"""

from __future__ import annotations

from typing import Any, Mapping

from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.suites import RUN_DIR

SCRIPT = "train_imagenet.py"
OPTIONS = {"accuracy_script": SCRIPT, "device": "gpu", "num_training_samples": 1281167, "accuracy_flags": []}
MINIMUM = {"num_training_samples": (1, "train_imagenet.py's images per epoch (its lr schedule's batches per epoch)")}


def option_error(name: str, value: Any) -> str | None:
    if name == "device" and value not in ("gpu", "cpu"):
        return 'train_imagenet.py\'s device: "gpu" (--num-gpus = the cell\'s GPUs) or "cpu" (--num-gpus 0)'
    if name == "accuracy_flags" and not all(isinstance(f, str) and f.startswith("-") for f in value):
        return "a list of train_imagenet.py's own flags, each one argument such as \"--lr=0.4\""
    return None


def problem(cell: Cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
    """Why a cell cannot be an accuracy run: no RecordIO data, or a shape train_imagenet.py cannot be launched on."""
    if not options["rec_dir"]:
        return "options.rec_dir", ("an accuracy run evaluates on real data: set rec_dir to the folder of "
                                   "train.rec/.idx and val.rec/.idx")
    if cell.devices > 1:
        return "axes.devices", ("gluon-cv's train_imagenet.py drives a node's GPUs from one process, the suite's "
                                "launchers start one per GPU: give its accuracy runs 1x1 cells")
    return None


def argv(cell: Cell, measure: Measure, options: Mapping[str, Any]) -> list[str]:
    """train_imagenet.py's flags for ``measure.epochs`` epochs of ``rec_dir`` (its batch is per device)."""
    d = options["rec_dir"]
    gpus = cell.gpus_per_node if options["device"] == "gpu" else 0
    return [options["python"], f"{options['workdir']}/{options['accuracy_script']}", "--model=resnet50_v1b",
            "--mode=hybrid", "--use-rec", f"--rec-train={d}/train.rec", f"--rec-train-idx={d}/train.idx",
            f"--rec-val={d}/val.rec", f"--rec-val-idx={d}/val.idx", f"--batch-size={cell.batch_size}",
            f"--num-gpus={gpus}", "--dtype=" + ("float16" if cell.precision == "amp" else "float32"),
            f"--num-epochs={measure.epochs}", f"--num-training-samples={options['num_training_samples']}",
            "--log-interval=1", "--save-frequency=0", f"--save-dir={RUN_DIR}/params",
            f"--logging-file={RUN_DIR}/train_imagenet.log", *options["accuracy_flags"]]
