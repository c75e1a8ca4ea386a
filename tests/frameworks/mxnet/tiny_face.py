"""A tiny genuine MXNet program standing in for ArcFace MXNet's ``train.py`` (deepinsight/insightface
recognition/ArcFace, 863a7ea9 as DLPerf links it) in the real-cluster test of ``mxnet/insightface``
(tests/test_insightface_slurm.py), run as the suite runs the real one: under ``python -m
dlperf_slurm.workloads.pyconfig --module face_config`` (face_config.py stands in for config.py), one worker per node
started by the ``dmlc`` launcher (``--kvstore dist_device_sync``).

What it keeps of train.py: its argument parser (``--dataset/--network/--loss`` first, then ``generate_config``;
``--models-root --frequent --per-batch-size --kvstore`` (default ``default.kvstore``, 'device') ...), the contexts
from ``CUDA_VISIBLE_DEVICES`` (empty: the CPU), the models folder ``<models-root>/<network>-<loss>-<dataset>`` made if
missing, a symbolic ``mx.mod.Module`` trained by ``Module.fit(kvstore=...)`` with ``mx.callback.Speedometer(batch
size of this process, frequent)`` in its batch-end callback — MXNet's own Speedometer prints the lines the suite reads,
on every worker, each its own node's samples/s:

    INFO:root:Epoch[0] Batch [2-3]\tSpeed: 95.31 samples/sec\taccuracy=0.000000

— and the stop after ``config.max_steps`` (``sys.exit(0)`` once the callback's count passes it). The last layer is
``config.num_classes`` wide (``dataset.emore.num_classes`` after generate_config). The network is a small conv net on
random data (NDArrayIter), not ResNet-100 on faces_emore.

Unlike train.py, it creates the kvstore itself and hands it to ``Module.fit`` (train.py passes the name), so that each
worker can first print which of how many it is and what a push/pull of 1 over the dist kvstore gave (the proof that
both nodes joined one job); before ``sys.exit`` a dist worker waits for its pending pushes and meets the others at a
kvstore barrier (as tests/frameworks/mxnet/tiny_train.py: MXNet 1.9.1 workers can hang at exit otherwise).
"""

import argparse
import logging
import os
import socket
import sys

import mxnet as mx
from face_config import config, default, generate_config

logging.basicConfig(level=logging.INFO)


def parse_args():
    parser = argparse.ArgumentParser(description="Train face network")
    parser.add_argument("--dataset", default=default.dataset, help="dataset config")
    parser.add_argument("--network", default=default.network, help="network config")
    parser.add_argument("--loss", default=default.loss, help="loss config")
    args, _ = parser.parse_known_args()
    generate_config(args.network, args.dataset, args.loss)
    parser.add_argument("--models-root", default=default.models_root, help="root directory to save model.")
    parser.add_argument("--verbose", type=int, default=default.verbose)
    parser.add_argument("--lr", type=float, default=default.lr)
    parser.add_argument("--wd", type=float, default=default.wd)
    parser.add_argument("--mom", type=float, default=default.mom)
    parser.add_argument("--frequent", type=int, default=default.frequent)
    parser.add_argument("--per-batch-size", type=int, default=default.per_batch_size)
    parser.add_argument("--kvstore", type=str, default=default.kvstore)
    return parser.parse_args()


def train_net(args):
    ctx = []
    cvd = os.environ["CUDA_VISIBLE_DEVICES"].strip()
    if len(cvd) > 0:
        for i in range(len(cvd.split(","))):
            ctx.append(mx.gpu(i))
    if len(ctx) == 0:
        ctx = [mx.cpu()]
        print("use cpu")
    prefix_dir = os.path.join(args.models_root, "%s-%s-%s" % (args.network, args.loss, args.dataset))
    if not os.path.exists(prefix_dir):
        os.makedirs(prefix_dir)
    args.ctx_num = len(ctx)
    args.batch_size = args.per_batch_size * args.ctx_num

    kv = mx.kv.create(args.kvstore)
    dist = "dist" in args.kvstore
    total = 1
    if dist:
        kv.init("dlperf_probe", mx.nd.zeros((1,)))
        kv.push("dlperf_probe", mx.nd.ones((1,)))
        probe = mx.nd.zeros((1,))
        kv.pull("dlperf_probe", out=probe)
        total = int(probe.asscalar())
    print(f"dlperf-test: worker {kv.rank} of num_workers={kv.num_workers} on {socket.gethostname()}: "
          f"{args.kvstore} sum of 1 = {total}; config.num_workers {config.num_workers}; "
          f"models {prefix_dir}; num_classes {config.num_classes}", flush=True)

    data = mx.sym.Variable("data")
    body = mx.sym.Convolution(data, num_filter=8, kernel=(3, 3), stride=(2, 2), name="conv0")
    body = mx.sym.Activation(body, act_type="relu")
    body = mx.sym.Pooling(body, global_pool=True, pool_type="avg", kernel=(1, 1))
    body = mx.sym.FullyConnected(mx.sym.Flatten(body), num_hidden=config.emb_size, name="fc1")
    fc7 = mx.sym.FullyConnected(body, num_hidden=config.num_classes, name="fc7")
    sym = mx.sym.SoftmaxOutput(fc7, name="softmax")
    model = mx.mod.Module(context=ctx, symbol=sym)

    n = args.batch_size * (config.max_steps + 2)
    mx.random.seed(kv.rank)
    train_dataiter = mx.io.NDArrayIter(mx.nd.random.normal(shape=(n, 3, 32, 32)),
                                       mx.nd.random.randint(0, config.num_classes, shape=(n,)).astype("float32"),
                                       batch_size=args.batch_size, shuffle=False, last_batch_handle="discard")
    opt = mx.optimizer.SGD(learning_rate=args.lr, momentum=args.mom, wd=args.wd, rescale_grad=1.0 / args.ctx_num)
    _cb = mx.callback.Speedometer(args.batch_size, args.frequent)
    global_step = [0]

    def _batch_callback(param):
        global_step[0] += 1
        mbatch = global_step[0]
        _cb(param)
        if config.max_steps > 0 and mbatch > config.max_steps:
            if dist:
                mx.nd.waitall()
                kv._barrier()  # pylint: disable=protected-access
            print(f"dlperf-test: worker {kv.rank} done", flush=True)
            sys.exit(0)

    model.fit(train_dataiter, begin_epoch=0, num_epoch=999999, eval_metric="acc", kvstore=kv, optimizer=opt,
              initializer=mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2), allow_missing=True,
              batch_end_callback=_batch_callback)


if __name__ == "__main__":
    train_net(parse_args())
