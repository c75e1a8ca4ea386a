"""A tiny genuine Tensorpack program standing in for tensorpack/benchmarks ``ResNet-MultiGPU/resnet-multigpu.py``
(GitHub-only, not packaged) in the real-cluster test (tests/test_tensorpack_slurm.py). It takes that script's
arguments (``--fake-location``, ``--variable-update``, ``--batch``, ``--use-fp16``, ``--use-xla-compile``), builds a
small conv net from tensorpack layers, feeds it through the same tensorpack input sources the real script picks per
fake location (DummyConstantInput, TensorInput, QueueInput over FakeData, TFDatasetInput), trains it with
SimpleTrainer on one tower (SyncMultiGPUTrainerReplicated / ParameterServer with several GPUs) and the callbacks
the real script registers that run without a GPU (ThroughputTracker with samples_per_step = batch x GPUs,
ProgressBar, RunUpdateOps). Everything it prints is tensorpack's own logger: ``Epoch N (global_step S) finished,
time:T.`` and the monitor's ``Throughput (samples/sec): X`` per epoch.

The real script hard-codes ``steps_per_epoch=50, max_epoch=10``; this one takes ``--steps-per-epoch`` and
``--max-epoch`` (defaults 10 and 3: a test-sized run) and 32x32 images. On CPU, TF_USE_LEGACY_KERAS=1 is needed.
"""

import argparse
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402
from tensorpack import (BatchNorm, Conv2D, DummyConstantInput, FakeData, FullyConnected, GlobalAvgPooling,  # noqa: E402
                        ModelDesc, ProgressBar, QueueInput, RunUpdateOps, SimpleTrainer,
                        SyncMultiGPUTrainerParameterServer, SyncMultiGPUTrainerReplicated, TFDatasetInput,
                        TensorInput, TrainConfig, argscope, launch_train_with_config, logger)
from tensorpack.callbacks import ThroughputTracker  # noqa: E402
from tensorpack.utils.gpu import get_nr_gpu  # noqa: E402

tf1 = tf.compat.v1
SIZE = 32

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=64)
p.add_argument("--use-fp16", action="store_true")
p.add_argument("--use-xla-compile", action="store_true")
p.add_argument("--fake-location", default="gpu",
               choices=["cpu", "gpu", "python", "python-queue", "python-dataset", "zmq-consume"])
p.add_argument("--variable-update", required=True, choices=["replicated", "parameter_server", "horovod"])
p.add_argument("--steps-per-epoch", type=int, default=10)
p.add_argument("--max-epoch", type=int, default=3)
args, _ = p.parse_known_args()


class Model(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([args.batch, SIZE, SIZE, 3], tf.uint8, "input"),
                tf.TensorSpec([args.batch], tf.int32, "label")]

    def optimizer(self):
        return tf1.train.GradientDescentOptimizer(0.01)

    def build_graph(self, image, label):
        x = tf.cast(image, tf.float32) * (2.0 / 255) - 1.0
        with argscope([Conv2D, BatchNorm, GlobalAvgPooling], data_format="NHWC"):
            x = Conv2D("conv0", x, 8, 3, strides=2, activation=tf.nn.relu)
            x = BatchNorm("bn0", Conv2D("conv1", x, 16, 3))
            x = GlobalAvgPooling("gap", tf.nn.relu(x))
        logits = FullyConnected("linear", x, 10)
        return tf.reduce_mean(tf1.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label),
                              name="cost")


def get_data(mode):
    shapes = [[args.batch, SIZE, SIZE, 3], [args.batch]]
    df = FakeData(shapes, 1000, random=False, dtype=["uint8", "int32"])
    if mode == "gpu":
        return DummyConstantInput(shapes)
    if mode == "cpu":
        def fn():
            with tf.device("/cpu:0"):
                img = tf.cast(tf1.random_uniform(shapes[0], maxval=255, dtype=tf.int32), tf.uint8)
                return [img, tf1.random_uniform(shapes[1], maxval=10, dtype=tf.int32)]
        return TensorInput(fn)
    if mode in ("python", "python-queue"):
        return QueueInput(df)
    if mode == "python-dataset":
        return TFDatasetInput(TFDatasetInput.dataflow_to_dataset(df, [tf.uint8, tf.int32]).repeat().prefetch(8))
    raise SystemExit(f"--fake-location {mode}: needs a zmq-serve producer, not part of this test program")


gpus = get_nr_gpu()
logger.info("Number of GPUs found: " + str(gpus))
towers = max(1, gpus)
if towers == 1:
    trainer = SimpleTrainer()
elif args.variable_update == "parameter_server":
    trainer = SyncMultiGPUTrainerParameterServer(towers, ps_device="cpu")
else:
    trainer = SyncMultiGPUTrainerReplicated(towers, average=False)
trainer.XLA_COMPILE = args.use_xla_compile
config = TrainConfig(data=get_data(args.fake_location), model=Model(),
                     callbacks=[ThroughputTracker(samples_per_step=args.batch * towers)],
                     extra_callbacks=[ProgressBar(), RunUpdateOps()],
                     steps_per_epoch=args.steps_per_epoch, max_epoch=args.max_epoch)
launch_train_with_config(config, trainer)
