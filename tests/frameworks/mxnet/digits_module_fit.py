"""A small genuine MXNet Module.fit training standing in for apache/mxnet's example/image-classification ``fit.py``
(the program DeepLearningExamples' MxNet fit.py grew from): ``mx.mod.Module.fit`` with a ``mx.callback.Speedometer``
and ``eval_data``, on a small real dataset, scikit-learn's handwritten digits (its shipped CSV, read with numpy), so
that MXNet itself prints its lines: the Speedometer's ``Epoch[e] Batch [a-b]\\tSpeed: X samples/sec\\taccuracy=...``
and, after each epoch, Module.fit's ``Epoch[e] Validation-accuracy=...`` and ``Epoch[e] Validation-top_k_accuracy_5=``.

    python digits_module_fit.py --digits .../sklearn/datasets/data/digits.csv.gz --epochs 4 --batch-size 32

Made the real-log fixture tests/fixtures/real/mxnet/1.9.1-module-fit (its SOURCE.toml says how).
"""

import argparse
import gzip
import logging

import mxnet as mx
import numpy as np

logging.basicConfig(level=logging.INFO)

p = argparse.ArgumentParser()
p.add_argument("--digits", required=True, help="scikit-learn's datasets/data/digits.csv.gz")
p.add_argument("--epochs", type=int, default=4)
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--seed", type=int, default=0)
args = p.parse_args()

mx.random.seed(args.seed)
np.random.seed(args.seed)
with gzip.open(args.digits, "rt") as f:
    table = np.loadtxt(f, delimiter=",")
x, y = table[:, :-1].astype("float32") / 16.0, table[:, -1].astype("float32")
order = np.random.permutation(len(y))
x, y = x[order], y[order]
n = 1500  # held out: the remaining 297 digits
train = mx.io.NDArrayIter(x[:n], y[:n], args.batch_size, shuffle=True)
val = mx.io.NDArrayIter(x[n:], y[n:], args.batch_size)

data = mx.sym.var("data")
net = mx.sym.FullyConnected(data, num_hidden=64)
net = mx.sym.Activation(net, act_type="relu")
net = mx.sym.FullyConnected(net, num_hidden=10)
net = mx.sym.SoftmaxOutput(net, name="softmax")

mod = mx.mod.Module(net, context=mx.cpu())
mod.fit(train, eval_data=val, eval_metric=["acc", mx.metric.TopKAccuracy(top_k=5)], optimizer="sgd",
        optimizer_params={"learning_rate": args.lr, "momentum": 0.9}, initializer=mx.init.Xavier(),
        num_epoch=args.epochs, batch_end_callback=mx.callback.Speedometer(args.batch_size, 5))
