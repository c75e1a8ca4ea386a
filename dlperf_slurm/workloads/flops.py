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

TRAIN_FACTOR = 3

# Dense (no sparsity) peak TFLOP/s per GPU from NVIDIA's data sheets: fp32 = CUDA cores without tensor cores,
# tf32 / 16bit = tensor cores. Matched by substring of torch.cuda.get_device_name(), most specific first.
PEAK_TFLOPS: list[tuple[str, dict[str, float]]] = [
    ("H200", {"fp32": 67.0, "tf32": 494.7, "16bit": 989.4}),
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "16bit": 756.0}),
    ("H100", {"fp32": 66.9, "tf32": 494.7, "16bit": 989.4}),  # SXM5
    ("A100", {"fp32": 19.5, "tf32": 156.0, "16bit": 312.0}),
    ("A800", {"fp32": 19.5, "tf32": 156.0, "16bit": 312.0}),
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "16bit": 362.0}),
    ("A10", {"fp32": 31.2, "tf32": 62.5, "16bit": 125.0}),
    ("V100", {"fp32": 15.7, "16bit": 125.0}),  # SXM2; no TF32 / bf16 on Volta
    ("T4", {"fp32": 8.1, "16bit": 65.0}),
]


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


def peak_tflops(device_name: str, basis: str) -> float | None:
    """Peak TFLOP/s per GPU for ``basis`` in {"fp32", "tf32", "16bit"}; None when the GPU is not in the table."""
    for key, peaks in PEAK_TFLOPS:
        if key.lower() in device_name.lower():
            return peaks.get(basis)
    return None


def peak_basis(precision: str, tf32_enabled: bool) -> str:
    """Which peak a run is judged against: 16-bit tensor cores for amp/fp16/bf16, TF32 when enabled, else fp32."""
    if precision in ("amp", "fp16", "bf16"):
        return "16bit"
    return "tf32" if tf32_enabled else "fp32"
