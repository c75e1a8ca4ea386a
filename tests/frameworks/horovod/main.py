"""A tiny genuine Horovod data-parallel program for the test cluster: it stands in for DeepLearningExamples'
TensorFlow 1 ConvNets ``main.py --mode=training_benchmark`` (TF1 cannot be installed here), takes that program's
flags, trains a small convolutional net with ``hvd.DistributedOptimizer`` (Horovod 0.28.1 for PyTorch, CPU: its
allreduce over MPI or Gloo) on synthetic images, and prints what the real program prints on rank 0: dllogger's
StdOutBackend lines of ``BenchmarkLoggingHook`` (``DLL <datetime> - (0, <0-based step>) total_ips : <ips> `` for
steps >= --warmup_steps, every --display_every) and the run summary ``() train_throughput``, with the JSON stream
(``DLLL {...}``) in ``--results_dir/--log_filename`` as the real program writes it. Every rank also prints one line
saying which rank of which world it is, on which node, and what a real allreduce across the world returned.
"""

import argparse
import json
import os
import socket
import sys
import time
from datetime import datetime

import horovod.torch as hvd
import torch
import torch.nn.functional as F


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="train_and_evaluate")
    p.add_argument("--batch_size", type=int, required=True)
    p.add_argument("--num_iter", type=int, default=1)
    p.add_argument("--iter_unit", default="epoch")
    p.add_argument("--warmup_steps", type=int, default=50)
    p.add_argument("--display_every", type=int, default=10)
    p.add_argument("--results_dir", default=".")
    p.add_argument("--log_filename", default="log.json")
    flags, _rest = p.parse_known_args()  # the rest of main.py's flags (lr, amp, xla ...) mean nothing here
    if flags.mode != "training_benchmark" or flags.iter_unit != "batch":
        print(f"this stand-in runs --mode=training_benchmark --iter_unit=batch only, got {flags.mode}/{flags.iter_unit}")
        return 2
    torch.set_num_threads(1)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    total = hvd.allreduce(torch.tensor([float(rank + 1)]), op=hvd.Sum).item()
    node = socket.gethostname()  # the node's own name (the test cluster's nodes have their own UTS namespaces);
    # not SLURMD_NODENAME: horovodrun's mpirun -x forwards the batch shell's (n1) to every rank
    print(f"dlperf-test: horovod rank {rank} of {size} (local rank {hvd.local_rank()}) on {node}: "
          f"allreduce(rank+1) = {total:g}", flush=True)

    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 16, 10))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01 * size),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(flags.batch_size, 3, 32, 32, generator=gen)
    y = torch.randint(0, 10, (flags.batch_size,), generator=gen)

    stream = None
    if rank == 0:
        os.makedirs(flags.results_dir, exist_ok=True)
        stream = open(os.path.join(flags.results_dir, flags.log_filename), "w")
        log(stream, "PARAMETER", vars(flags))
    global_batch, ips_sum, ips_n = flags.batch_size * size, 0.0, 0
    for step in range(flags.num_iter):
        t0 = time.time()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        ips = global_batch / (time.time() - t0)
        if rank == 0 and step >= flags.warmup_steps:
            ips_sum, ips_n = ips_sum + ips, ips_n + 1
            if step % flags.display_every == 0:
                log(stream, (0, step), {"total_ips": ips})
    if rank == 0:
        log(stream, (), {"train_throughput": ips_sum / max(ips_n, 1)})
        stream.close()
    return 0


def log(stream, step, data) -> None:
    """dllogger 1.0's StdOutBackend (default step and metric formats) and JSONStreamBackend, as main.py sets them."""
    now = datetime.now()
    if step == "PARAMETER":
        print(f"DLL {now} - PARAMETER " + " ".join(f"{k} : {v} " for k, v in data.items()), flush=True)
    else:
        print(f"DLL {now} - {step} " + " ".join(f"{k} : {v} " for k, v in data.items()), flush=True)
    stream.write("DLLL " + json.dumps(dict(timestamp=str(now.timestamp()), datetime=str(now.astimezone()),
                                           elapsedtime="0", type="LOG", step=step, data=data)) + "\n")


if __name__ == "__main__":
    sys.exit(main())
