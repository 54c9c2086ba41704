"""CURL's pixel encoder: registry entry, shapes, trunk/head split, initialisation."""

from __future__ import annotations

from unittest import mock

import pytest
import torch

import contrastlab as cl
from contrastlab.encoders.pixel_conv import PixelConvEncoder, conv_output_size


def test_registered_with_curl_defaults() -> None:
    assert "pixel_conv" in cl.list_encoders()
    enc = cl.make_encoder("pixel_conv", in_channels=9, image_size=84)
    assert isinstance(enc, PixelConvEncoder)
    convs = [m for m in enc.conv if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 4 and all(c.out_channels == 32 for c in convs)
    assert convs[0].stride == (2, 2) and convs[1].stride == (1, 1)
    assert enc.latent_dim == 50 and isinstance(enc.head[-1], torch.nn.LayerNorm)
    assert conv_output_size(84, 4) == 35  # CURL's 35×35×32 trunk output


def test_shapes_and_layernorm() -> None:
    enc = cl.make_encoder("pixel_conv", num_layers=2, num_filters=8, latent_dim=16, in_channels=6, image_size=32)
    z = enc(torch.rand(5, 6, 32, 32))
    assert z.shape == (5, 16)
    assert torch.allclose(z.mean(dim=1), torch.zeros(5), atol=1e-5)  # LayerNorm output, no tanh


def test_detach_conv_stops_gradients_at_trunk() -> None:
    enc = PixelConvEncoder(num_layers=2, num_filters=4, latent_dim=8, in_channels=3, image_size=16)
    torch.manual_seed(0)
    # by default the whole encoder trains (a weighted sum: a LayerNorm output's plain sum is constant)
    (enc(torch.rand(2, 3, 16, 16)) * torch.randn(2, 8)).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in enc.conv.parameters())
    enc.zero_grad(set_to_none=True)
    enc(torch.rand(2, 3, 16, 16), detach_conv=True).sum().backward()
    assert all(p.grad is None for p in enc.conv.parameters())
    assert all(p.grad is not None for p in enc.head.parameters())


def test_delta_orthogonal_conv_init() -> None:
    enc = PixelConvEncoder(num_layers=2, num_filters=8, latent_dim=8, in_channels=3, image_size=16)
    w = enc.conv[2].weight  # [8, 8, 3, 3]
    off_centre = w.clone()
    off_centre[:, :, 1, 1] = 0
    assert torch.count_nonzero(off_centre) == 0 and torch.count_nonzero(w[:, :, 1, 1]) > 0


def test_bad_hyperparameters_and_sizes() -> None:
    with pytest.raises(cl.ConfigError, match="num_layers"):
        cl.make_encoder("pixel_conv", num_layers=0)
    with pytest.raises(ValueError, match="too small"):
        PixelConvEncoder(num_layers=4, image_size=8)
    # the smallest images that fit: a 1×1 trunk output ((7-3)//2+1 = 3, then 3-2 = 1; 6 px would leave 0)
    assert conv_output_size(7, 2) == 1 and conv_output_size(6, 2) == 0
    enc = PixelConvEncoder(num_layers=2, num_filters=4, latent_dim=8, in_channels=3, image_size=7)
    assert enc(torch.rand(2, 3, 7, 7)).shape == (2, 8) and enc.head[0].in_features == 4
    with pytest.raises(ValueError, match="too small"):
        PixelConvEncoder(num_layers=2, num_filters=4, latent_dim=8, in_channels=3, image_size=6)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("batch", [4, 64])  # below and at map_min_batch: flatten + GEMM, whole-map convolution
def test_head_reads_the_unflattened_map_as_a_linear_layer_on_its_flattening(channels_last: bool, batch: int) -> None:
    """``MapLinear`` on ``[B, C, H, W]`` = ``nn.Linear`` on ``flatten(1)``: the same values and the same gradients
    for the map, the weight and the bias, on both of its paths."""
    from contrastlab.encoders.pixel_conv import MapLinear

    torch.manual_seed(0)
    head = MapLinear(8 * 5 * 5, 6)
    assert MapLinear.map_min_batch == 64
    plain = torch.nn.Linear(8 * 5 * 5, 6)
    plain.load_state_dict(head.state_dict())  # the same parameter names and shapes as nn.Linear
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(batch, 8, 5, 5).contiguous(memory_format=fmt).requires_grad_(True)
    x_plain = x.detach().clone().requires_grad_(True)
    with mock.patch("contrastlab.encoders.pixel_conv.F.conv2d", wraps=torch.nn.functional.conv2d) as conv:
        out = head(x)
    assert conv.called == (batch >= MapLinear.map_min_batch)  # the whole-map convolution from 64 rows on
    ref = plain(x_plain.flatten(1))
    assert out.shape == (batch, 6) and torch.allclose(out, ref, atol=1e-5)
    assert torch.allclose(head(x.detach().flatten(1)), ref, atol=1e-6)  # flat input: the nn.Linear path
    grad = torch.randn(batch, 6)
    out.backward(grad)
    ref.backward(grad)
    assert torch.allclose(x.grad, x_plain.grad, atol=1e-5)
    assert torch.allclose(head.weight.grad, plain.weight.grad, atol=1e-5)
    assert torch.allclose(head.bias.grad, plain.bias.grad, atol=1e-6)


@pytest.mark.parametrize(("key", "value"), [("num_filters", 100_000_000), ("latent_dim", 0), ("num_layers", 65),
                                            ("num_layers", 2.5), ("num_filters", True)])
def test_out_of_range_or_non_integer_sizes_are_refused(key, value) -> None:
    """Sizes are integers within the registry's bounds (``100_000_000`` filters was accepted and ran out of memory
    when the encoder was built; ``2.5`` layers was taken as 2)."""
    with pytest.raises(cl.ConfigError, match=key):
        cl.make_encoder("pixel_conv", **{key: value})


def test_constructor_defaults_are_curls_encoder() -> None:
    """``PixelConvEncoder()`` built directly is CURL's: 9 input channels (3 RGB frames), 84 px, 4 × 32, latent 50."""
    enc = PixelConvEncoder()
    convs = [m for m in enc.conv if isinstance(m, torch.nn.Conv2d)]
    assert (enc.in_channels, enc.image_size, enc.latent_dim) == (9, 84, 50)
    assert len(convs) == 4 and convs[0].in_channels == 9 and all(c.out_channels == 32 for c in convs)
    assert enc.head[0].in_features == 32 * 35 * 35 and enc.head[0].out_features == 50


def test_curl_init_zero_biases_orthogonal_weights_and_relu_gain_on_the_conv_centre() -> None:
    """SAC-AE/CURL ``weight_init``: Linear weights orthogonal, conv weights zero but for an orthogonal centre tap
    with ReLU gain √2, every bias zero."""
    torch.manual_seed(0)
    enc = PixelConvEncoder(num_layers=2, num_filters=8, latent_dim=8, in_channels=3, image_size=16)
    for module in enc.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            assert torch.count_nonzero(module.bias) == 0
    linear = enc.head[0].weight  # [8, 8·5·5]: orthonormal rows
    assert torch.allclose(linear @ linear.T, torch.eye(8), atol=1e-5)
    for conv in (enc.conv[0], enc.conv[2]):  # centres [8, 3] and [8, 8]
        centre = conv.weight[:, :, 1, 1]
        gram = centre.T @ centre if centre.shape[0] >= centre.shape[1] else centre @ centre.T
        assert torch.allclose(gram, 2.0 * torch.eye(min(centre.shape)), atol=1e-5)


def test_the_smallest_sizes_are_accepted() -> None:
    """The registry's lower bounds are 1 (one conv layer, one filter, a 1-d feature), not 2."""
    enc = cl.make_encoder("pixel_conv", num_layers=1, num_filters=1, latent_dim=1, in_channels=3, image_size=16)
    assert enc(torch.rand(2, 3, 16, 16)).shape == (2, 1)
