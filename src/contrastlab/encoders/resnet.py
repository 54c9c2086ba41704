"""ResNet-18 / ResNet-50 (He et al. 2016) with the CIFAR stem used by SimCLR on small images.

CIFAR stem (SimCLR App. B.9; DCL/HCL/BCL code): the 7×7 stride-2 convolution and the max-pool are replaced by
one 3×3 stride-1 convolution, so 32×32 inputs keep a 4×4 map before global pooling. ``stem="imagenet"`` gives
the original stem for large images. ``width`` multiplies every channel count (SimCLR's ResNet-50 (2×) is
``width=2``). The encoder maps ``[B, in_channels, H, W]`` to ``[B, out_dim]`` (after global average pooling);
the classification layer is omitted.
"""

from __future__ import annotations

from torch import Tensor, nn

from contrastlab.platform.errors import ConfigError
from contrastlab.platform.registry import HParam


class BasicBlock(nn.Module):
    """Two 3×3 convolutions with an identity (or 1×1 projection) shortcut; expansion 1."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = _shortcut(cin, planes, stride)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """1×1 reduce, 3×3 (strided), 1×1 expand (×4) with a shortcut (ResNet v1.5: stride on the 3×3)."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.shortcut = _shortcut(cin, out, stride)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.shortcut(x))


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


_STEM = HParam("stem", "cifar", "cifar: 3×3 stride-1 conv, no max-pool; imagenet: 7×7 stride-2 conv + max-pool",
               "cifar | imagenet", "SimCLR App. B.9 (CIFAR stem)", lambda v: v in ("cifar", "imagenet"))
_WIDTH = HParam("width", 1.0, "channel multiplier of every layer (base widths 64-128-256-512)", "(0, 8]",
                "SimCLR §B (1× default)", lambda v: 0 < float(v) <= 8)


class ResNet(nn.Module):
    """A ResNet trunk without the classifier: ``[B, C, H, W] → [B, out_dim]``."""

    name = ""
    description = ""
    hyperparameters: tuple[HParam, ...] = (_WIDTH, _STEM)
    block: type[nn.Module] = BasicBlock
    layers: tuple[int, int, int, int] = (2, 2, 2, 2)

    def __init__(self, width: float = 1.0, stem: str = "cifar", in_channels: int = 3) -> None:
        super().__init__()
        if in_channels < 1:
            raise ConfigError(f"encoder '{self.name}': in_channels={in_channels} must be >= 1")
        base = max(1, round(64 * float(width)))
        if stem == "cifar":
            self.stem = nn.Sequential(nn.Conv2d(in_channels, base, 3, 1, 1, bias=False), nn.BatchNorm2d(base),
                                      nn.ReLU(inplace=True))
        else:
            self.stem = nn.Sequential(nn.Conv2d(in_channels, base, 7, 2, 3, bias=False), nn.BatchNorm2d(base),
                                      nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        stages, cin = [], base
        for i, n in enumerate(self.layers):
            planes = base * 2**i
            blocks = []
            for j in range(n):
                blocks.append(self.block(cin, planes, 2 if (j == 0 and i > 0) else 1))
                cin = planes * self.block.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.in_channels = in_channels
        self.out_dim = cin
        """Size of the representation (512·width for ResNet-18, 2048·width for ResNet-50)."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    @property
    def feature_dim(self) -> int:
        """Alias of :attr:`out_dim`."""
        return self.out_dim

    def forward(self, x: Tensor) -> Tensor:
        """``x``: ``[B, in_channels, H, W]`` → features ``[B, out_dim]``."""
        return self.pool(self.stages(self.stem(x))).flatten(1)


class ResNet18(ResNet):
    """ResNet-18 (BasicBlock ×[2, 2, 2, 2]) with a CIFAR stem; 512·width features."""

    name = "resnet18"
    description = "ResNet-18 with CIFAR stem (3×3 conv, no max-pool), width multiplier, 1 or 3 channels"
    block = BasicBlock
    layers = (2, 2, 2, 2)


class ResNet50(ResNet):
    """ResNet-50 (Bottleneck ×[3, 4, 6, 3]) with a CIFAR stem; 2048·width features (DCL/HCL/BCL encoder)."""

    name = "resnet50"
    description = "ResNet-50 with CIFAR stem (3×3 conv, no max-pool), width multiplier, 1 or 3 channels"
    block = Bottleneck
    layers = (3, 4, 6, 3)


ENCODERS = (ResNet18, ResNet50)
