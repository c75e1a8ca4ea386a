"""A small real dataset for accuracy runs on any CPU: scikit-learn's handwritten digits (UCI "Optical Recognition
of Handwritten Digits", 1,797 8x8 images of 10 classes, shipped inside the scikit-learn package: no download).

The images are scaled to [0, 1], resized to ``size`` x ``size`` (bilinear) and repeated to 3 channels, so the
ImageNet-shaped ResNet-50 trains on them unchanged. A fixed stratified split (20 % held out, ``random_state`` 0)
is the evaluation set on every rank; the training set is sharded over the ranks (rank r takes every
world-th sample of a per-epoch shuffle that all ranks draw from the same seed), ``drop_last`` as
``DistributedSampler`` does, so every rank runs the same number of steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.nn.functional as F

HELD_OUT = 0.2
CLASSES = 10


@dataclass
class Digits:
    train_x: torch.Tensor  # (N, 3, size, size) float32 in [0, 1], normalised
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor


def load(size: int = 32) -> Digits:
    """The split, as tensors on the CPU (ImportError without scikit-learn: ``pip install dlperf_slurm[workloads]``)."""
    from sklearn.datasets import load_digits  # noqa: PLC0415 (only accuracy runs need it)
    from sklearn.model_selection import train_test_split  # noqa: PLC0415

    d = load_digits()
    x_tr, x_te, y_tr, y_te = train_test_split(d.images, d.target, test_size=HELD_OUT, random_state=0,
                                              stratify=d.target)

    def images(a: Any) -> torch.Tensor:
        t = torch.tensor(a, dtype=torch.float32).unsqueeze(1) / 16.0  # pixel values are 0..16
        t = F.interpolate(t, size=(size, size), mode="bilinear", align_corners=False)
        return ((t - 0.5) / 0.5).repeat(1, 3, 1, 1).contiguous()

    return Digits(images(x_tr), torch.tensor(y_tr), images(x_te), torch.tensor(y_te))


def steps_per_epoch(n_train: int, batch_size: int, world_size: int) -> int:
    """Steps each rank takes per epoch: its shard (drop_last) in whole batches."""
    return (n_train // world_size) // batch_size


def batches(data: Digits, batch_size: int, rank: int, world_size: int, seed: int) -> Iterator[tuple[torch.Tensor,
                                                                                                 torch.Tensor]]:
    """Training batches of this rank, epoch after epoch, for ever (the caller counts steps)."""
    n = len(data.train_y)
    per_rank = n // world_size
    steps = per_rank // batch_size
    epoch = 0
    while True:
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        order = torch.randperm(n, generator=g)[: per_rank * world_size][rank::world_size]
        for k in range(steps):
            idx = order[k * batch_size:(k + 1) * batch_size]
            yield data.train_x[idx], data.train_y[idx]
        epoch += 1


def top_k(logits: torch.Tensor, labels: torch.Tensor, ks: tuple[int, ...] = (1, 5)) -> list[float]:
    """Fractions of samples whose label is among the ``k`` highest logits (torchvision's ``accuracy``)."""
    best = logits.topk(max(ks), dim=1).indices
    hit = best.eq(labels.view(-1, 1))
    return [hit[:, :k].any(dim=1).float().mean().item() for k in ks]


def evaluate(model: torch.nn.Module, data: Digits, device: torch.device, batch_size: int = 256
             ) -> tuple[float, float, int]:
    """Top-1 and top-5 on the held-out set (eval mode, no gradients), and how many samples; the model is put back
    in training mode."""
    was = model.training
    model.eval()
    outs = []
    with torch.no_grad():
        for i in range(0, len(data.test_y), batch_size):
            outs.append(model(data.test_x[i:i + batch_size].to(device)).float().cpu())
    model.train(was)
    top1, top5 = top_k(torch.cat(outs), data.test_y)
    return top1, top5, len(data.test_y)
