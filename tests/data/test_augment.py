"""Batched SimCLR augmentation: shapes, ranges, randomness under a seed, and each operation's effect."""

from __future__ import annotations

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
