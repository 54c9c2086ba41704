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


def test_small_cnn_hyperparameters_are_documented(check_documented_hparams):
    from contrastlab.encoders.small_cnn import SmallCNN

    check_documented_hparams(SmallCNN, {"width": 32, "feature_dim": 128, "norm": "batch"})
    enc = cl.make_encoder("small_cnn")
    assert enc.in_channels == 3 and enc.out_dim == 128 and enc.features[0].in_channels == 3


@pytest.mark.parametrize("norm", ["none", "group", "batch"])
def test_small_cnn_matches_its_layer_by_layer_definition(norm):
    """Four 3×3 stride-1 'same' convs (w, 2w, 4w, 4w channels), norm (GroupNorm with min(8, C) groups), ReLU, a
    2×2 max-pool after the 1st and 2nd, global average pooling, a linear layer; conv bias only without a norm."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    enc = cl.make_encoder("small_cnn", in_channels=3, width=4, feature_dim=6, norm=norm).train()
    convs = [m for m in enc.modules() if isinstance(m, torch.nn.Conv2d)]
    norms = [m for m in enc.modules() if isinstance(m, (torch.nn.GroupNorm, torch.nn.BatchNorm2d))]
    assert [c.out_channels for c in convs] == [4, 8, 16, 16]
    assert all((c.bias is not None) == (norm == "none") for c in convs)
    x = torch.randn(5, 3, 12, 12)
    h = x
    for i, conv in enumerate(convs):
        h = F.conv2d(h, conv.weight, conv.bias, stride=1, padding=1)
        if norm == "group":
            assert norms[i].num_groups == min(8, h.shape[1])
            h = F.group_norm(h, min(8, h.shape[1]), norms[i].weight, norms[i].bias, norms[i].eps)
        elif norm == "batch":
            mean, var = h.mean((0, 2, 3), keepdim=True), h.var((0, 2, 3), unbiased=False, keepdim=True)
            h = (h - mean) / torch.sqrt(var + norms[i].eps)
        h = torch.relu(h)
        if i < 2:
            h = F.max_pool2d(h, 2)
    ref = h.mean((2, 3)) @ enc.fc.weight.T + enc.fc.bias
    assert torch.allclose(enc(x), ref, atol=1e-5)
