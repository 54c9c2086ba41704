"""The small CNN for CPU smoke runs."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl


@pytest.mark.parametrize(("channels", "size"), [(1, 28), (3, 32), (3, 9)])
@pytest.mark.parametrize("norm", ["batch", "group", "none"])
def test_small_cnn_shapes(channels, size, norm):
    enc = cl.make_encoder("small_cnn", in_channels=channels, width=8, feature_dim=24, norm=norm)
    out = enc(torch.randn(3, channels, size, size))
    assert out.shape == (3, 24) and enc.out_dim == 24 == enc.feature_dim


def test_small_cnn_registered_and_validated():
    assert "small_cnn" in cl.list_encoders()
    with pytest.raises(cl.ConfigError, match="norm"):
        cl.make_encoder("small_cnn", norm="layer")
    enc = cl.make_encoder("small_cnn", width=4, norm="none")
    assert not any(isinstance(m, (torch.nn.BatchNorm2d, torch.nn.GroupNorm)) for m in enc.modules())
