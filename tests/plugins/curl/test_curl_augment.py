"""Batched crops on the device: equal to slicing, same crop across stacked frames, centre crop."""

from __future__ import annotations

import pytest
import torch

from contrastlab.plugins.curl.augment import center_crop, crop_at, crop_offsets, random_crop, random_crops


def test_crop_at_equals_slicing_and_keeps_frames_aligned() -> None:
    x = torch.randint(0, 256, (6, 9, 20, 20), dtype=torch.uint8)
    top, left = crop_offsets(6, 20, 12, "cpu", torch.Generator().manual_seed(0))
    out = crop_at(x, top, left, 12)
    assert out.shape == (6, 9, 12, 12) and out.dtype == torch.uint8
    for i in range(6):
        t, l = int(top[i]), int(left[i])
        assert torch.equal(out[i], x[i, :, t:t + 12, l:l + 12])  # all 9 channels share the crop


def test_random_crops_are_independent_and_in_range() -> None:
    x = torch.arange(64 * 64, dtype=torch.float32).reshape(1, 1, 64, 64).repeat(32, 3, 1, 1)
    views = random_crops(x, 40, 3, generator=torch.Generator().manual_seed(1))
    assert len(views) == 3 and all(v.shape == (32, 3, 40, 40) for v in views)
    corners = torch.stack([v[:, 0, 0, 0] for v in views])  # top-left value encodes the offset
    assert not torch.equal(corners[0], corners[1])
    top, left = corners // 64, corners % 64
    assert top.max() <= 24 and left.max() <= 24 and top.min() >= 0


def test_random_crop_and_center_crop() -> None:
    x = torch.rand(4, 3, 10, 10)
    assert random_crop(x, 10).equal(x)  # crop = size leaves nothing to choose
    assert center_crop(x, 6).equal(x[..., 2:8, 2:8])
    with pytest.raises(ValueError, match="larger"):
        random_crop(x, 11)


def test_crop_offsets_cover_every_position_uniformly_and_independently() -> None:
    """Corners are uniform on ``0 … size - crop`` inclusive (docs/curl.md: 17 × 17 positions for 84 of 100),
    top and left drawn independently."""
    top, left = crop_offsets(20000, 100, 84, "cpu", torch.Generator().manual_seed(2))
    for t in (top, left):
        counts = torch.bincount(t, minlength=17)
        assert len(counts) == 17 and counts.min() > 20000 / 17 * 0.8 and counts.max() < 20000 / 17 * 1.2
    assert not torch.equal(top, left)
    assert abs(torch.corrcoef(torch.stack([top, left]).float())[0, 1].item()) < 0.05


def test_random_crops_view_k_of_image_b_comes_from_image_b() -> None:
    """``random_crops`` returns ``n`` views in image order: view ``k`` row ``b`` is a window of image ``b``."""
    B, S, c = 5, 12, 7
    x = torch.arange(B * S * S, dtype=torch.float32).reshape(B, 1, S, S).repeat(1, 2, 1, 1)
    views = random_crops(x, c, 4, generator=torch.Generator().manual_seed(3))
    for v in views:
        for b in range(B):
            corner = int(v[b, 0, 0, 0])
            img, t, l = corner // (S * S), (corner % (S * S)) // S, corner % S
            assert img == b and torch.equal(v[b], x[b, :, t:t + c, l:l + c])


def test_center_crop_of_non_square_images_and_too_tall_crops() -> None:
    x = torch.rand(2, 3, 9, 14)
    assert center_crop(x, 5).equal(x[..., 2:7, 4:9])  # (9-5)//2 rows, (14-5)//2 columns
    with pytest.raises(ValueError, match="larger"):
        center_crop(x, 10)  # fits the width, not the height


def test_center_crop_of_one_non_square_stack_and_too_wide_crops() -> None:
    """One ``[C, H, W]`` stack (no batch axis) is cropped on its last two axes; a crop wider than W is refused."""
    x = torch.rand(3, 9, 14)
    assert center_crop(x, 5).equal(x[:, 2:7, 4:9])
    with pytest.raises(ValueError, match="larger"):
        center_crop(x, 10)  # fits the width, not the height
    with pytest.raises(ValueError, match="larger"):
        center_crop(torch.rand(3, 14, 9), 10)  # fits the height, not the width


def test_random_crops_of_non_square_images_cover_every_position_of_both_axes() -> None:
    """Frames 6 high and 10 wide, crop 4: tops in 0..2, lefts in 0..6 (both were drawn from the width, so a top
    past the height failed or the last rows were never cropped)."""
    images = torch.arange(2 * 6 * 10, dtype=torch.float32).reshape(2, 1, 6, 10)
    gen = torch.Generator().manual_seed(0)
    tops, lefts = set(), set()
    for crop in [*random_crops(images, 4, 200, generator=gen), random_crop(images, 4, generator=gen)]:
        for b in range(2):
            top, left = divmod(int(crop[b, 0, 0, 0] - images[b, 0, 0, 0]), 10)
            assert torch.equal(crop[b, 0], images[b, 0, top:top + 4, left:left + 4])
            tops.add(top)
            lefts.add(left)
    assert tops == {0, 1, 2} and lefts == set(range(7))


def test_square_images_draw_the_same_offsets_with_or_without_the_height() -> None:
    """Passing the height of a square image must not change the random stream (seeded runs stay reproducible)."""
    a = crop_offsets(5, 100, 84, "cpu", torch.Generator().manual_seed(3))
    b = crop_offsets(5, 100, 84, "cpu", torch.Generator().manual_seed(3), height=100)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
