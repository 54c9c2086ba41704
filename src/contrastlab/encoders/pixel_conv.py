"""CURL's pixel encoder: a small conv net, a linear projection and LayerNorm.

Srinivas, Laskin & Abbeel, "CURL: Contrastive Unsupervised Representations for Reinforcement Learning" (2020),
appendix A (inherited from SAC-AE, Yarats et al. 2019): ``num_layers`` 3×3 convolutions with ``num_filters``
channels each (stride 2 for the first, 1 after), ReLU after each, then ``Linear -> LayerNorm`` to a
``latent_dim``-dimensional feature (50 in the paper). No tanh: CURL uses the normalised logits directly.

Inputs are float images scaled to ``[0, 1]`` or uint8 images, shape ``[B, in_channels, image_size, image_size]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastlab.platform.registry import HParam, int_in
from contrastlab.platform.task import MAX_WIDTH

MAX_LAYERS = 64
"""Most conv layers the registry accepts; the image size bounds them further (:func:`conv_output_size`)."""


def conv_output_size(image_size: int, num_layers: int) -> int:
    """Spatial side of the conv trunk output: ``(s - 3) // 2 + 1`` then ``- 2`` per further layer."""
    side = (image_size - 3) // 2 + 1
    return side - 2 * (num_layers - 1)


def curl_weight_init(module: nn.Module) -> None:
    """CURL/SAC-AE initialisation: orthogonal linear weights; delta-orthogonal convs (centre tap only).

    Apply with ``model.apply(curl_weight_init)``. Biases start at zero.
    """
    if isinstance(module, nn.Linear):
        nn.init.orthogonal_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Conv2d):
        nn.init.zeros_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
        mid = module.weight.shape[2] // 2
        with torch.no_grad():
            centre = torch.empty(module.weight.shape[0], module.weight.shape[1])
            nn.init.orthogonal_(centre, gain=nn.init.calculate_gain("relu"))
            module.weight[:, :, mid, mid] = centre


class MapLinear(nn.Linear):
    """``nn.Linear`` over a flattened ``[B, C, H, W]`` feature map that also takes the map itself.

    ``Linear(x.flatten(1))`` equals a convolution whose kernel ``weight.view(out, C, H, W)`` covers the whole map.
    On the CPU a map of at least :attr:`map_min_batch` rows goes that way: oneDNN reads a channels-last map where it
    lies (flattening it in ``C, H, W`` order costs a copy) and runs this skinny product faster than the BLAS GEMM
    (CURL's 32×35×35 → 50 head forward on a 2-core EPYC: 2.9 vs 6.6 ms at batch 128, 9.4 vs 53 ms at 512; the
    trunk and head forward + backward ≈ 8 % faster at 128). Smaller batches (acting: batch 1) pay more for the
    convolution's weight reorder than they save, and CUDA keeps its GEMM: both flatten and multiply as a plain
    ``Linear``. Parameters, initialisation and checkpoints are those of ``nn.Linear``; values agree to rounding.

    For a channels-last map the kernel is copied into the map's layout at each pass (0.3 ms for CURL's head): oneDNN
    then neither reorders an NCHW kernel nor returns its gradient in NCHW, which costs more (CURL's head, forward +
    backward at batch 128: 12.3 ms with the NCHW view, 8.3 ms with a channels-last kernel, before the copy). The
    copy is not cached: fused Adam and SB3's ``polyak_update`` (through ``.data``) change the weight without moving
    its version counter, so no cheap key tells when a cached copy is stale.
    """

    map_min_batch = 64
    """Fewest rows for the whole-map convolution (measured break-even on the 2-core CPU: 48-64 rows)."""

    def forward(self, x: Tensor) -> Tensor:
        """``[B, in_features]`` or a map ``[B, C, H, W]`` with ``C·H·W = in_features`` → ``[B, out_features]``."""
        if x.dim() == 4 and x.device.type == "cpu" and x.shape[0] >= self.map_min_batch:
            kernel = self.weight.view(self.out_features, *x.shape[1:])  # the NCHW view: no copy
            if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
                kernel = kernel.contiguous(memory_format=torch.channels_last)  # the map's layout (class docstring)
            return F.conv2d(x, kernel, self.bias).flatten(1)
        return super().forward(x.flatten(1))


class PixelConvEncoder(nn.Module):
    """CURL's encoder: ``num_layers`` × 3×3 conv (``num_filters``) → Linear → LayerNorm, output ``[B, latent_dim]``.

    ``conv`` (the trunk) and ``head`` (projection + LayerNorm) are separate submodules so that an actor can share
    the trunk with a critic while keeping its own head, as CURL does.
    """

    name = "pixel_conv"
    description = "CURL's pixel encoder: 4 conv x 32 filters, linear to 50 dims, LayerNorm (CURL/SAC-AE)."
    hyperparameters = (
        HParam("num_layers", 4, "number of 3x3 conv layers (first has stride 2; at most 21 for 84 px crops)",
               f"[1, {MAX_LAYERS}]", "CURL appendix A", check=int_in(1, MAX_LAYERS)),
        HParam("num_filters", 32, "channels of every conv layer", f"[1, {MAX_WIDTH}]", "CURL appendix A",
               check=int_in(1, MAX_WIDTH)),
        HParam("latent_dim", 50, "output (feature) dimension", f"[1, {MAX_WIDTH}]", "CURL appendix A",
               check=int_in(1, MAX_WIDTH)),
    )

    def __init__(
        self,
        num_layers: int = 4,
        num_filters: int = 32,
        latent_dim: int = 50,
        in_channels: int = 9,
        image_size: int = 84,
    ) -> None:
        """Build for ``[B, in_channels, image_size, image_size]`` inputs (9 = 3 stacked RGB frames)."""
        super().__init__()
        side = conv_output_size(image_size, num_layers)
        if side < 1:
            raise ValueError(f"image_size={image_size} is too small for {num_layers} conv layers")
        # in-place ReLU: a convolution's backward needs its input and weights, never its output, so the
        # activation may overwrite it (one allocation and one memory pass less per layer)
        layers: list[nn.Module] = [nn.Conv2d(in_channels, num_filters, 3, stride=2), nn.ReLU(inplace=True)]
        for _ in range(num_layers - 1):
            layers += [nn.Conv2d(num_filters, num_filters, 3, stride=1), nn.ReLU(inplace=True)]
        self.conv = nn.Sequential(*layers)
        self.head = nn.Sequential(MapLinear(num_filters * side * side, latent_dim), nn.LayerNorm(latent_dim))
        self.in_channels, self.image_size, self.latent_dim = in_channels, image_size, latent_dim
        self.apply(curl_weight_init)

    def forward_conv(self, x: Tensor) -> Tensor:
        """Conv trunk: ``[B, C, S, S]`` float in ``[0, 1]``, or uint8 in ``[0, 255]`` → the feature map
        ``[B, num_filters, s, s]`` (unflattened; :attr:`head` takes it as it is).

        uint8 images are cast once and the ``1/255`` scaling is folded into the first convolution's weights
        (``conv(x, W/255) = conv(x/255, W)``, equal to rounding; same gradients), which saves the division pass
        over the images.
        """
        if x.dtype == torch.uint8:
            first = self.conv[0]
            h = F.conv2d(x.float(), first.weight * (1.0 / 255.0), first.bias, first.stride, first.padding)
            return self.conv[1:](h)
        return self.conv(x)

    def forward(self, x: Tensor, detach_conv: bool = False) -> Tensor:
        """``[B, C, S, S]`` → ``[B, latent_dim]``; ``detach_conv`` stops gradients at the trunk output."""
        h = self.forward_conv(x)
        if detach_conv:
            h = h.detach()
        return self.head(h)


ENCODERS = (PixelConvEncoder,)
"""Encoders of this module, registered by ``contrastlab.encoders``."""
