"""Batched SimCLR augmentation on the training device (plain torch; no per-image Python loop).

The pipeline of SimCLR (Chen et al. 2020, App. A) as used by DCL/HCL/BCL's code:

1. random resized crop (area scale ``crop_scale``, aspect ratio ``[3/4, 4/3]``) + horizontal flip (p = 0.5),
   done for the whole batch by one ``grid_sample`` call on a per-image crop/flip grid (:func:`crop_grid`);
2. colour jitter (brightness, contrast, saturation, hue) = (0.4, 0.4, 0.4, 0.1), applied with p = 0.8, with
   per-image factors; the order of the four operations is drawn once per batch (torchvision draws it per
   image) and the hue shift is a rotation of the YIQ chroma plane (torchvision shifts the HSV hue): the two
   simplifications that keep every operation a few whole-batch tensor passes;
3. grayscale with p = 0.2;
4. Gaussian blur (σ ∈ [0.1, 2], kernel ≈ 10 % of the image) with p = 0.5, only on larger images (≥ 64 px);
5. per-channel normalisation (folded with the grayscale step into one per-image affine channel map).

Single-channel images skip saturation, hue and grayscale (they have no colour). Stable API::

    aug = augment_for("fashion_mnist", image_size=28)         # or SimCLRAugment(AugmentSpec(...))
    x1 = aug(images_uint8, generator=g)                        # float [B, C, size, size], normalised
    views = aug.views(images_uint8, 4, generator=g)            # float [V, B, C, size, size]
    x = prepare(images_uint8, aug.spec)                        # evaluation: no augmentation, normalised
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LUMA = (0.299, 0.587, 0.114)


@dataclass(frozen=True)
class AugmentSpec:
    """Parameters of the SimCLR augmentation (defaults: SimCLR / DCL code on CIFAR-10)."""

    size: int = 32
    """Output side length in pixels."""
    crop_scale: tuple[float, float] = (0.08, 1.0)
    """Range of the crop area as a fraction of the image (torchvision/SimCLR default)."""
    crop_ratio: tuple[float, float] = (3 / 4, 4 / 3)
    """Range of the crop aspect ratio (sampled log-uniformly)."""
    flip_p: float = 0.5
    """Probability of a horizontal flip."""
    jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1)
    """Colour-jitter strengths: brightness, contrast, saturation, hue (SimCLR with strength 0.5 ≈ DCL code)."""
    jitter_p: float = 0.8
    """Probability of applying colour jitter."""
    gray_p: float = 0.2
    """Probability of converting to grayscale."""
    blur_p: float = 0.0
    """Probability of Gaussian blur (SimCLR uses 0.5 on ImageNet-sized images, none on CIFAR)."""
    blur_sigma: tuple[float, float] = (0.1, 2.0)
    """Range of the blur standard deviation in pixels."""
    mean: tuple[float, ...] = (0.5, 0.5, 0.5)
    """Per-channel mean subtracted after augmentation (length 1 or C)."""
    std: tuple[float, ...] = (0.5, 0.5, 0.5)
    """Per-channel standard deviation divided out after augmentation."""


DATASET_AUGMENT: dict[str, dict] = {
    "fashion_mnist": {"size": 28, "crop_scale": (0.2, 1.0), "mean": (0.2860,), "std": (0.3530,)},
    "cifar10": {"size": 32, "mean": (0.4914, 0.4822, 0.4465), "std": (0.2470, 0.2435, 0.2616)},
    "cifar100": {"size": 32, "mean": (0.5071, 0.4865, 0.4409), "std": (0.2673, 0.2564, 0.2762)},
    "stl10": {"size": 96, "mean": (0.4467, 0.4398, 0.4066), "std": (0.2603, 0.2566, 0.2713)},
}
"""Per-dataset parameters (image size, crop scale, blur, normalisation statistics of the training split)."""


def augment_spec_for(dataset: str, image_size: int | None = None, channels: int = 3, **overrides) -> AugmentSpec:
    """The :class:`AugmentSpec` for ``dataset``; unknown datasets get size ``image_size`` and mean/std 0.5.

    Blur is switched on (p = 0.5) for output sizes ≥ 64 px unless ``blur_p`` is overridden.
    """
    params = dict(DATASET_AUGMENT.get(dataset, {}))
    if image_size is not None and dataset not in DATASET_AUGMENT:
        params["size"] = image_size
    params.update({k: v for k, v in overrides.items() if v is not None})
    if "mean" not in params:
        params["mean"], params["std"] = (0.5,) * channels, (0.5,) * channels
    if "blur_p" not in params and params.get("size", 32) >= 64:
        params["blur_p"] = 0.5
    return AugmentSpec(**params)


def augment_for(dataset: str, image_size: int | None = None, channels: int = 3, **overrides) -> SimCLRAugment:
    """A :class:`SimCLRAugment` with the parameters of ``dataset`` (see :func:`augment_spec_for`)."""
    return SimCLRAugment(augment_spec_for(dataset, image_size, channels, **overrides))


def to_float(x: Tensor) -> Tensor:
    """``uint8`` images → float32 in ``[0, 1]``; float inputs are returned as float32."""
    return x.float().div_(255.0) if x.dtype == torch.uint8 else x.float()


def check_channels(spec: AugmentSpec, channels: int) -> None:
    """Refuse a mean/std with neither one value nor one per channel: a 1-channel batch with the default RGB
    statistics used to broadcast to 3 channels silently (an encoder built for 1 channel then failed far away)."""
    for name in ("mean", "std"):
        if len(getattr(spec, name)) not in (1, channels):
            raise ValueError(f"augment {name} has {len(getattr(spec, name))} values for {channels}-channel images; "
                             f"give one value or one per channel (augment_spec_for(dataset) picks the dataset's)")


def normalize(x: Tensor, spec: AugmentSpec) -> Tensor:
    """Subtract the spec's per-channel mean and divide by its std (``x`` float ``[B, C, H, W]``)."""
    check_channels(spec, x.shape[1])
    mean = torch.tensor(spec.mean, device=x.device, dtype=x.dtype).view(1, -1, 1, 1)
    std = torch.tensor(spec.std, device=x.device, dtype=x.dtype).view(1, -1, 1, 1)
    return (x - mean) / std


def prepare(x: Tensor, spec: AugmentSpec) -> Tensor:
    """Evaluation preprocessing: to float, resize to ``spec.size`` if needed, normalise. ``[B,C,H,W]``."""
    x = to_float(x)
    if x.shape[-1] != spec.size or x.shape[-2] != spec.size:
        x = F.interpolate(x, size=(spec.size, spec.size), mode="bilinear", align_corners=False, antialias=True)
    return normalize(x, spec)


def _uniform(n: int, lo: float, hi: float, g: torch.Generator | None, device: torch.device) -> Tensor:
    return lo + (hi - lo) * torch.rand(n, generator=g, device=device)


def crop_flip_theta(n: int, spec: AugmentSpec, g: torch.Generator | None, device: torch.device,
                    trials: int = 10) -> Tensor:
    """Affine matrices ``[n, 2, 3]`` of random resized crops + flips, in ``affine_grid``'s normalised coords.

    As torchvision: up to ``trials`` (area, log-ratio) draws per image, the first one whose box fits is used,
    otherwise the whole image. Box side lengths are fractions of the image side (width ``w``, height ``h``).
    """
    area = _uniform(n * trials, *spec.crop_scale, g, device).view(n, trials)
    logr = _uniform(n * trials, math.log(spec.crop_ratio[0]), math.log(spec.crop_ratio[1]), g, device)
    ratio = logr.view(n, trials).exp()
    w, h = (area * ratio).sqrt(), (area / ratio).sqrt()                             # [n, trials]
    ok = (w <= 1) & (h <= 1)
    first = torch.where(ok.any(1), ok.float().argmax(1), torch.zeros(n, dtype=torch.long, device=device))
    w = torch.where(ok.any(1), w.gather(1, first[:, None])[:, 0], torch.ones(n, device=device))
    h = torch.where(ok.any(1), h.gather(1, first[:, None])[:, 0], torch.ones(n, device=device))
    cx = (torch.rand(n, generator=g, device=device) * (1 - w) + w / 2) * 2 - 1   # box centre in [-1, 1]
    cy = (torch.rand(n, generator=g, device=device) * (1 - h) + h / 2) * 2 - 1
    flip = torch.where(torch.rand(n, generator=g, device=device) < spec.flip_p, -1.0, 1.0)
    theta = torch.zeros(n, 2, 3, device=device)
    theta[:, 0, 0], theta[:, 0, 2] = w * flip, cx
    theta[:, 1, 1], theta[:, 1, 2] = h, cy
    return theta


def crop_grid(theta: Tensor, size: int) -> Tensor:
    """Sampling grid ``[n, size, size, 2]`` of axis-aligned affine maps ``theta`` ``[n, 2, 3]``.

    Equals ``F.affine_grid(theta, ..., align_corners=False)`` for matrices without rotation/shear (crops and
    flips), but is built from two separable ramps instead of a batched matmul over every pixel.
    """
    base = (torch.arange(size, device=theta.device, dtype=theta.dtype) * 2 + 1) / size - 1      # pixel centres
    gx = theta[:, 0, 0, None] * base + theta[:, 0, 2, None]                                       # [n, S]
    gy = theta[:, 1, 1, None] * base + theta[:, 1, 2, None]                                       # [n, S]
    n = theta.shape[0]
    return torch.stack((gx[:, None, :].expand(n, size, size), gy[:, :, None].expand(n, size, size)), -1)


_RGB_TO_YIQ = ((0.299, 0.587, 0.114), (0.596, -0.274, -0.322), (0.211, -0.523, 0.312))


def hue_matrices(shift: Tensor) -> Tensor:
    """``[B, 3, 3]`` RGB matrices rotating the hue by ``shift`` turns (``shift ∈ [-0.5, 0.5]``).

    The rotation acts on the chroma plane (I, Q) of YIQ and keeps the luma Y, so one batched matrix product
    replaces a per-pixel RGB→HSV→RGB round trip (the one approximation of HSV hue jitter; ``shift = 0`` is
    exactly the identity). A positive shift turns the hue the other way round the colour wheel from HSV's (red
    towards magenta rather than yellow); the shift is drawn symmetrically, so the jitter's distribution is the same.
    """
    t = torch.tensor(_RGB_TO_YIQ, dtype=shift.dtype, device=shift.device)
    t_inv = torch.linalg.inv(t)
    angle = shift * 2 * math.pi
    cos, sin = angle.cos(), angle.sin()
    rot = torch.zeros(shift.shape[0], 3, 3, dtype=shift.dtype, device=shift.device)
    rot[:, 0, 0] = 1
    rot[:, 1, 1], rot[:, 1, 2], rot[:, 2, 1], rot[:, 2, 2] = cos, -sin, sin, cos
    return t_inv @ rot @ t


def saturation_matrices(factor: Tensor) -> Tensor:
    """``[B, 3, 3]`` matrices blending each image with its luma: ``s·x + (1 − s)·gray(x)`` (torchvision)."""
    luma = torch.tensor(_LUMA, dtype=factor.dtype, device=factor.device)
    eye = torch.eye(3, dtype=factor.dtype, device=factor.device)
    f = factor.view(-1, 1, 1)
    return f * eye + (1 - f) * luma.view(1, 1, 3).expand(1, 3, 3)


def mix_channels(x: Tensor, mats: Tensor, bias: Tensor | None = None) -> Tensor:
    """Per-image affine colour map ``out[:, i] = Σ_j mats[:, i, j] · x[:, j] + bias[:, i]``.

    ``x`` ``[B, C, H, W]``, ``mats`` ``[B, C, C]``, ``bias`` ``[B, C]`` or ``None``. Written as ``C²`` fused
    multiply-adds over whole channel planes, which is faster on CPU than a batched matmul of tiny matrices.
    """
    n, c = x.shape[:2]
    planes = []
    for i in range(c):
        o = x[:, 0] * mats[:, i, 0].view(n, 1, 1)
        for j in range(1, c):
            o.addcmul_(x[:, j], mats[:, i, j].view(n, 1, 1))
        if bias is not None:
            o.add_(bias[:, i].view(n, 1, 1))
        planes.append(o)
    return torch.stack(planes, 1)


def _apply_matrices(mats: Tensor, x: Tensor) -> Tensor:
    """Per-image colour matrices ``[B, 3, 3]`` applied to ``x`` ``[B, 3, H, W]``, clamped to [0, 1]."""
    return mix_channels(x, mats).clamp_(0, 1)


def _gray(x: Tensor) -> Tensor:
    """Luma ``[B, 1, H, W]`` (the image itself when it has one channel)."""
    if x.shape[1] == 1:
        return x
    w = torch.tensor(_LUMA, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    return (x * w).sum(1, keepdim=True)


def color_jitter(x: Tensor, spec: AugmentSpec, g: torch.Generator | None) -> Tensor:
    """Per-image colour jitter with probability ``spec.jitter_p`` (``x`` float ``[B, C, H, W]`` in [0, 1])."""
    n, dev = x.shape[0], x.device
    bs, cs, ss, hs = spec.jitter
    apply = torch.rand(n, generator=g, device=dev) < spec.jitter_p
    ident = torch.ones(n, device=dev)
    b = torch.where(apply, _uniform(n, max(0.0, 1 - bs), 1 + bs, g, dev), ident).view(n, 1, 1, 1)
    c = torch.where(apply, _uniform(n, max(0.0, 1 - cs), 1 + cs, g, dev), ident).view(n, 1, 1, 1)
    s = torch.where(apply, _uniform(n, max(0.0, 1 - ss), 1 + ss, g, dev), ident).view(n, 1, 1, 1)
    hue = torch.where(apply, _uniform(n, -hs, hs, g, dev), ident * 0)
    color = x.shape[1] == 3
    x = x.clone()                                   # the operations below work in place
    for op in torch.randperm(4, generator=g, device=dev).tolist():
        if op == 0 and bs > 0:
            x.mul_(b).clamp_(0, 1)
        elif op == 1 and cs > 0:
            gray_mean = _gray(x.mean((2, 3), keepdim=True))                          # [n, 1, 1, 1]
            x.mul_(c).add_(gray_mean * (1 - c)).clamp_(0, 1)
        elif op == 2 and ss > 0 and color:
            x = _apply_matrices(saturation_matrices(s.view(n)), x)
        elif op == 3 and hs > 0 and color:
            x = _apply_matrices(hue_matrices(hue.view(n)), x)
    return x


def gaussian_blur(x: Tensor, sigma: Tensor, kernel: int) -> Tensor:
    """Blur each image ``x[i]`` with its own ``sigma[i]`` (separable depthwise conv, reflect padding)."""
    n, c, h, w = x.shape
    r = kernel // 2
    t = torch.arange(-r, r + 1, device=x.device, dtype=x.dtype)
    k = torch.exp(-(t[None] ** 2) / (2 * sigma[:, None] ** 2))
    k = (k / k.sum(1, keepdim=True)).repeat_interleave(c, 0)                       # [n*c, kernel]
    y = F.pad(x.reshape(1, n * c, h, w), (r, r, r, r), mode="reflect")
    y = F.conv2d(y, k.view(n * c, 1, 1, kernel), groups=n * c)
    y = F.conv2d(y, k.view(n * c, 1, kernel, 1), groups=n * c)
    return y.view(n, c, h, w)


class SimCLRAugment(nn.Module):
    """The SimCLR augmentation for a whole batch at once, on the batch's device."""

    def __init__(self, spec: AugmentSpec | None = None, **kwargs) -> None:
        super().__init__()
        self.spec = replace(spec or AugmentSpec(), **kwargs)

    def forward(self, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Augment ``x`` (``uint8`` or float in [0, 1], ``[B, C, H, W]``) → normalised float ``[B, C, S, S]``."""
        spec, g = self.spec, generator
        x = to_float(x)
        n, ch, dev = x.shape[0], x.shape[1], x.device
        check_channels(spec, ch)
        grid = crop_grid(crop_flip_theta(n, spec, g, dev), spec.size)
        x = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
        x = color_jitter(x, spec, g)
        gray = torch.rand(n, generator=g, device=dev) < spec.gray_p if ch == 3 and spec.gray_p > 0 else None
        if spec.blur_p > 0:
            # blur is linear and the same for every channel, so it commutes with the grayscale mix below
            kernel = max(3, int(0.1 * spec.size) // 2 * 2 + 1)
            blur = torch.rand(n, generator=g, device=dev) < spec.blur_p
            sigma = _uniform(n, *spec.blur_sigma, g, dev)
            x = torch.where(blur.view(n, 1, 1, 1), gaussian_blur(x, sigma, kernel), x)
        if gray is None:
            return normalize(x, spec)
        # grayscale (p = gray_p) and normalisation folded into one per-image affine channel map
        mean = torch.tensor(spec.mean, device=dev, dtype=x.dtype).expand(ch)
        std = torch.tensor(spec.std, device=dev, dtype=x.dtype).expand(ch)
        luma = torch.tensor(_LUMA, device=dev, dtype=x.dtype).expand(3, 3)
        mats = torch.where(gray.view(n, 1, 1), luma, torch.eye(3, device=dev, dtype=x.dtype)) / std.view(1, 3, 1)
        return mix_channels(x, mats, (-mean / std).expand(n, 3))

    def views(self, x: Tensor, n_views: int = 2, generator: torch.Generator | None = None) -> Tensor:
        """``n_views`` independent augmentations of every image: ``[V, B, C, S, S]`` (one batched call)."""
        b = x.shape[0]
        out = self(x.repeat(n_views, 1, 1, 1), generator)
        return out.view(n_views, b, *out.shape[1:])

    def extra_repr(self) -> str:
        return repr(self.spec)


__all__ = ["DATASET_AUGMENT", "AugmentSpec", "SimCLRAugment", "augment_for", "augment_spec_for",
           "normalize", "prepare", "to_float"]
