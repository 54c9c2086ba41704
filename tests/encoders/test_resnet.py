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


def test_projection_head_is_dcl_code_mlp():
    """Linear(d, 512, no bias) → BatchNorm1d → ReLU → Linear(512, 128) (DCL code); without BN the first layer
    has a bias and no norm."""
    head = ProjectionHead(64)
    lin1, bn, relu, lin2 = head.net
    assert (lin1.in_features, lin1.out_features, lin1.bias) == (64, 512, None)
    assert isinstance(bn, torch.nn.BatchNorm1d) and bn.num_features == 512 and isinstance(relu, torch.nn.ReLU)
    assert (lin2.in_features, lin2.out_features) == (512, 128) and lin2.bias is not None and head.out_dim == 128
    plain = ProjectionHead(6, 4, 3, batch_norm=False)
    assert plain.net[0].bias is not None and isinstance(plain.net[1], torch.nn.Identity)
    h = torch.randn(5, 6)
    ref = torch.relu(h @ plain.net[0].weight.T + plain.net[0].bias) @ plain.net[3].weight.T + plain.net[3].bias
    assert torch.allclose(plain(h), ref, atol=1e-6)


def test_hyperparameters_are_documented(check_documented_hparams):
    from contrastlab.encoders.resnet import ResNet18, ResNet50

    for cls in (ResNet18, ResNet50):
        check_documented_hparams(cls, {"width": 1.0, "stem": "cifar"})
    assert cl.make_encoder("resnet18", width=0.001).stem[0].out_channels == 1       # at least one channel


@pytest.mark.parametrize(("name", "blocks", "expansion"),
                         [("resnet18", [2, 2, 2, 2], 1), ("resnet50", [3, 4, 6, 3], 4)])
def test_stages_follow_he_et_al(name, blocks, expansion):
    """Blocks per stage, planes 16·2^i at width 0.25, stride 2 in the first block of stages 2–4 (on the 3×3 conv of
    a bottleneck, v1.5), and no conv bias anywhere (BatchNorm follows every conv)."""
    enc = cl.make_encoder(name, width=0.25)
    assert [len(stage) for stage in enc.stages] == blocks
    for i, stage in enumerate(enc.stages):
        strided = stage[0].conv1 if expansion == 1 else stage[0].conv2
        assert strided.stride == ((2, 2) if i > 0 else (1, 1)) and strided.kernel_size == (3, 3)
        assert all(b.conv2.stride == (1, 1) for b in stage[1:]) and all(b.conv1.stride == (1, 1) for b in stage[1:])
        assert stage[-1].bn2.num_features == 16 * 2**i
    assert enc.out_dim == 128 * expansion
    assert not any(m.bias is not None for m in enc.modules() if isinstance(m, torch.nn.Conv2d))


def test_stems_keep_or_quarter_the_resolution():
    """CIFAR stem: 3×3 stride-1 'same' conv (32 px stay 32 px); ImageNet stem: 7×7/2 conv + 3×3/2 max-pool (64 → 16)."""
    x = torch.randn(2, 3, 32, 32)
    assert cl.make_encoder("resnet18", width=0.125).stem(x).shape == (2, 8, 32, 32)
    stem = cl.make_encoder("resnet18", width=0.125, stem="imagenet").stem
    conv, pool = stem[0], stem[3]
    assert (conv.kernel_size, conv.stride, conv.padding) == ((7, 7), (2, 2), (3, 3)) and conv.bias is None
    assert (pool.kernel_size, pool.stride, pool.padding) == (3, 2, 1)
    assert stem(torch.randn(2, 3, 64, 64)).shape == (2, 8, 16, 16)


def _bn(x):
    return (x - x.mean((0, 2, 3), keepdim=True)) / torch.sqrt(x.var((0, 2, 3), unbiased=False, keepdim=True) + 1e-5)


def test_blocks_add_the_shortcut():
    """y = ReLU(F(x) + shortcut(x)), with a 1×1 strided projection + BN when the shape changes (He et al. 2016)."""
    import torch.nn.functional as F

    from contrastlab.encoders.resnet import BasicBlock, Bottleneck

    torch.manual_seed(0)
    x = torch.randn(4, 8, 6, 6)
    basic = BasicBlock(8, 8).train()                                           # stride 1 by default
    f = _bn(F.conv2d(torch.relu(_bn(F.conv2d(x, basic.conv1.weight, padding=1))), basic.conv2.weight, padding=1))
    assert torch.allclose(basic(x), torch.relu(f + x), atol=1e-5)
    assert Bottleneck(8, 2)(x).shape == x.shape                                # stride 1 by default
    bott = Bottleneck(8, 4, 2).train()
    f = torch.relu(_bn(F.conv2d(x, bott.conv1.weight)))
    f = torch.relu(_bn(F.conv2d(f, bott.conv2.weight, stride=2, padding=1)))
    f = _bn(F.conv2d(f, bott.conv3.weight))
    short = _bn(F.conv2d(x, bott.shortcut[0].weight, stride=2))
    assert torch.allclose(bott(x), torch.relu(f + short), atol=1e-5)
