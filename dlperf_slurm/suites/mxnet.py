"""MXNet: NVIDIA DeepLearningExamples ResNet-50 v1.5 (``ngc-mxnet/resnet50``), gluon-cv ResNet-50 v1b
(``mxnet-gluon/resnet50``) and gluon-nlp BERT-base pre-training (``mxnet-gluon/bert-base``) with DLPerf's flags.

Launch, as DLPerf ran them: ``horovodrun`` (NGC) or ``mpirun`` (gluon) start one Horovod rank per GPU; NGC's
``train.py`` also runs under ``srun`` (DLE ``runner --launcher slurm``: Horovod over Slurm's PMI, the way into a
pyxis image). The gluon suites also run under ``dmlc``, MXNet's own parameter-server mode (kvstore
``dist_sync``): gluon-nlp ``run_pretraining.py --comm_backend dist_sync_device``; gluon-cv's ImageNet scripts have
no kvstore mode (``train_horovod.py`` needs Horovod), so under dmlc ``script`` must name a program that opens a
dist kvstore itself and takes gluon-cv's flags (tests/frameworks/mxnet/tiny_train.py does).

Which lines count: every rank prints. NGC ``train.py`` (DLE e470c215, DLPerf's): every Horovod rank prints
``Epoch[0] Batch [i-i]\\tSpeed: X samples/sec`` where X is the *job's* throughput (total batch / that rank's own
step time), not the rank's share; DLPerf's extractor takes, per step, the **median over the ranks' lines** and
averages that over steps 20..120 -- neither a sum over ranks nor rank 0 x n. gluon-nlp prints
``[step N]\\t... throughput=122.0K tks/s ... latency=262.0 ms/batch`` on every rank: DLPerf turned each line into
samples/s as ``1000 / latency x global batch`` (the printed throughput is this rank's *tokens*/s, kept as
``extra.tokens_per_s``: the sum over ranks, mean over the window) and took the same per-step median. gluon-cv
(DLPerf's modified ``train_horovod.py``) prints ``Epoch[0] Batch[N]\\tSpeed: X samples/sec`` on rank 0 only, X
already the job's. Lines may be unlabelled (DLPerf's mpirun) or carry ``[1,r]<stdout>:`` / srun labels: all of a
step's lines go into its median; a line repeated for another metric (MXNet Speedometer) counts once per rank.

Published flavour: ``speed`` for all three. DLPerf's NGC MXNet README says it shows extract_mxnet_logs_time.py's
figures, but its per-repeat values are extract_mxnet_logs.py's: from millisecond stamps the time flavour can give
no 2n8g/4n8g value it lists (409600 / 11331.93 = 36.14560 s is no whole millisecond).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from dlperf_slurm.model.result import ParseContext, RunResult
from dlperf_slurm.suites import RUN_DIR, Suite, gluon_accuracy, mxnet_log, register

# DLPerf's NGC runner.sh environment (HOROVOD_* are read by Horovod, MXNET_* by MXNet).
_NGC_ENV = {"MXNET_UPDATE_ON_KVSTORE": "0", "MXNET_EXEC_ENABLE_ADDTO": "1", "MXNET_USE_TENSORRT": "0",
            "MXNET_GPU_WORKER_NTHREADS": "2", "MXNET_GPU_COPY_NTHREADS": "1", "MXNET_OPTIMIZER_AGGREGATION_SIZE": "54",
            "HOROVOD_CYCLE_TIME": "0.1", "HOROVOD_FUSION_THRESHOLD": "67108864", "HOROVOD_NUM_NCCL_STREAMS": "2",
            "MXNET_HOROVOD_NUM_GROUPS": "16", "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD": "999",
            "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD": "25"}


class _MXNet(Suite):
    imports = ("mxnet",)
    published = "speed"  # DLPerf's MXNet tables: the mean over steps of the per-step median of the ranks' speeds
    dlperf_window = (20, 100)

    def parse(self, lines: Iterable[str], ctx: ParseContext) -> RunResult:
        return mxnet_log.parse(lines, ctx, self.evaluations)


@register
class NgcResNet50(_MXNet):
    framework = "ngc-mxnet"
    model = "resnet50"
    description = ("NVIDIA DeepLearningExamples MxNet/Classification/RN50v1.5 train.py (NGC MXNet 20.03, DLE "
                   "e470c215) with DLPerf's flags: --batch-size is the global batch, --benchmark-iters = the window")
    sample_unit = "img/s"
    evaluations = ("mxnet",)  # train.py's fit.py before e470c215 (NGC 19.x) ran Module.fit with eval_data
    launcher = "horovodrun"
    launchers = ("horovodrun", "mpirun", "srun")
    # DLPerf published AMP with and without train.py's --amp (its dynamic loss scaling)
    axes = {"dynamic_loss_scaling": (True, False)}
    axis_defaults = {"dynamic_loss_scaling": True}
    options = {"workdir": "/workspace/rn50", "script": "train.py", "python": "python3",
               "data_dir": "/data/imagenet/train-val-recordio-passthrough", "data_backend": "dali-gpu"}

    def option_error(self, name: str, value: Any) -> str | None:
        if name == "data_backend" and value not in ("dali-gpu", "dali-cpu", "mxnet", "synthetic"):
            return "one of dali-gpu (DLPerf's), dali-cpu, mxnet, synthetic"
        return None

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        argv = [options["python"], f"{options['workdir']}/{options['script']}"]
        if cell.precision == "amp":
            argv += ["--dtype", "float16"] + (["--amp"] if cell.param("dynamic_loss_scaling", True) else [])
            argv += ["--fuse-bn-relu", "1", "--fuse-bn-add-relu", "1", "--input-layout", "NCHW", "--conv-layout",
                     "NHWC", "--batchnorm-layout", "NHWC", "--pooling-layout", "NHWC"]
        else:
            argv += ["--dtype", "float32", "--input-layout", "NHWC", "--fuse-bn-relu", "0", "--fuse-bn-add-relu", "0"]
        d = options["data_dir"]
        return argv + [
            "--arch", "resnetv15", "--num-layers", "50", "--num-classes", "1000", "--mode", "train",
            "--data-train", f"{d}/train.rec", "--data-train-idx", f"{d}/train.idx",
            "--gpus", ",".join(str(g) for g in range(cell.gpus_per_node)),
            "--batch-size", str(cell.batch_size * cell.devices),  # the global batch (train.py divides by hvd.size)
            "--image-shape", "3,224,224", "--lr", "0.256", "--lr-schedule", "cosine", "--optimizer", "sgd",
            "--mom", "0.875", "--wd", "3.0517578125e-05", "--label-smoothing", "0.1", "--kv-store", "horovod",
            "--data-backend", options["data_backend"],
            "--benchmark-iters", str(measure.warmup_steps + measure.measure_steps),  # DLPerf: 120 = 20 + 100
            "--no-metrics", "--disp-batches", "1", "--save-frequency", "0", "--num-epochs", "1"]

    def environment(self, cell, options: Mapping[str, Any]) -> dict[str, str]:
        return dict(_NGC_ENV)


class _Gluon(_MXNet):
    framework = "mxnet-gluon"
    launcher = "mpirun"
    launchers = ("mpirun", "horovodrun", "dmlc")


@register
class GluonResNet50(_Gluon):
    model = "resnet50"
    description = ("gluon-cv scripts/classification/imagenet train_horovod.py --model=resnet50_v1b (f9a8a28, as "
                   "DLPerf modified it: --mode, a per-batch Speed line, a stop after 120 batches) with DLPerf's flags")
    sample_unit = "img/s"
    evaluations = ("gluoncv", "mxnet")  # "[Epoch 0] validation: err-top1=...", "Epoch[0] Validation-accuracy=..."
    # steps_flag: the flag (``--max-batches``, say) of a script that stops after N batches; gluon-cv's own has none
    # (DLPerf's copy stopped at 120), so by default the run trains a whole epoch and the window is read from it.
    accuracy = True  # gluon-cv's train_imagenet.py on 1x1 cells, its options: suites.gluon_accuracy
    options = {"workdir": "/workspace/gluon-cv/scripts/classification/imagenet", "script": "train_horovod.py",
               "python": "python3", "rec_dir": "/data/imagenet/mxnet", "steps_flag": "", **gluon_accuracy.OPTIONS}
    option_minimum = gluon_accuracy.MINIMUM

    def option_error(self, name: str, value: Any) -> str | None:
        return gluon_accuracy.option_error(name, value)

    def accuracy_error(self, cell, options: Mapping[str, Any]) -> tuple[str, str] | None:
        return gluon_accuracy.problem(cell, options)

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        if measure.accuracy:
            return gluon_accuracy.argv(cell, measure, options)
        d = options["rec_dir"]
        argv = [options["python"], f"{options['workdir']}/{options['script']}", "--mode=hybrid",
                "--model=resnet50_v1b", "--use-rec", f"--rec-train={d}/train.rec", f"--rec-val={d}/val.rec",
                f"--batch-size={cell.batch_size}",  # per GPU (one Horovod rank per GPU)
                "--dtype=" + ("float16" if cell.precision == "amp" else "float32"),  # DLPerf's "fp16"
                "--log-interval=1", "--save-frequency=10000", "--lr=0.001", "--momentum=0.875", "--wd=0.000030518",
                "--num-epochs=1", "--warmup-epochs=1"]
        if options["steps_flag"]:
            argv.append(f"{options['steps_flag']}={measure.warmup_steps + measure.measure_steps}")
        return argv


@register
class GluonBert(_Gluon):
    model = "bert-base"
    description = ("gluon-nlp scripts/bert/run_pretraining.py (7b7bf60) bert_12_768_12, seq 128, 20 masked tokens, "
                   "DLPerf's flags; horovod, or kvstore dist_sync_device under dmlc")
    sample_unit = "seq/s"
    dlperf_window = (100, 100)  # DLPerf: 200 steps, the first 100 skipped
    # data: run_pretraining.py's --data (DLPerf: a comma-separated list of .npy files); data_eval: --data_eval,
    # which 7b7bf60 requires (DLPerf patched it optional and removed the final evaluation: leave it empty then)
    options = {"workdir": "/workspace/gluon-nlp/scripts/bert", "script": "run_pretraining.py", "python": "python3",
               "data": "/data/bert/mxnet/wiki_128_npy_part_0/*.npy", "data_eval": "", "synthetic": False}

    def program(self, cell, measure, options: Mapping[str, Any]) -> list[str]:
        gb = str(cell.batch_size * cell.devices)
        argv = [options["python"], f"{options['workdir']}/{options['script']}", "--model", "bert_12_768_12",
                "--dtype", "float16" if cell.precision == "amp" else "float32", "--warmup_ratio", "1"]
        if cell.launcher == "dmlc":  # one worker per node over its GPUs
            argv += ["--comm_backend", "dist_sync_device", "--gpus",
                     ",".join(str(g) for g in range(cell.gpus_per_node))]
        else:
            argv += ["--comm_backend", "horovod"]
        argv += ["--total_batch_size", gb, "--total_batch_size_eval", gb, "--accumulate", "1", "--lr", "1e-4",
                 "--max_seq_length", "128", "--max_predictions_per_seq", "20",
                 "--num_steps", str(measure.warmup_steps + measure.measure_steps), "--log_interval", "1",
                 "--ckpt_interval", "1000", "--ckpt_dir", f"{RUN_DIR}/ckpt_dir", "--no_compute_acc",
                 "--data", options["data"]]
        if options["data_eval"]:
            argv += ["--data_eval", options["data_eval"]]
        if options["synthetic"]:
            argv.append("--synthetic_data")
        return argv
