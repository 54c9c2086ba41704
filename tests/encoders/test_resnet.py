"""ResNet-18/50 with the CIFAR stem: shapes for 1- and 3-channel input, width multiplier, registry."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl
from contrastlab.encoders.heads import ContrastiveModel, ProjectionHead, feature_dim


@pytest.mark.parametrize("channels", [1, 3])
def test_resnet18_shapes(channels):
    enc = cl.make_encoder("resnet18", in_channels=channels, width=0.25)
    out = enc(torch.randn(2, channels, 28, 28))
    assert out.shape == (2, 128) and enc.out_dim == 128 == feature_dim(enc)
    assert enc.stem[0].kernel_size == (3, 3) and enc.stem[0].stride == (1, 1)
    assert not any(isinstance(m, torch.nn.MaxPool2d) for m in enc.modules())


@pytest.mark.parametrize("channels", [1, 3])
def test_resnet50_shapes(channels):
    enc = cl.make_encoder("resnet50", in_channels=channels, width=0.125)
    assert enc(torch.randn(2, channels, 32, 32)).shape == (2, 2048 // 8) and enc.out_dim == 256


def test_full_width_dims_and_parameter_count():
    r18 = cl.make_encoder("resnet18")
    r50 = cl.make_encoder("resnet50")
    assert r18.out_dim == 512 and r50.out_dim == 2048
    n18 = sum(p.numel() for p in r18.parameters())
    assert 11.0e6 < n18 < 11.3e6                                          # ResNet-18 trunk ≈ 11.17M


def test_imagenet_stem_downsamples_and_bad_values():
    enc = cl.make_encoder("resnet18", stem="imagenet", width=0.125)
    assert enc(torch.randn(1, 3, 64, 64)).shape == (1, 64)
    with pytest.raises(cl.ConfigError, match="stem"):
        cl.make_encoder("resnet18", stem="tiny")
    with pytest.raises(cl.ConfigError, match="width"):
        cl.make_encoder("resnet50", width=0)


def test_head_and_wrapper():
    enc = cl.make_encoder("resnet18", width=0.125)
    model = ContrastiveModel(enc, ProjectionHead(enc.out_dim, 32, 128))
    h, z = model(torch.randn(4, 3, 16, 16))
    assert h.shape == (4, 64) and z.shape == (4, 128)
    h.sum().backward()
    assert enc.stem[0].weight.grad is not None
