"""Batched SimCLR augmentation: shapes, ranges, randomness under a seed, and each operation's effect."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from contrastlab.data.augment import (
    AugmentSpec,
    SimCLRAugment,
    augment_for,
    augment_spec_for,
    color_jitter,
    crop_flip_theta,
    gaussian_blur,
    hue_matrices,
    prepare,
    saturation_matrices,
    to_float,
)


def _images(n=16, c=3, size=32, seed=0):
    return torch.randint(0, 256, (n, c, size, size), generator=torch.Generator().manual_seed(seed),
                         dtype=torch.uint8)


@pytest.mark.parametrize(("dataset", "channels", "size", "out"),
                         [("cifar10", 3, 32, 32), ("fashion_mnist", 1, 28, 28), ("stl10", 3, 96, 96),
                          ("synthetic", 3, 20, 20)])
def test_shapes_dtype_and_range(dataset, channels, size, out):
    aug = augment_for(dataset, image_size=size, channels=channels)
    x = aug(_images(8, channels, size), generator=torch.Generator().manual_seed(0))
    assert x.shape == (8, channels, out, out) and x.dtype == torch.float32
    spec = aug.spec
    lo = min((0 - m) / s for m, s in zip(spec.mean, spec.std, strict=False)) - 1e-5
    hi = max((1 - m) / s for m, s in zip(spec.mean, spec.std, strict=False)) + 1e-5
    assert lo <= float(x.min()) and float(x.max()) <= hi and torch.isfinite(x).all()


def test_seeded_randomness():
    aug = augment_for("cifar10")
    imgs = _images()
    a = aug(imgs, generator=torch.Generator().manual_seed(1))
    b = aug(imgs, generator=torch.Generator().manual_seed(1))
    c = aug(imgs, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.allclose(a, c)
    views = aug.views(imgs, 3, generator=torch.Generator().manual_seed(1))
    assert views.shape == (3, 16, 3, 32, 32)
    assert not torch.allclose(views[0], views[1])                   # views differ from each other


def test_identity_spec_only_normalises():
    spec = AugmentSpec(size=32, crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip_p=0.0, jitter_p=0.0,
                       gray_p=0.0, blur_p=0.0)
    imgs = _images()
    out = SimCLRAugment(spec)(imgs, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(out, prepare(imgs, spec), atol=1e-5)


def test_flip_only_mirrors():
    spec = AugmentSpec(size=32, crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip_p=1.0, jitter_p=0.0,
                       gray_p=0.0, blur_p=0.0)
    imgs = _images()
    out = SimCLRAugment(spec)(imgs)
    assert torch.allclose(out, prepare(imgs, spec).flip(-1), atol=1e-5)


def test_crop_boxes_respect_scale_and_image():
    spec = AugmentSpec(crop_scale=(0.08, 1.0))
    theta = crop_flip_theta(4000, spec, torch.Generator().manual_seed(0), torch.device("cpu"))
    w, h = theta[:, 0, 0].abs(), theta[:, 1, 1]
    area = w * h
    assert float(area.min()) >= 0.08 - 1e-6 and float(area.max()) <= 1 + 1e-6
    assert (theta[:, 0, 2].abs() + w <= 1 + 1e-5).all() and (theta[:, 1, 2].abs() + h <= 1 + 1e-5).all()
    flipped = (theta[:, 0, 0] < 0).float().mean()
    assert 0.45 < float(flipped) < 0.55


def test_grayscale_probability_and_effect():
    spec = AugmentSpec(size=32, crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip_p=0.0, jitter_p=0.0,
                       gray_p=1.0, mean=(0, 0, 0), std=(1, 1, 1))
    out = SimCLRAugment(spec)(_images())
    assert torch.allclose(out[:, 0], out[:, 1]) and torch.allclose(out[:, 1], out[:, 2])


def test_color_jitter_changes_images_and_hue_rotation():
    x = torch.rand(32, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    eye = hue_matrices(torch.zeros(2))
    assert torch.allclose(eye, torch.eye(3).expand(2, 3, 3), atol=1e-5)
    full = hue_matrices(torch.tensor([0.25]))[0]
    assert torch.allclose(full @ full @ full @ full, torch.eye(3), atol=1e-4)     # 4 quarter turns
    gray = torch.full((3,), 0.4)
    assert torch.allclose(full @ gray, gray, atol=1e-5)                            # grays keep their value
    spec = AugmentSpec(jitter_p=1.0)
    y = color_jitter(x, spec, torch.Generator().manual_seed(0))
    assert y.shape == x.shape and float(y.min()) >= 0 and float(y.max()) <= 1
    assert (y - x).abs().flatten(1).amax(1).min() > 1e-3          # every image changed
    none = color_jitter(x, AugmentSpec(jitter_p=0.0), torch.Generator().manual_seed(0))
    assert torch.allclose(none, x, atol=1e-5)


def test_blur_smooths_and_per_image_sigma():
    x = torch.zeros(2, 1, 15, 15)
    x[:, :, 7, 7] = 1.0
    y = gaussian_blur(x, torch.tensor([0.5, 2.0]), 7)
    assert torch.allclose(y.sum((1, 2, 3)), torch.ones(2), atol=1e-4)   # mass preserved
    assert float(y[1, 0, 7, 7]) < float(y[0, 0, 7, 7]) < 1.0              # larger sigma spreads more
    assert augment_spec_for("stl10").blur_p == 0.5 and augment_spec_for("cifar10").blur_p == 0.0


def test_overrides_and_unknown_dataset_defaults():
    spec = augment_spec_for("image_folder", image_size=64, channels=1)
    assert spec.size == 64 and spec.mean == (0.5,) and spec.blur_p == 0.5
    assert augment_spec_for("cifar10", size=24).size == 24


def test_blur_follows_the_crop_size_on_every_dataset():
    """Blur is for crops of 64 px or more (docs/simclr.md): STL-10 cropped to 32 px kept it, CIFAR-10 upscaled to
    96 px gets it, and an explicit blur_p wins either way."""
    assert augment_spec_for("stl10", size=32).blur_p == 0.0 and augment_spec_for("stl10").blur_p == 0.5
    assert augment_spec_for("cifar10", size=96).blur_p == 0.5
    assert augment_spec_for("stl10", size=32, blur_p=0.3).blur_p == 0.3


def test_saturation_matrix_matches_blend_with_luma():
    x = torch.rand(4, 3, 5, 5, generator=torch.Generator().manual_seed(0))
    f = torch.tensor([0.0, 0.5, 1.0, 1.4])
    luma = (0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1)
    expected = f.view(4, 1, 1, 1) * x + (1 - f.view(4, 1, 1, 1)) * luma
    got = torch.einsum("nij,njhw->nihw", saturation_matrices(f), x)
    assert torch.allclose(got, expected, atol=1e-6)


def test_crop_grid_equals_affine_grid_and_normalisation_folding():
    import torch.nn.functional as F

    from contrastlab.data.augment import crop_grid

    theta = crop_flip_theta(64, AugmentSpec(), torch.Generator().manual_seed(3), torch.device("cpu"))
    ref = F.affine_grid(theta, [64, 3, 17, 17], align_corners=False)
    assert torch.allclose(crop_grid(theta, 17), ref, atol=1e-6)
    # the folded grayscale+normalise map equals normalise() when no image is turned gray (gray_p tiny)
    spec = AugmentSpec(size=32, crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip_p=0.0, jitter_p=0.0,
                       gray_p=1e-9, mean=(0.1, 0.2, 0.3), std=(0.5, 0.6, 0.7))
    imgs = _images()
    assert torch.allclose(SimCLRAugment(spec)(imgs), prepare(imgs, spec), atol=1e-5)


def test_defaults_are_simclr_appendix_a():
    """SimCLR (Chen et al. 2020, App. A) with colour strength s = 0.5: crop area 0.08–1, ratio 3/4–4/3, flip 0.5,
    jitter (0.8s, 0.8s, 0.8s, 0.2s) with p = 0.8, grayscale p = 0.2, blur σ ∈ [0.1, 2] (off on 32 px CIFAR)."""
    spec = AugmentSpec()
    s = 0.5
    assert spec.size == 32 and spec.crop_scale == (0.08, 1.0)
    assert spec.crop_ratio == pytest.approx((0.75, 4 / 3)) and spec.flip_p == 0.5
    assert spec.jitter == pytest.approx((0.8 * s, 0.8 * s, 0.8 * s, 0.2 * s)) and spec.jitter_p == 0.8
    assert spec.gray_p == 0.2 and spec.blur_p == 0.0 and spec.blur_sigma == (0.1, 2.0)
    assert spec.mean == (0.5, 0.5, 0.5) and spec.std == (0.5, 0.5, 0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.size = 64                                                  # a shared spec cannot be changed


# mean/std of the training split (pixel values in [0, 1]) and the crop scales of docs/simclr.md
_DATASET_REFERENCE = {
    "fashion_mnist": (28, (0.2, 1.0), (0.2860,), (0.3530,)),
    "cifar10": (32, (0.08, 1.0), (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": (32, (0.08, 1.0), (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "stl10": (96, (0.08, 1.0), (0.4467, 0.4398, 0.4066), (0.2603, 0.2566, 0.2713)),
}


@pytest.mark.parametrize("dataset", sorted(_DATASET_REFERENCE))
def test_dataset_specs_match_published_statistics(dataset):
    size, scale, mean, std = _DATASET_REFERENCE[dataset]
    spec = augment_spec_for(dataset, image_size=size, channels=len(mean))
    assert spec.size == size and spec.crop_scale == scale
    assert spec.mean == pytest.approx(mean, abs=5e-5) and spec.std == pytest.approx(std, abs=5e-5)
    assert augment_spec_for(dataset, image_size=size + 8).size == size     # a known dataset keeps its own size


def test_unknown_dataset_defaults_to_half_and_32_px():
    spec = augment_spec_for("synthetic")
    assert spec.size == 32 and spec.mean == (0.5,) * 3 and spec.std == (0.5,) * 3 and spec.blur_p == 0.0
    assert augment_for("synthetic", 20).spec.std == (0.5,) * 3


def test_prepare_scales_uint8_resizes_and_normalises():
    spec = AugmentSpec(size=16, mean=(0.25, 0.5, 0.75), std=(0.5, 0.25, 0.125))
    imgs = _images(4, 3, 16)
    ref = (imgs.float() / 255 - torch.tensor(spec.mean).view(1, 3, 1, 1)) / torch.tensor(spec.std).view(1, 3, 1, 1)
    assert torch.allclose(prepare(imgs, spec), ref, atol=1e-5)
    assert float(to_float(torch.full((1,), 255, dtype=torch.uint8))) == 1.0
    # a 32×48 image becomes 16×16; a constant image stays constant through the resize
    flat = torch.full((2, 3, 32, 48), 51, dtype=torch.uint8)
    out = prepare(flat, spec)
    assert out.shape == (2, 3, 16, 16) and torch.allclose(out, ref.new_tensor(
        [(0.2 - m) / s for m, s in zip(spec.mean, spec.std, strict=True)]).view(1, 3, 1, 1).expand(2, 3, 16, 16))
    assert prepare(_images(2, 3, 32), spec).shape == (2, 3, 16, 16)
    for shape in ((2, 3, 16, 48), (2, 3, 48, 16)):                           # only one side differs
        assert prepare(torch.zeros(shape, dtype=torch.uint8), spec).shape == (2, 3, 16, 16)


def test_crop_area_and_log_ratio_are_uniform():
    """torchvision's RandomResizedCrop: area ~ U(scale), log(ratio) ~ U(log ratio range) (accepted boxes)."""
    n = 20000
    q = torch.linspace(0.05, 0.95, 19)
    # ratio fixed at 1: every box fits, so the area w·h is exactly the uniform draw
    theta = crop_flip_theta(n, AugmentSpec(crop_scale=(0.08, 1.0), crop_ratio=(1.0, 1.0)),
                            torch.Generator().manual_seed(0), torch.device("cpu"))
    area = theta[:, 0, 0].abs() * theta[:, 1, 1]
    assert torch.allclose(area.quantile(q), 0.08 + 0.92 * q, atol=0.02)
    # small fixed area: every box fits, so w/h is exactly the ratio draw
    spec = AugmentSpec(crop_scale=(0.1, 0.1), crop_ratio=(3 / 4, 4 / 3))
    theta = crop_flip_theta(n, spec, torch.Generator().manual_seed(1), torch.device("cpu"))
    w, h = theta[:, 0, 0].abs(), theta[:, 1, 1]
    lo, hi = math.log(3 / 4), math.log(4 / 3)
    assert torch.allclose((w / h).log().quantile(q), lo + (hi - lo) * q, atol=0.02)
    assert torch.allclose(w * h, torch.full((n,), 0.1), atol=1e-5)
    # the box centre is uniform over the positions where the box fits: (c ± w) ⊂ [-1, 1]
    theta = crop_flip_theta(n, AugmentSpec(), torch.Generator().manual_seed(2), torch.device("cpu"))
    for side, centre in ((theta[:, 0, 0].abs(), theta[:, 0, 2]), (theta[:, 1, 1], theta[:, 1, 2])):
        inner = side < 0.9                                               # boxes with room to move
        u = centre[inner] / (1 - side[inner])                            # ~ U(-1, 1)
        assert torch.allclose(u.quantile(q), -1 + 2 * q, atol=0.03)


def test_prepare_resize_keeps_pixel_centres_and_averages_areas():
    """Downscaling is antialiased (each output pixel averages its area) and maps pixel centres to pixel centres."""
    spec = AugmentSpec(size=8, mean=(0.0,), std=(1.0,))
    ramp = ((torch.arange(32) + 0.5) / 32).expand(1, 1, 32, 32)           # value = x position of the pixel centre
    out = prepare(ramp, spec)
    assert torch.allclose(out[0, 0, :, 1:-1], ((torch.arange(8) + 0.5) / 8)[1:-1].expand(8, 6), atol=1e-4)
    dots = torch.zeros(1, 1, 32, 32)
    dots[..., ::4, ::4] = 1.0                                            # one lit pixel in every 4×4 block
    assert abs(float(prepare(dots, spec).mean()) - 1 / 16) < 0.01


_YIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])   # textbook RGB→YIQ


def _jitter_pixels(pixels, strengths, n=4000, p=1.0, seed=0):
    """``n`` 3-channel images made of ``pixels`` (one per column), jittered with only ``strengths``: [n, P, 3]."""
    x = torch.tensor(pixels).T.reshape(1, 3, 1, -1).expand(n, 3, 1, len(pixels)).contiguous()
    y = color_jitter(x, AugmentSpec(jitter=strengths, jitter_p=p), torch.Generator().manual_seed(seed))
    return x[:, :, 0].transpose(1, 2), y[:, :, 0].transpose(1, 2)


def _uniform_quantiles(v, lo, hi, atol=0.02):
    q = torch.linspace(0.05, 0.95, 19)
    return torch.allclose(v.quantile(q), lo + (hi - lo) * q, atol=atol)


def test_jitter_is_applied_with_probability_jitter_p():
    x, y = _jitter_pixels([(0.5, 0.5, 0.5)], (0.4, 0.0, 0.0, 0.0), p=0.8)
    applied = (y - x).abs().amax((1, 2)) > 1e-6
    assert 0.77 < float(applied.float().mean()) < 0.83
    # and with the default probability: 0.8
    y = color_jitter(x.new_full((4000, 3, 2, 2), 0.5), AugmentSpec(), torch.Generator().manual_seed(1))
    assert 0.77 < float(((y - 0.5).abs().flatten(1).amax(1) > 1e-6).float().mean()) < 0.83


def test_brightness_multiplies_by_a_uniform_factor():
    x, y = _jitter_pixels([(0.5, 0.5, 0.5)], (0.4, 0.0, 0.0, 0.0))
    factor = y[:, 0, 0] / 0.5
    assert torch.allclose(y, factor.view(-1, 1, 1) * x, atol=1e-6) and _uniform_quantiles(factor, 0.6, 1.4)


def test_contrast_blends_with_the_mean_luma():
    """torchvision adjust_contrast: c·x + (1 − c)·mean(gray(x)), one mean luma per image."""
    pixels = [(0.7, 0.5, 0.4), (0.5, 0.4, 0.45)]
    x, y = _jitter_pixels(pixels, (0.0, 0.4, 0.0, 0.0))
    m = float((_YIQ[0] * torch.tensor(pixels)).sum(1).mean())
    c = (y[:, 0, 0] - y[:, 1, 0]) / (x[:, 0, 0] - x[:, 1, 0])
    assert torch.allclose(y, c.view(-1, 1, 1) * x + (1 - c.view(-1, 1, 1)) * m, atol=1e-5)
    assert _uniform_quantiles(c, 0.6, 1.4)


def test_saturation_blends_with_the_pixel_luma():
    x, y = _jitter_pixels([(0.6, 0.5, 0.4)], (0.0, 0.0, 0.4, 0.0))
    luma = float(_YIQ[0] @ torch.tensor([0.6, 0.5, 0.4]))
    s = (y[:, 0, 0] - y[:, 0, 1]) / 0.1
    assert torch.allclose(y, s.view(-1, 1, 1) * x + (1 - s.view(-1, 1, 1)) * luma, atol=1e-5)
    assert _uniform_quantiles(s, 0.6, 1.4)


def test_hue_rotates_the_yiq_chroma_by_a_uniform_angle():
    x, y = _jitter_pixels([(0.6, 0.5, 0.4)], (0.0, 0.0, 0.0, 0.1))
    yiq_x, yiq_y = x[:, 0] @ _YIQ.T, y[:, 0] @ _YIQ.T
    assert torch.allclose(yiq_y[:, 0], yiq_x[:, 0], atol=1e-5)                                  # luma kept
    assert torch.allclose(yiq_y[:, 1:].norm(dim=1), yiq_x[:, 1:].norm(dim=1), atol=1e-5)        # chroma kept
    turns = (torch.atan2(yiq_y[:, 2], yiq_y[:, 1]) - torch.atan2(yiq_x[:, 2], yiq_x[:, 1])) / (2 * math.pi)
    turns = (turns + 0.5) % 1 - 0.5
    assert _uniform_quantiles(turns.abs(), 0.0, 0.1, atol=0.004) and 0.47 < float((turns > 0).float().mean()) < 0.53


def test_contrast_output_is_clamped():
    _, y = _jitter_pixels([(0.95, 0.95, 0.95), (0.05, 0.05, 0.05)], (0.0, 0.4, 0.0, 0.0))
    assert float(y.max()) == 1.0 and float(y.min()) == 0.0


def test_every_operation_acts_when_several_are_on():
    """Brightness scales the mean, contrast the spread about it; contrast scales luma deviation and chroma alike,
    saturation only the chroma, hue only its angle. Each must act in (almost) every image when both are on."""
    x, y = _jitter_pixels([(0.4, 0.4, 0.4), (0.6, 0.6, 0.6)], (0.4, 0.4, 0.0, 0.0), n=1000)
    assert float(((y.mean((1, 2)) - 0.5).abs() > 1e-4).float().mean()) > 0.99                # brightness acted
    assert float(((y[:, 0, 0] / y[:, 1, 0] - 2 / 3).abs() > 1e-4).float().mean()) > 0.99    # contrast acted
    pixels = [(0.6, 0.5, 0.4), (0.45, 0.5, 0.55)]
    x, y = _jitter_pixels(pixels, (0.0, 0.4, 0.4, 0.0), n=1000)
    yiq_x, yiq_y = x @ _YIQ.T, y @ _YIQ.T                                                  # [n, 2, 3]
    m = yiq_x[:, :, 0].mean(1, keepdim=True)
    c = (yiq_y[:, :, 0] - m) / (yiq_x[:, :, 0] - m)                                        # luma spread ratio
    cs = yiq_y[:, 0, 1:].norm(dim=1) / yiq_x[:, 0, 1:].norm(dim=1)                         # chroma ratio = c·s
    assert float(((c[:, 0] - 1).abs() > 1e-3).float().mean()) > 0.99                        # contrast acted
    assert float(((cs / c[:, 0] - 1).abs() > 1e-3).float().mean()) > 0.99                   # saturation acted
    x, y = _jitter_pixels([(0.6, 0.5, 0.4)], (0.0, 0.0, 0.4, 0.1), n=1000)                # saturation · hue
    chroma_x, chroma_y = (x[:, 0] @ _YIQ.T)[:, 1:], (y[:, 0] @ _YIQ.T)[:, 1:]
    assert float(((chroma_y.norm(dim=1) / chroma_x.norm(dim=1) - 1).abs() > 1e-3).float().mean()) > 0.99
    cos = (chroma_x * chroma_y).sum(1) / (chroma_x.norm(dim=1) * chroma_y.norm(dim=1))
    assert float((cos < 1 - 1e-6).float().mean()) > 0.97                                   # hue acted


def test_single_channel_images_skip_saturation_and_hue():
    x = torch.rand(64, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    y = color_jitter(x, AugmentSpec(jitter=(0.0, 0.0, 0.4, 0.1), jitter_p=1.0), torch.Generator().manual_seed(0))
    assert torch.equal(y, x)


def _only(**kw):
    """A spec that leaves the crop, flip and jitter out, with identity normalisation."""
    base = dict(crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), flip_p=0.0, jitter_p=0.0, gray_p=0.0, blur_p=0.0,
                mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    return AugmentSpec(**{**base, **kw})


def test_grayscale_replaces_every_channel_by_the_luma_with_probability_gray_p():
    imgs = _images(4000, 3, 2)
    x = imgs.float() / 255
    out = SimCLRAugment(_only(size=2, gray_p=0.2))(imgs, generator=torch.Generator().manual_seed(0))
    gray = (out - out[:, :1]).abs().flatten(1).amax(1) < 1e-6
    assert 0.17 < float(gray.float().mean()) < 0.23
    luma = (x * _YIQ[0].view(1, 3, 1, 1)).sum(1, keepdim=True)
    assert torch.allclose(out[gray], luma[gray].expand(-1, 3, 2, 2), atol=1e-5)
    assert torch.allclose(out[~gray], x[~gray], atol=1e-5)
    # folded with the normalisation: (luma − mean_c) / std_c on channel c
    spec = _only(size=2, gray_p=1.0, mean=(0.1, 0.2, 0.3), std=(0.5, 0.6, 0.7))
    out = SimCLRAugment(spec)(imgs[:8])
    ref = (luma[:8] - torch.tensor(spec.mean).view(1, 3, 1, 1)) / torch.tensor(spec.std).view(1, 3, 1, 1)
    assert torch.allclose(out, ref, atol=1e-5)


def _reference_blur(x, sigma, kernel, at):
    """Direct 2-D Gaussian filter (side ``kernel``, reflect padding) of one image ``[C, H, W]`` at pixels ``at``."""
    r = kernel // 2
    t = torch.arange(-r, r + 1, dtype=torch.float64)
    k1 = torch.exp(-t**2 / (2 * sigma**2))
    k2 = torch.outer(k1, k1) / k1.sum() ** 2
    h, w = x.shape[1:]
    reflect = lambda i, n: -i if i < 0 else (2 * (n - 1) - i if i >= n else i)  # noqa: E731
    out = torch.zeros(x.shape[0], len(at), len(at), dtype=torch.float64)
    for ii, i in enumerate(at):
        for jj, j in enumerate(at):
            for a in range(-r, r + 1):
                for b in range(-r, r + 1):
                    out[:, ii, jj] += k2[a + r, b + r] * x[:, reflect(i + a, h), reflect(j + b, w)].double()
    return out.float()


def test_blur_probability_kernel_and_sigma_follow_simclr():
    """Blur with p = blur_p, σ drawn from blur_sigma, kernel side 10 % of the image (odd): 7 px at 64 px."""
    imgs = _images(400, 1, 64)
    spec = _only(size=64, blur_p=0.5, blur_sigma=(1.5, 1.5), mean=(0.0,), std=(1.0,))
    out = SimCLRAugment(spec)(imgs, generator=torch.Generator().manual_seed(0))
    blurred = (out - imgs.float() / 255).abs().flatten(1).amax(1) > 1e-4
    assert 0.42 < float(blurred.float().mean()) < 0.58
    i = int(blurred.float().argmax())
    at = [0, 1, 2, 30, 61, 63]
    ref = _reference_blur(imgs[i].float() / 255, 1.5, 7, at)
    assert torch.allclose(out[i][:, at][:, :, at], ref, atol=1e-5)
    # σ ~ U(blur_sigma): recovered from the blurred centre of a single lit pixel, k(0)² = 1 / (Σ_t e^{-t²/2σ²})²
    dot = torch.zeros(4000, 1, 50, 50, dtype=torch.uint8)                 # 50 px: a 5 px kernel
    dot[..., 25, 25] = 255
    spec = _only(size=50, blur_p=1.0, mean=(0.0,), std=(1.0,))
    centre = SimCLRAugment(spec)(dot, generator=torch.Generator().manual_seed(0))[:, 0, 25, 25]
    grid = torch.linspace(0.1, 2.0, 1901, dtype=torch.float64)
    t = torch.arange(-2, 3, dtype=torch.float64)
    peak = 1 / torch.exp(-t[None] ** 2 / (2 * grid[:, None] ** 2)).sum(1) ** 2           # decreasing in σ
    sigma = grid[(peak[None] - centre[:, None].double()).abs().argmin(1)]
    assert _uniform_quantiles(sigma.float(), 0.1, 2.0, atol=0.06)
    # small images get the smallest kernel, 3 px
    small = _images(4, 1, 16)
    out = SimCLRAugment(_only(size=16, blur_p=1.0, blur_sigma=(1.0, 1.0), mean=(0.0,), std=(1.0,)))(small)
    at = [0, 1, 7, 15]
    assert torch.allclose(out[0][:, at][:, :, at], _reference_blur(small[0].float() / 255, 1.0, 3, at), atol=1e-5)


def test_views_are_independent_augmentations_of_the_same_images():
    imgs = _images(4)
    views = SimCLRAugment(_only(size=32)).views(imgs)
    assert views.shape == (2, 4, 3, 32, 32)                                      # two views by default
    assert torch.allclose(views, prepare(imgs, _only(size=32)).expand(2, 4, 3, 32, 32), atol=1e-5)


def test_statistics_that_match_no_channel_count_are_refused():
    """``SimCLRAugment()`` (RGB statistics) on grey images gave 3-channel output without a word; one value for
    every channel, or one per channel, still works."""
    grey = _images(c=1, size=28)
    with pytest.raises(ValueError, match="mean has 3 values for 1-channel images"):
        SimCLRAugment()(grey)
    with pytest.raises(ValueError, match="mean has 3 values for 1-channel images"):
        prepare(grey, AugmentSpec(size=28))
    with pytest.raises(ValueError, match="std has 2 values for 3-channel images"):
        prepare(_images(), AugmentSpec(std=(0.5, 0.5)))
    spec = AugmentSpec(size=28, mean=(0.5,), std=(0.5,))
    assert SimCLRAugment(spec)(grey).shape == (16, 1, 28, 28)
    assert prepare(_images(), AugmentSpec(mean=(0.5,), std=(0.25,))).shape == (16, 3, 32, 32)
