"""A tiny genuine OneFlow data-parallel training program standing in for OneFlow-Benchmark's
Classification/cnns/of_cnn_train_val.py in the real-cluster test (tests/test_oneflow_slurm.py). It takes that
program's arguments (DLPerf's flags, plus --node_ips/--ctrl_port from the node_ips launcher) and, like it, runs as
ONE process per node that finds the other nodes by --node_ips: the first address is the rendezvous, --ctrl_port its
port. (of_cnn_train_val.py's single-client OneFlow is gone from OneFlow 0.9; this program joins the nodes through
OneFlow's eager environment instead: MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK set before ``import oneflow``.) Its
node index is the position of this node's address in --node_ips, or SLURM_NODEID when the addresses are not unique
(the test cluster's nodes all resolve to 127.0.0.1). On CPU it is one process per node: --gpu_num_per_node 1.
Started by ``python -m oneflow.distributed.launch`` (the ``oneflow`` launcher: one process per device, no
--num_nodes/--node_ips) it keeps the launcher's environment.

It trains a small conv net with nn.parallel.DistributedDataParallel for ceil(num_examples / global batch)
iterations and prints, on the first node, of_cnn_train_val.py's progress line (util.Metric) every
--loss_print_every_n_iter iterations:

    train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, samples/s: 3988.891 1597933942.9863544

Every process also prints which rank of how many it is, what an all_reduce of 1 over the job gave and the
--node_ips/--ctrl_port it was given.
"""

import argparse
import math
import os
import sys
import socket
import time

p = argparse.ArgumentParser()
p.add_argument("--num_nodes", type=int, default=1)
p.add_argument("--gpu_num_per_node", type=int, default=1)
p.add_argument("--node_ips", type=lambda s: [x.strip() for x in s.split(",")], default=["127.0.0.1"])
p.add_argument("--ctrl_port", type=int, default=50051)
p.add_argument("--batch_size_per_device", type=int, default=4)
p.add_argument("--num_examples", type=int, default=80)
p.add_argument("--loss_print_every_n_iter", type=int, default=1)
args, _ = p.parse_known_args()

ips = args.node_ips[: args.num_nodes]
launched = "RANK" in os.environ  # started by python -m oneflow.distributed.launch: it has set the job's environment
mine = {socket.gethostbyname(socket.gethostname())}
node = next((i for i, ip in enumerate(ips) if ip in mine), None) if len(set(ips)) == len(ips) else None
if node is None:
    node = int(os.environ.get("SLURM_NODEID", "0"))
# OneFlow groups ranks into machines by address: "nodes" that share one (the test cluster's) are one machine to it,
# where each needs its own local rank
local = node if len(set(ips)) < len(ips) else 0
if not launched:
    os.environ.update(MASTER_ADDR=ips[0], MASTER_PORT=str(args.ctrl_port), WORLD_SIZE=str(args.num_nodes),
                      RANK=str(node), LOCAL_RANK=str(local))

import oneflow as flow  # noqa: E402  (after the environment that joins the job)

rank, world = flow.env.get_rank(), flow.env.get_world_size()
one = flow.tensor([1.0])
flow.comm.all_reduce(one)
sys.stdout.flush()  # one write(2) for the whole line: the local ranks share the task's stdout (print's two writes interleave)
os.write(1, (f"dlperf-test: rank {rank} of {world} on {socket.gethostname()}: all_reduce(1) = {one.item():.0f}; "
             f"node_ips {','.join(ips)} ctrl_port {args.ctrl_port}\n").encode())

flow.manual_seed(rank)
net = flow.nn.Sequential(flow.nn.Conv2d(3, 8, 3, stride=2), flow.nn.ReLU(), flow.nn.AdaptiveAvgPool2d(1),
                         flow.nn.Flatten(), flow.nn.Linear(8, 10))
model = flow.nn.parallel.DistributedDataParallel(net)
opt = flow.optim.SGD(model.parameters(), lr=0.001, momentum=0.875)
bs = args.batch_size_per_device
x, y = flow.randn(bs, 3, 32, 32), flow.randint(0, 10, (bs,))
global_batch = bs * world  # one process per device
iters = math.ceil(args.num_examples / global_batch)
fmt = "{}: epoch {}, iter {}, loss: {:.6f}, top_1: {:.6f}, top_k: {:.6f}, samples/s: {:.3f}"
last, samples = time.time(), 0
for i in range(iters):
    loss = flow.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    samples += global_batch
    if (i + 1) % args.loss_print_every_n_iter == 0:
        value = loss.numpy().item()  # waits for the step
        now = time.time()
        if rank == 0:
            print(fmt.format("train", 0, i + 1, value, 0.0, 0.0, samples / (now - last)), time.time(), flush=True)
        last, samples = now, 0
