"""Accuracy runs of ``oneflow/resnet50`` (``[measure] mode = "accuracy"``): the campaign's epochs of the OFRecord
ImageNet in ``data_dir`` (``train/`` and ``validation/`` part files), evaluated after every epoch as each program does
natively, by the program of the cell's launcher (flags checked against their sources):

- ``node_ips`` (DLPerf's form): OneFlow-Benchmark ``Classification/cnns/of_cnn_train_val.py`` (de4698a) with
  ``--num_epochs``, ``--val_data_dir`` (it validates after each epoch when given one: ``validation: epoch N, iter M,
  top_1: …, top_k: …``), ``--num_examples`` / ``--num_val_examples`` the data set's sizes;
- ``oneflow`` (``python -m oneflow.distributed.launch``, one process per GPU): Oneflow-Inc/models
  ``Vision/classification/image/resnet50/train.py`` (fc7cbf8d; ``models_workdir``/``models_script``), which replaced
  it, with ``--num-epochs``, ``--ofrecord-path`` (it evaluates after each epoch unless ``--skip-eval``: ``[rank:0]
  [eval], epoch: e/E, …, top1: …``; its logger stamps every line ``| <date>``: the time to target).

Neither has a flag that stops at a target: they train every epoch, and collect reads the time to target (or
NOT_CONVERGED) from their evaluations. An empty ``data_dir`` is of_cnn_train_val.py's synthetic data: refused.
"""

from __future__ import annotations

from typing import Any, Mapping

from dlperf_slurm.model.cell import Cell, Measure
from dlperf_slurm.suites import RUN_DIR

OPTIONS = {"train_examples": 1281167, "val_examples": 50000, "num_classes": 1000,
           "models_workdir": "/workspace/models/Vision/classification/image/resnet50", "models_script": "train.py",
           "graph": True, "accuracy_flags": []}
MINIMUM = {"train_examples": (1, "the training images of data_dir (an epoch)"),
           "val_examples": (1, "the held-out images of data_dir/validation"),
           "num_classes": (2, "the classes of the data set")}


def option_error(name: str, value: Any) -> str | None:
    if name == "accuracy_flags" and not all(isinstance(f, str) and f.startswith("-") for f in value):
        return "a list of the program's own flags, each one argument such as \"--lr=0.4\""
    return None


def problem(options: Mapping[str, Any]) -> tuple[str, str] | None:
    if not options["data_dir"]:
        return "options.data_dir", ("an accuracy run evaluates on real data, and an empty data_dir is "
                                    "of_cnn_train_val.py's synthetic data: set it to the OFRecord ImageNet (its "
                                    "train/ and validation/ part files)")
    return None


def argv(cell: Cell, measure: Measure, options: Mapping[str, Any], node_flags: list[str], every: int) -> list[str]:
    d, b = options["data_dir"], cell.batch_size
    if cell.launcher == "oneflow":
        out = [options["python"], f"{options['models_workdir']}/{options['models_script']}", f"--ofrecord-path={d}",
               f"--ofrecord-part-num={options['data_part_num']}", f"--num-devices-per-node={cell.gpus_per_node}",
               f"--num-nodes={cell.nodes}", f"--train-batch-size={b}", f"--val-batch-size={b}",
               f"--num-epochs={measure.epochs}", f"--samples-per-epoch={options['train_examples']}",
               f"--val-samples-per-epoch={options['val_examples']}", f"--print-interval={every}"]
        # no --num-classes: its model has ImageNet's 1000 outputs whatever it says
        out += (["--graph"] if options["graph"] else []) + (["--use-fp16"] if cell.precision == "amp" else [])
        return out + list(options["accuracy_flags"])
    out = [options["python"], f"{options['workdir']}/{options['script']}", f"--train_data_dir={d}/train",
           f"--train_data_part_num={options['data_part_num']}", f"--val_data_dir={d}/validation",
           f"--val_data_part_num={options['data_part_num']}", f"--num_examples={options['train_examples']}",
           f"--num_val_examples={options['val_examples']}", f"--num_classes={options['num_classes']}", *node_flags,
           "--optimizer=sgd", "--momentum=0.875", "--label_smoothing=0.1", f"--loss_print_every_n_iter={every}",
           f"--batch_size_per_device={b}", f"--val_batch_size_per_device={b}", f"--num_epochs={measure.epochs}"]
    if cell.precision == "amp":
        out += ["--use_fp16", "--channel_last=True", "--pad_output", "--fuse_bn_relu=True", "--fuse_bn_add_relu=True"]
    return out + [f"--log_dir={RUN_DIR}/log", f"--model_save_dir={RUN_DIR}/snapshots", "--model=resnet50",
                  *options["accuracy_flags"]]
