"""The shared pre-training helpers: the per-image cost model behind simclr's and pu's run-time estimates."""

from __future__ import annotations

import pytest

from contrastlab.pretraining import seconds_per_image


def test_cost_scales_with_area_and_width_and_device() -> None:
    base = seconds_per_image("resnet18", {"width": 1.0}, "cpu", 32)
    assert base is not None and base > 0
    assert seconds_per_image("resnet18", {"width": 1.0}, "cpu", 64) == pytest.approx(4 * base)
    assert seconds_per_image("resnet18", {"width": 2.0}, "cpu", 32) == pytest.approx(4 * base)
    assert seconds_per_image("resnet18", {"width": 1.0}, "cuda:1", 32) < base / 50
    assert seconds_per_image("resnet50", {}, "cpu", 32) > base


def test_small_cnn_uses_its_own_default_width() -> None:
    """small_cnn's cost was measured at width 16; an unset width means its default, 32 (4x the cost)."""
    at16 = seconds_per_image("small_cnn", {"width": 16}, "cpu", 32)
    assert seconds_per_image("small_cnn", {}, "cpu", 32) == pytest.approx(4 * at16)
    assert seconds_per_image("small_cnn", {"width": None}, "cpu", 32) == pytest.approx(4 * at16)


def test_unmeasured_encoder_has_no_estimate() -> None:
    assert seconds_per_image("my_vit", {"width": 1.0}, "cpu", 32) is None
