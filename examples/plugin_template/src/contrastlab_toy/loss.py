"""A margin (triplet) loss on contrastive logits: ``mean_i max(0, margin + max_j ℓ_ij − ℓ_i⁺)``.

It reads only the numerator positive (column 0) and the valid negatives, so it works with every sampler.
"""

from __future__ import annotations

import torch
from torch import nn

import contrastlab as cl


class MarginLoss(nn.Module):
    """Hinge on the hardest negative: max(0, margin + max_j ℓ_j − ℓ⁺) averaged over anchors."""

    name = "toy_margin"
    description = "Triplet-style hinge on the hardest negative logit (example third-party loss)."
    label_kinds: frozenset[str] = frozenset()
    hyperparameters = (
        cl.HParam(
            "margin",
            1.0,
            "Required gap between the positive and the hardest negative logit.",
            range="[0, inf)",
            source="example default",
            check=lambda v: v >= 0,
        ),
    )

    def __init__(self, margin: float = 1.0) -> None:
        super().__init__()
        self.margin = float(margin)

    def forward(self, batch: cl.ContrastiveBatch) -> torch.Tensor:
        """Mean hinge over anchors."""
        batch = batch.to_compute_dtype()
        neg = batch.neg_logits.masked_fill(~batch.valid_mask(), float("-inf"))  # [A, N]
        hardest = neg.max(dim=1).values  # [A]
        return torch.relu(self.margin + hardest - batch.pos_logits[:, 0]).mean()
