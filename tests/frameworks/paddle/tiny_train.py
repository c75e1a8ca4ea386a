"""A tiny genuine Paddle data-parallel training program standing in for PaddleCV image_classification/train.py
in the real-cluster test (tests/test_paddle_slurm.py): it takes train.py's arguments (DLPerf's flags), trains a
small conv net for ``--max_iter`` steps with ``paddle.distributed.init_parallel_env()`` + ``paddle.DataParallel``
on CPU, and prints its step lines as train.py (release/2.0-beta on) does, through the ``utils.utility`` logger:

    INFO:utils.utility:[Pass 0, train batch 0] \tloss 53.09683, acc1 0.00000, acc5 0.00000, lr 0.10000, batch_cost 1.35808 sec, reader_cost 0.00002 sec, ips 94.25099 images/sec

(trainer 0 only, as train.py). Every rank also prints one line saying which rank of how many it is and what an
all_reduce of 1 over the job gave, so a test can see that every rank joined one job.
"""

import argparse
import logging
import os
import time

import numpy as np
import paddle
import paddle.distributed as dist

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger("utils.utility")

p = argparse.ArgumentParser()
p.add_argument("--batch_size", type=int, default=8)  # per node, as train.py: split over the node's processes
p.add_argument("--max_iter", type=int, default=10)
p.add_argument("--print_step", type=int, default=1)
p.add_argument("--image_shape", nargs="+", type=int, default=[3, 224, 224])
args, _ = p.parse_known_args()

paddle.set_device("cpu")
dist.init_parallel_env()
rank, world = dist.get_rank(), dist.get_world_size()
one = paddle.to_tensor([1.0])
dist.all_reduce(one)
print(f"dlperf-test: trainer {rank} of {world} on {os.uname().nodename}: all_reduce(1) = {one.item():.0f}", flush=True)

per_proc = max(1, args.batch_size // int(os.environ.get("PADDLE_LOCAL_SIZE", "1")))
paddle.seed(rank)
net = paddle.nn.Sequential(paddle.nn.Conv2D(3, 8, 3, stride=2), paddle.nn.ReLU(), paddle.nn.AdaptiveAvgPool2D(1),
                           paddle.nn.Flatten(), paddle.nn.Linear(8, 10))
model = paddle.DataParallel(net)
opt = paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.875, parameters=model.parameters())
x = paddle.randn([per_proc, 3, 32, 32])
y = paddle.randint(0, 10, [per_proc, 1])
for batch_id in range(args.max_iter):
    start = time.time()
    logits = model(x)
    loss = paddle.nn.functional.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    opt.clear_grad()
    acc1 = paddle.metric.accuracy(logits, y, k=1)
    acc5 = paddle.metric.accuracy(logits, y, k=5)
    cost = time.time() - start
    if rank == 0 and batch_id % args.print_step == 0:
        logger.info("[Pass {0}, train batch {1}] \tloss {2}, acc1 {3}, acc5 {4}, lr {5}, batch_cost {6:.5f} sec, "
                    "reader_cost {7:.5f} sec, ips {8:.5f} images/sec".format(
                        0, batch_id, "%.5f" % float(loss), "%.5f" % float(acc1), "%.5f" % float(acc5),
                        "%.5f" % 0.1, cost, 0.00001, args.batch_size / cost))
