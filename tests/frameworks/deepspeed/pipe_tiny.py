"""A tiny genuine DeepSpeed *pipeline* training program (DeepSpeed's PipelineEngine, as Megatron-DeepSpeed runs GPT
with pipeline parallelism): a stack of Linear+GELU layers cut into ``--stages`` pipeline stages by
``deepspeed.pipe.PipelineModule``, trained on random data with ``engine.train_batch`` for ``--steps`` steps. It prints
nothing of its own about speed: the throughput lines in its log are the engine's own, ``steps: N loss: L iter time
(s): T samples/sec: S`` (deepspeed/runtime/pipe/engine.py, every ``steps_per_print`` steps on global rank 0). Used to
record a real log of that line on CPU (gloo): tests/fixtures/real/DeepSpeed/v0.19.8-pipe/SOURCE.toml says how.
"""

import argparse
import json

import deepspeed
import torch
from deepspeed.pipe import PipelineModule
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--stages", type=int, default=2)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--hidden", type=int, default=256)
p.add_argument("--micro-batch", type=int, default=4)
p.add_argument("--accumulation", type=int, default=2)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--steps-per-print", type=int, default=2)
p.add_argument("--local_rank", type=int, default=-1)
args = p.parse_args()

deepspeed.init_distributed(dist_backend="gloo")
world = torch.distributed.get_world_size()
layers = []
for _ in range(args.layers):
    layers += [nn.Linear(args.hidden, args.hidden), nn.GELU()]
torch.manual_seed(1234)
model = PipelineModule(layers=layers, num_stages=args.stages, loss_fn=nn.MSELoss())
config = {"train_micro_batch_size_per_gpu": args.micro_batch, "gradient_accumulation_steps": args.accumulation,
          "train_batch_size": args.micro_batch * args.accumulation * (world // args.stages),
          "steps_per_print": args.steps_per_print, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
print("pipe_tiny config:", json.dumps(config), flush=True)
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
g = torch.Generator().manual_seed(0)


def batches():
    while True:
        x = torch.randn(args.micro_batch, args.hidden, generator=g)
        yield x, x.clone()


it = batches()
for _ in range(args.steps):
    engine.train_batch(data_iter=it)
