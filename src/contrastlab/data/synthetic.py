"""A generated, class-separable image dataset for fast tests (no files, fully deterministic).

Class ``c`` of ``C`` is a sinusoidal grating with orientation ``θ_c = c·π/(2C)`` (so horizontal flips, which map
``θ`` to ``−θ``, never turn one class into another) and spatial frequency ``2 + c mod 3`` cycles per image, with a
random phase, a random tint and pixel noise. Orientation survives crops, flips and colour jitter, so SimCLR
features and a linear probe separate the classes well above chance within a few steps.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from contrastlab.data.base import ImageDataset, register_dataset
from contrastlab.platform.errors import ConfigError


def make_synthetic(size: int = 256, num_classes: int = 4, image_size: int = 32, channels: int = 3,
                   seed: int = 0, noise: float = 0.15) -> ImageDataset:
    """Generate ``size`` images ``uint8 [size, channels, image_size, image_size]`` with balanced labels."""
    if num_classes < 2 or size < num_classes or channels not in (1, 3) or image_size < 4:
        raise ConfigError("synthetic: need num_classes >= 2, size >= num_classes, channels in {1, 3}, "
                          "image_size >= 4")
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(size) % num_classes
    labels = labels[torch.randperm(size, generator=g)]
    theta = labels.float() * math.pi / (2 * num_classes)                          # [N]
    freq = 2.0 + (labels % 3).float()                                               # [N]
    phase = torch.rand(size, generator=g) * 2 * math.pi                             # [N]
    coords = torch.linspace(0, 1, image_size)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")                         # [H, W]
    proj = xx[None] * torch.cos(theta)[:, None, None] + yy[None] * torch.sin(theta)[:, None, None]
    wave = 0.5 + 0.5 * torch.sin(2 * math.pi * freq[:, None, None] * proj + phase[:, None, None])  # [N,H,W]
    tint = 0.6 + 0.4 * torch.rand(size, channels, 1, 1, generator=g)               # [N,C,1,1]
    img = wave[:, None] * tint + noise * torch.randn(size, channels, image_size, image_size, generator=g)
    images = (img.clamp(0, 1) * 255).round().to(torch.uint8)
    return ImageDataset(images, labels.long(), num_classes, [f"class{c}" for c in range(num_classes)],
                        "synthetic", "")


@register_dataset("synthetic", splits=("train", "test"))
def load_synthetic(root: Path | None, split: str, download: bool = True, size: int | None = None,
                   num_classes: int = 4, image_size: int = 32, channels: int = 3, seed: int = 0) -> ImageDataset:
    """The synthetic dataset; ``train`` and ``test`` use different generator seeds."""
    n = size if size is not None else (512 if split == "train" else 256)
    ds = make_synthetic(n, num_classes, image_size, channels, seed=seed * 2 + (split == "test"))
    ds.split = split
    return ds
