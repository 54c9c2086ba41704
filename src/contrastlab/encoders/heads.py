"""Projection head and the encoder+head wrapper of SimCLR (Chen et al. 2020, §2.1; DCL/HCL/BCL code).

The head is ``Linear(d, hidden, bias=False) → BatchNorm → ReLU → Linear(hidden, 128)``. The contrastive loss is
computed on the head's output ``z``; the head is discarded for evaluation, which uses the encoder's ``h``.
"""

from __future__ import annotations

from torch import Tensor, nn


class ProjectionHead(nn.Module):
    """MLP ``[B, in_dim] → [B, out_dim]`` (default 512 hidden units → 128-d, as in DCL's code)."""

    def __init__(self, in_dim: int, hidden_dim: int = 512, out_dim: int = 128, batch_norm: bool = True) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_dim, hidden_dim, bias=not batch_norm),
            nn.BatchNorm1d(hidden_dim) if batch_norm else nn.Identity(),
            nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, out_dim),
        )
        self.out_dim = out_dim

    def forward(self, h: Tensor) -> Tensor:
        """``h`` ``[B, in_dim]`` → ``z`` ``[B, out_dim]`` (not normalised; samplers use cosine similarity)."""
        return self.net(h)


class ContrastiveModel(nn.Module):
    """``encoder`` followed by ``head``; ``forward`` returns ``(h, z)``."""

    def __init__(self, encoder: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = head

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``x`` ``[B, C, H, W]`` → representation ``h`` ``[B, d]`` and projection ``z`` ``[B, 128]``."""
        h = self.encoder(x)
        return h, self.head(h)


def feature_dim(encoder: nn.Module) -> int:
    """Representation size of ``encoder`` (its ``out_dim`` or ``feature_dim`` attribute)."""
    for attr in ("out_dim", "feature_dim"):
        value = getattr(encoder, attr, None)
        if isinstance(value, int):
            return value
    raise AttributeError(f"encoder {type(encoder).__name__} has no out_dim/feature_dim attribute")
