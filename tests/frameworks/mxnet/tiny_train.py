"""A tiny genuine MXNet Gluon data-parallel training program standing in for gluon-cv's
``scripts/classification/imagenet/train_horovod.py`` in the real-cluster test (tests/test_mxnet_slurm.py).

It takes train_horovod.py's arguments (DLPerf's flags; unknown ones are ignored), trains a small conv net on CPU with
a ``dist_sync`` kvstore (MXNet's own parameter-server mode: the launcher sets DMLC_ROLE / DMLC_PS_ROOT_URI /
DMLC_PS_ROOT_PORT / DMLC_NUM_SERVER / DMLC_NUM_WORKER) and prints, on worker 0 as DLPerf's copy of
train_horovod.py did, gluon-cv's step line (the ``Epoch[%d] Batch[%d]\\tSpeed: %.2f samples/sec`` line that
train_horovod.py carries commented out and DLPerf's extractor reads; the speed is the job's: workers x batch x
log interval / seconds) through the root logger:

    INFO:root:Epoch[0] Batch[20]\tSpeed: 392.24 samples/sec

It stops after ``--max-batches`` batches (DLPerf's copy stopped after 120). Every worker also prints which rank of
how many it is and the sum a dist_sync push/pull of 1 gave, so a test can see that every worker joined one job.
Before leaving, the workers wait for every pending push/pull and meet at a kvstore barrier: without that, MXNet 1.9.1
workers sometimes hang at exit (MXNotifyShutdown waiting on the engine) when several jobs share the machine.
"""

import argparse
import logging
import os
import time

import mxnet as mx
from mxnet import autograd, gluon

logging.basicConfig(level=logging.INFO)

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=8)  # per device (per worker here), as train_horovod.py
p.add_argument("--dtype", default="float32")
p.add_argument("--log-interval", type=int, default=1)
p.add_argument("--lr", type=float, default=0.001)
p.add_argument("--momentum", type=float, default=0.875)
p.add_argument("--wd", type=float, default=0.0001)
p.add_argument("--max-batches", type=int, default=int(os.environ.get("DLPERF_TEST_STEPS", "10")))
p.add_argument("--kvstore", default="dist_sync")
args, _ = p.parse_known_args()

kv = mx.kv.create(args.kvstore)
rank, num_workers = kv.rank, kv.num_workers
PROBE = 999999  # an int key (the Trainer uses int keys 0..n-1; a kvstore takes one key type)
kv.init(PROBE, mx.nd.zeros((1,)))
kv.push(PROBE, mx.nd.ones((1,)))
probe = mx.nd.zeros((1,))
kv.pull(PROBE, out=probe)
print(f"dlperf-test: worker {rank} of num_workers={num_workers} on {os.uname().nodename}: "
      f"dist_sync sum of 1 = {probe.asscalar():.0f}", flush=True)

mx.random.seed(rank)
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Conv2D(8, 3, strides=2), gluon.nn.Activation("relu"), gluon.nn.GlobalAvgPool2D(),
        gluon.nn.Flatten(), gluon.nn.Dense(10))
net.initialize(mx.init.Xavier())
net.hybridize()
trainer = gluon.Trainer(net.collect_params(), "sgd",
                        {"learning_rate": args.lr, "momentum": args.momentum, "wd": args.wd}, kvstore=kv)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
x = mx.nd.random.normal(shape=(args.batch_size, 3, 32, 32))
y = mx.nd.random.randint(0, 10, shape=(args.batch_size,)).astype("float32")
btic = time.time()
for nbatch in range(1, args.max_batches + 1):
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(args.batch_size)
    loss.wait_to_read()
    if args.log_interval and nbatch % args.log_interval == 0:
        if rank == 0:
            logging.info("Epoch[%d] Batch[%d] Loss[%.3f]", 0, nbatch, loss.mean().asscalar())
            batch_speed = num_workers * args.batch_size * args.log_interval / (time.time() - btic)
            logging.info("Epoch[%d] Batch[%d]\tSpeed: %.2f samples/sec", 0, nbatch, batch_speed)
        btic = time.time()
mx.nd.waitall()  # every push and pull of the last step answered before the workers leave
kv._barrier()  # pylint: disable=protected-access
print(f"dlperf-test: worker {rank} done", flush=True)
