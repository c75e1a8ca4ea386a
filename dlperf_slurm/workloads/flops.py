"""Model FLOPs per sample and a small table of GPU peak TFLOP/s, for achieved TFLOP/s and MFU.

Training FLOPs per sample = 3 x forward FLOPs (backward ~ 2 x forward), the usual MFU convention. The forward
is counted analytically with forward hooks during one eval-mode forward pass of a single sample: convolutions
and linear layers, plus whatever a module reports through ``matmul_flops(inputs, output)`` (BERT's attention
score/context matmuls); a multiply-add counts 2, norms and activations are not counted. This matches
``torch.utils.flop_counter`` on the meta device (checked in the tests) without its ~2.5 s sympy import.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dlperf_slurm.workloads.peaks import PEAK_TFLOPS, peak_basis, peak_tflops  # noqa: F401  (re-exported)

TRAIN_FACTOR = 3

def forward_flops(model: nn.Module, inputs: tuple) -> int:
    """Forward FLOPs of ``model`` on ``inputs`` (one sample), counted by hooks in eval mode under no_grad; the
    model's train/eval mode is restored and nothing else changes (eval BatchNorm keeps its running stats)."""
    total = 0

    def count(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        nonlocal total
        if isinstance(module, nn.Conv2d):
            kh, kw = module.kernel_size
            total += 2 * output.numel() * (module.in_channels // module.groups) * kh * kw
        elif isinstance(module, nn.Linear):
            total += 2 * output.numel() * module.in_features
        if hasattr(module, "matmul_flops"):
            total += int(module.matmul_flops(args, output))

    was_training = model.training
    handles = [m.register_forward_hook(count) for m in model.modules()]
    try:
        model.eval()
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return total
