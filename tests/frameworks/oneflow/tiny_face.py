"""A tiny genuine OneFlow data-parallel program standing in for oneflow_face's ``insightface_train.py`` in the
real-cluster test of ``oneflow/insightface`` (tests/test_insightface_slurm.py), run as the suite runs the real one:
under ``python -m dlperf_slurm.workloads.pyconfig --module face_config`` (face_config.py stands in for
sample_config.py), one process per node started by the ``node_ips`` launcher.

What it keeps of insightface_train.py (Oneflow-Inc/oneflow_face 997f8ff; deepinsight/insightface 79aacd2
recognition/oneflow_face), so that the launch is tested against the program's real constraints:
- its argument parser: ``--dataset/--network/--loss`` first (then ``generate_config``), the distribution flags
  ``--device_num_per_node --num_nodes --node_ips`` with the program's own ``str2list`` type for ``--node_ips``
  (it ``eval``s each element: an address is a SyntaxError), the training flags DLPerf's train_insightface.sh
  passes, and a strict ``parse_args()`` (an unknown flag such as ``--ctrl_port`` is an error);
- the node list from ``--node_ips``' default, ``default.node_ips`` (where DLPerf's run_multi_nodes.sh wrote the
  addresses; pyconfig puts them there from the launcher's flag), the assertion that there are at least
  ``--num_nodes`` of them, and the fixed control port 12138 (``flow.env.ctrl_port(12138)``);
- the assertion that ``--models_root`` is not a non-empty folder, then its creation (997f8ff);
- ``config.num_classes`` (``dataset.emore.num_classes`` after generate_config) as the width of the last layer, and
  ``callback_util.TrainMetric``'s line, printed by the first node for the job (global samples/s):
  ``train: iter 19, loss 16.53, throughput: 1935.417`` (step from 0).

OneFlow 0.9 has no single-client ``flow.env.machine``: the nodes join OneFlow's eager environment instead
(MASTER_ADDR = the first address, MASTER_PORT = 12138, WORLD_SIZE = --num_nodes, RANK = this node's position in the
list, or SLURM_NODEID where the addresses are not unique: the test cluster's nodes share one machine). The step is a
small conv net + FC under nn.parallel.DistributedDataParallel on CPU (``--device_num_per_node 1``). Every process also
prints its rank, the world size, an all_reduce of 1 over the job, the node list and its models root.
"""

import argparse
import os
import sys
import socket

from face_config import config, default, generate_config


def str2list(x):  # insightface_train.py's own
    x = [float(y) if type(eval(y)) == float else int(y) for y in x.split(",")]
    return x


def str2bool(v):
    if v.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if v.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError("Unsupported value encountered.")


def get_train_args():
    p = argparse.ArgumentParser(description="Flags for train")
    p.add_argument("--dataset", default=default.dataset, required=True)
    p.add_argument("--network", default=default.network, required=True)
    p.add_argument("--loss", default=default.loss, required=True)
    args, _ = p.parse_known_args()
    generate_config(args.network, args.dataset, args.loss)
    p.add_argument("--device_num_per_node", type=int, default=default.device_num_per_node)
    p.add_argument("--num_nodes", type=int, default=default.num_nodes)
    p.add_argument("--node_ips", type=str2list, default=default.node_ips)
    p.add_argument("--model_parallel", type=str2bool, nargs="?", default=default.model_parallel)
    p.add_argument("--partial_fc", type=str2bool, nargs="?", default=default.partial_fc)
    p.add_argument("--sample_ratio", type=float, default=default.sample_ratio)
    p.add_argument("--train_batch_size", type=int, default=64)
    p.add_argument("--train_unit", type=str, default=default.train_unit)
    p.add_argument("--train_iter", type=int, default=default.train_iter)
    p.add_argument("--models_root", type=str, default=default.models_root)
    p.add_argument("--log_dir", type=str, default=default.log_dir)
    p.add_argument("--loss_print_frequency", type=int, default=default.loss_print_frequency)
    p.add_argument("--iter_num_in_snapshot", type=int, default=default.iter_num_in_snapshot)
    p.add_argument("--use_fp16", type=str2bool, nargs="?", default=default.use_fp16)
    p.add_argument("--use_synthetic_data", type=str2bool, nargs="?", default=default.use_synthetic_data)
    p.add_argument("--validation_interval", type=int, default=default.validation_interval)
    return p.parse_args()


def is_file_or_non_empty_dir(path):
    return os.path.isfile(path) or (os.path.isdir(path) and len(os.listdir(path)) != 0)


args = get_train_args()
assert not is_file_or_non_empty_dir(args.models_root), \
    "Non-empty directory {} already exists!".format(args.models_root)
prefix_dir = os.path.join(args.models_root, "%s-%s-%s" % (args.network, args.loss, args.dataset))
os.makedirs(prefix_dir, exist_ok=True)

ips = [str(ip) for ip in args.node_ips]
if args.num_nodes > 1:
    assert args.num_nodes <= len(ips), "The number of nodes should not be greater than length of node_ips list."
    ips = ips[: args.num_nodes]
    mine = {socket.gethostbyname(socket.gethostname())}
    node = next((i for i, ip in enumerate(ips) if ip in mine), None) if len(set(ips)) == len(ips) else None
    if node is None:
        node = int(os.environ.get("SLURM_NODEID", "0"))
    local = node if len(set(ips)) < len(ips) else 0  # "nodes" on one machine need their own local rank
    os.environ.update(MASTER_ADDR=ips[0], MASTER_PORT="12138", WORLD_SIZE=str(args.num_nodes), RANK=str(node),
                      LOCAL_RANK=str(local))

import oneflow as flow  # noqa: E402  (after the environment that joins the job)

rank, world = flow.env.get_rank(), flow.env.get_world_size()
one = flow.tensor([1.0])
flow.comm.all_reduce(one)
sys.stdout.flush()  # one write(2) for the whole line: local ranks share the task's stdout (print's two writes interleave)
os.write(1, (f"dlperf-test: rank {rank} of {world} on {socket.gethostname()}: all_reduce(1) = {one.item():.0f}; "
             f"node_ips {','.join(ips)}; models_root {args.models_root}; num_classes {config.num_classes}\n").encode())

flow.manual_seed(rank)
net = flow.nn.Sequential(flow.nn.Conv2d(3, 8, 3, stride=2), flow.nn.ReLU(), flow.nn.AdaptiveAvgPool2d(1),
                         flow.nn.Flatten(), flow.nn.Linear(8, config.emb_size),
                         flow.nn.Linear(config.emb_size, config.num_classes))
model = flow.nn.parallel.DistributedDataParallel(net) if world > 1 else net
opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
bs = args.train_batch_size // world
x, y = flow.randn(bs, 3, 32, 32), flow.randint(0, config.num_classes, (bs,))

import time  # noqa: E402

fmt = "{}: iter {}, loss {}, throughput: {:.3f}"  # callback_util.TrainMetric
last = time.time()
for step in range(args.train_iter):
    loss = flow.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    value = loss.numpy().mean()  # waits for the step
    if (step + 1) % args.loss_print_frequency == 0:
        now = time.time()
        if rank == 0:
            print(fmt.format("train", step, value, args.train_batch_size * args.loss_print_frequency / (now - last)),
                  flush=True)
        last = now
