"""A tiny genuine DeepSpeed training program standing in for Megatron-DeepSpeed's ``pretrain_gpt.py`` in the
real-cluster test (tests/test_deepspeed_slurm.py). Megatron-DeepSpeed is not on PyPI; DeepSpeed is. This program
takes pretrain_gpt.py's arguments (the ``deepspeed/gpt`` suite's argv), builds a small causal GPT-like model
(token + position embeddings, pre-LN transformer blocks, tied LM head) from ``--num-layers --hidden-size
--num-attention-heads --seq-length``, and trains it on random tokens for ``--train-iters`` steps through
``deepspeed.initialize`` and its own AdamW (as Megatron-DeepSpeed) with the suite's DeepSpeed config (``--deepspeed_config``: ZeRO stage, batch sizes,
``steps_per_print``, ``"log_level": "info"``). It prints nothing of its own about speed: the throughput lines in
its log are the DeepSpeed engine's own ``ThroughputTimer`` lines (``RunningAvgSamplesPerSec=...,
CurrSamplesPerSec=...``). Every rank prints one line saying which rank of how many it is, on which host, and what an
all_reduce of 1 over the job gave, so a test can see that every rank joined one job.
"""

import argparse
import os
import socket

import deepspeed
import torch
import torch.distributed as dist
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--num-layers", type=int, default=2)
p.add_argument("--hidden-size", type=int, default=64)
p.add_argument("--num-attention-heads", type=int, default=4)
p.add_argument("--seq-length", type=int, default=32)
p.add_argument("--micro-batch-size", type=int, default=2)
p.add_argument("--train-iters", type=int, default=10)
p.add_argument("--lr", type=float, default=1.5e-4)
p.add_argument("--weight-decay", type=float, default=1e-2)
p.add_argument("--vocab-size", type=int, default=512)  # the tiny model's own vocabulary (the GPT-2 BPE one is 50257)
p.add_argument("--local_rank", type=int, default=-1)  # the deepspeed launcher passes it
p = deepspeed.add_config_arguments(p)  # --deepspeed, --deepspeed_config
args, _ = p.parse_known_args()


class Block(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.attn = nn.MultiheadAttention(h, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h))

    def forward(self, x, mask):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, seq, h, layers, heads):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, h), nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(h)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1), persistent=False)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))
        for b in self.blocks:
            x = b(x, self.mask)
        return self.ln(x) @ self.tok.weight.t()  # tied LM head


deepspeed.init_distributed(dist_backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
one = torch.ones(1)
dist.all_reduce(one)
print(f"dlperf-test: rank {rank} of {world} on {socket.gethostname()}: all_reduce(1) = {one.item():.0f}", flush=True)

torch.manual_seed(1234)
model = TinyGPT(args.vocab_size, args.seq_length, args.hidden_size, args.num_layers, args.num_attention_heads)
# as Megatron-DeepSpeed: the program makes its own optimizer (the suite's DeepSpeed config names none) and hands it over
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
engine, _, _, _ = deepspeed.initialize(args=args, model=model, optimizer=optimizer)
g = torch.Generator().manual_seed(rank)
loss_fn = nn.CrossEntropyLoss()
for _ in range(args.train_iters):
    for _ in range(engine.gradient_accumulation_steps()):
        data = torch.randint(0, args.vocab_size, (engine.train_micro_batch_size_per_gpu(), args.seq_length + 1),
                             generator=g)
        logits = engine(data[:, :-1])
        loss = loss_fn(logits.reshape(-1, args.vocab_size).float(), data[:, 1:].reshape(-1))
        engine.backward(loss)
        engine.step()
dist.barrier()
