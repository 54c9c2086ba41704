"""A small CNN for CPU smoke runs of the vision plugins (not from a paper; sized for seconds per epoch).

Four 3×3 conv layers (``width``, ``2·width``, ``4·width``, ``4·width`` channels) with normalisation and ReLU, a
2×2 max-pool after the 1st and 2nd, global average pooling, then a linear layer to ``feature_dim``.
``norm="none"``/``"group"`` avoid batch statistics (used by the DDP equivalence test, where per-rank
BatchNorm would differ from the single-process batch).
"""

from __future__ import annotations

from torch import Tensor, nn

from contrastlab.platform.registry import HParam


def _norm(kind: str, channels: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    if kind == "group":
        return nn.GroupNorm(min(8, channels), channels)
    return nn.Identity()


class SmallCNN(nn.Module):
    """``[B, in_channels, H, W] → [B, feature_dim]``; any input size ≥ 4 px."""

    name = "small_cnn"
    description = "4-layer CNN for CPU smoke runs (vision plugins); any input size, 1 or 3 channels"
    hyperparameters = (
        HParam("width", 32, "channels of the first conv layer (later layers 2× and 4×)", "[4, 512]",
               "smoke sizing", lambda v: 4 <= int(v) <= 512),
        HParam("feature_dim", 128, "size of the representation", "[2, 4096]", "smoke sizing",
               lambda v: 2 <= int(v) <= 4096),
        HParam("norm", "batch", "normalisation after each conv", "batch | group | none", "smoke sizing",
               lambda v: v in ("batch", "group", "none")),
    )

    def __init__(self, width: int = 32, feature_dim: int = 128, norm: str = "batch", in_channels: int = 3) -> None:
        super().__init__()
        w = int(width)
        chans = (w, 2 * w, 4 * w, 4 * w)
        layers: list[nn.Module] = []
        cin = in_channels
        for i, c in enumerate(chans):
            layers += [nn.Conv2d(cin, c, 3, 1, 1, bias=norm == "none"), _norm(norm, c), nn.ReLU(inplace=True)]
            if i in (0, 1):
                layers.append(nn.MaxPool2d(2))
            cin = c
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(cin, int(feature_dim))
        self.in_channels = in_channels
        self.out_dim = int(feature_dim)
        """Size of the representation."""

    @property
    def feature_dim(self) -> int:
        """Alias of :attr:`out_dim`."""
        return self.out_dim

    def forward(self, x: Tensor) -> Tensor:
        """``x``: ``[B, in_channels, H, W]`` → ``[B, feature_dim]``."""
        return self.fc(self.features(x))


ENCODERS = (SmallCNN,)
