"""Feature extraction with a frozen encoder, in batches, without gradients."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn


@torch.no_grad()
def extract_features(
    encoder: nn.Module,
    images: Tensor,
    preprocess: Callable[[Tensor], Tensor] | None = None,
    batch_size: int = 512,
    device: torch.device | str | None = None,
    autocast: bool = False,
) -> Tensor:
    """Representations ``[N, d]`` (float32, on CPU) of ``images`` ``[N, C, H, W]`` under ``encoder.eval()``.

    ``preprocess`` maps a batch (on ``device``) to the encoder's input, e.g.
    ``lambda x: prepare(x, spec)`` from :mod:`contrastlab.data.augment`. The encoder's training mode is
    restored afterwards. ``autocast`` runs the encoder in bf16 on CUDA.
    """
    device = torch.device(device) if device is not None else next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    out = []
    try:
        for start in range(0, images.shape[0], batch_size):
            x = images[start:start + batch_size].to(device, non_blocking=True)
            if preprocess is not None:
                x = preprocess(x)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast and device.type == "cuda"):
                h = encoder(x)
            out.append(h.float().cpu())
    finally:
        encoder.train(was_training)
    return torch.cat(out) if out else torch.zeros(0, 0)
