"""Image augmentation for CURL, batched on the training device.

CURL (Srinivas et al. 2020, §4.4 and appendix A) renders 100×100 frames and takes random 84×84 crops, the same
crop for every frame of a stack; evaluation uses the centre crop. The reference code crops on the CPU with numpy
one sample at a time; here all crops of a batch are one indexing operation on a strided window view of the
batch, on whatever device the batch lives on (the GPU when present), and no per-sample Python loop runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    import numpy as np


def crop_offsets(batch: int, size: int, crop: int, device: torch.device | str,
                 generator: torch.Generator | None = None, height: int | None = None) -> tuple[Tensor, Tensor]:
    """Uniform top-left corners ``(top, left)``, each ``[batch]`` long: ``left`` in ``[0, size - crop]`` (``size``
    is the image width), ``top`` in ``[0, height - crop]`` (``height`` defaults to ``size``: square images, which
    draw exactly as before the argument existed)."""
    if height is not None and height != size:
        top = torch.randint(0, height - crop + 1, (batch,), device=device, generator=generator)
        return top, torch.randint(0, size - crop + 1, (batch,), device=device, generator=generator)
    offsets = torch.randint(0, size - crop + 1, (2, batch), device=device, generator=generator)
    return offsets[0], offsets[1]


def crop_at(images: Tensor, top: Tensor, left: Tensor, crop: int, index: Tensor | None = None) -> Tensor:
    """Crop ``images[index[i]]`` at ``(top[i], left[i])``: ``[B, C, H, W]`` → ``[K, C, crop, crop]``.

    ``index`` (``[K]`` long, default ``arange(B)``) selects which image each crop comes from, so several crops
    of the same image cost a single call. Works for any dtype (crop uint8 before converting to float).
    """
    # windows[b, c, i, j] is the crop×crop patch with top-left (i, j): [B, C, H-crop+1, W-crop+1, crop, crop]
    windows = images.unfold(2, crop, 1).unfold(3, crop, 1)
    if index is None:
        index = torch.arange(images.shape[0], device=images.device)
    return windows[index, :, top, left]  # advanced indices split by ':' → [K, C, crop, crop]


def random_crop(images: Tensor, crop: int, generator: torch.Generator | None = None) -> Tensor:
    """One random ``crop``×``crop`` crop per image (same crop across the stacked frames): ``[B, C, crop, crop]``."""
    check_crop(images, crop)
    top, left = crop_offsets(images.shape[0], images.shape[-1], crop, images.device, generator, images.shape[-2])
    return crop_at(images, top, left, crop)


def random_crops(images: Tensor, crop: int, n: int, generator: torch.Generator | None = None) -> list[Tensor]:
    """``n`` independent random crops of every image, as a list of ``n`` tensors ``[B, C, crop, crop]``."""
    check_crop(images, crop)
    B = images.shape[0]
    top, left = crop_offsets(B * n, images.shape[-1], crop, images.device, generator, images.shape[-2])
    index = torch.arange(B, device=images.device).repeat(n)  # [n·B]: crop k of image b sits at k·B + b
    return list(crop_at(images, top, left, crop, index).split(B))


def center_crop(images: Tensor, crop: int) -> Tensor:
    """The centre ``crop``×``crop`` window of ``[..., H, W]`` images (a view; evaluation uses it)."""
    check_crop(images, crop)
    top = (images.shape[-2] - crop) // 2
    left = (images.shape[-1] - crop) // 2
    return images[..., top:top + crop, left:left + crop]


def check_crop(images: Tensor | np.ndarray, crop: int) -> None:
    """Raise ``ValueError`` when ``crop`` exceeds the image height or width (of a tensor or a numpy frame ring)."""
    if crop > images.shape[-1] or crop > images.shape[-2]:
        raise ValueError(f"crop {crop} is larger than the images {tuple(images.shape[-2:])}")
