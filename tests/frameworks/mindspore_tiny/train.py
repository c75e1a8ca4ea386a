"""A tiny, genuine MindSpore data-parallel training program that stands in for the model zoo's ResNet ``train.py``
(the mindspore/resnet50 suite's entry script) in the cluster test: it takes the same flags DLPerf passed
(``--run_distribute --device_num --batch_size --train_steps --data_sink_steps --dtype ...``), trains a small conv
net on synthetic data for ``train_steps`` steps, ``data_sink_steps`` per sink, and prints what the real program
prints: ``TimeMonitor`` (``Train epoch time: X ms, per step time: Y ms``) and ``LossMonitor`` (``epoch: E step: S,
loss is L``) lines. It also prints each rank's place in the job (``get_rank()`` / ``get_group_size()``).

Run under msrun (or mpirun), MindSpore on CPU needs ONEDNN_MAX_CPU_ISA=AVX2 on AVX-512 hosts (frameworks-cpu.md).
"""

import argparse
import ast
import socket

import numpy as np

import mindspore as ms
from mindspore import nn
from mindspore.communication import get_group_size, get_rank, init
from mindspore.train import LossMonitor, Model, TimeMonitor


def main() -> None:
    p = argparse.ArgumentParser(description="tiny MindSpore data-parallel stand-in for model_zoo resnet train.py")
    p.add_argument("--net", default="resnet50")
    p.add_argument("--dataset", default="imagenet2012")
    p.add_argument("--run_distribute", type=ast.literal_eval, default=False)
    p.add_argument("--device_num", type=int, default=1)
    p.add_argument("--dataset_path", default="")
    p.add_argument("--device_target", default="CPU", choices=("Ascend", "GPU", "CPU"))
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--train_steps", type=int, default=20)
    p.add_argument("--data_sink_steps", type=int, default=10)
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"])
    p.add_argument("--lr", type=float, default=0.01, help="a huge one makes the loss diverge (NaN/Inf test)")
    args = p.parse_args()

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device(args.device_target)
    ms.set_seed(1)
    rank, size = 0, 1
    if args.run_distribute:
        init()
        rank, size = get_rank(), get_group_size()
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True,
                                     device_num=size)
    print(f"tiny-dp: rank {rank} of group size {size} on host {socket.gethostname()}, device_num flag "
          f"{args.device_num}", flush=True)

    rng = np.random.default_rng(rank)
    n = args.batch_size * args.data_sink_steps
    images = rng.standard_normal((n, 3, 16, 16)).astype(np.float32)
    labels = rng.integers(0, 10, size=(n,)).astype(np.int32)
    ds = ms.dataset.NumpySlicesDataset({"image": images, "label": labels}, shuffle=False)
    ds = ds.batch(args.batch_size, drop_remainder=True)

    net = nn.SequentialCell(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(), nn.Dense(8 * 8 * 8, 10))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=args.lr, momentum=0.9)
    model = Model(net, loss_fn=loss, optimizer=opt, amp_level="O2" if args.dtype == "fp16" else "O0")
    # one "epoch" = one sink of data_sink_steps steps, as DLPerf's modified train.py ran it
    epochs = args.train_steps // args.data_sink_steps
    model.train(epochs, ds, callbacks=[TimeMonitor(data_size=args.data_sink_steps), LossMonitor()],
                dataset_sink_mode=True, sink_size=args.data_sink_steps)


if __name__ == "__main__":
    main()
