"""ResNet-50 v1.5 in plain PyTorch (no torchvision).

v1.5 puts the stride-2 of a down-sampling bottleneck on its 3x3 conv (``conv2``), not on the first 1x1
conv as the original v1 does; this is NVIDIA's DeepLearningExamples model and torchvision's ``resnet50``.
At 1000 classes and width 64 it has exactly 25,557,032 parameters.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride, v1.5) -> 1x1 expand, plus the shortcut."""

    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_ch = width * self.expansion
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """ImageNet-style ResNet built from bottlenecks: 7x7/2 stem, 3x3/2 max-pool, four stages, avg-pool, fc."""

    def __init__(self, layers: Sequence[int] = (3, 4, 6, 3), num_classes: int = 1000, base_width: int = 64,
                 init_weights: bool = True) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, base_width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(base_width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        in_ch = base_width
        stages = []
        for i, blocks in enumerate(layers):
            width = base_width * 2**i
            stride = 1 if i == 0 else 2
            stage = [Bottleneck(in_ch, width, stride)]
            in_ch = width * Bottleneck.expansion
            stage += [Bottleneck(in_ch, width) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, num_classes)
        if init_weights:
            self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50(num_classes: int = 1000, base_width: int = 64, init_weights: bool = True) -> ResNet:
    """ResNet-50 v1.5; ``base_width`` < 64 gives the narrow variant used by ``--tiny``."""
    return ResNet((3, 4, 6, 3), num_classes=num_classes, base_width=base_width, init_weights=init_weights)
