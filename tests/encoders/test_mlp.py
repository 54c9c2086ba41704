"""The MLP encoder: registry, shapes, hyperparameters, gradients."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl
from contrastlab import ConfigError


def test_registered_with_defaults():
    assert "mlp" in cl.list_encoders()
    enc = cl.make_encoder("mlp", in_dim=784)
    assert enc.out_dim == enc.feature_dim == 128
    assert sum(isinstance(m, torch.nn.Linear) for m in enc.modules()) == 3


@pytest.mark.parametrize("layers", [1, 2, 4])
@pytest.mark.parametrize("batch_norm", [True, False])
def test_shapes_and_flattening(layers, batch_norm):
    enc = cl.make_encoder("mlp", in_dim=12, hidden_dim=16, out_dim=5, layers=layers, batch_norm=batch_norm)
    assert sum(isinstance(m, torch.nn.Linear) for m in enc.modules()) == layers
    assert any(isinstance(m, torch.nn.BatchNorm1d) for m in enc.modules()) == (batch_norm and layers > 1)
    x = torch.randn(7, 3, 4, requires_grad=True)  # flattened to 12
    out = enc(x)
    assert out.shape == (7, 5)
    out.sum().backward()
    assert x.grad is not None and all(p.grad is not None for p in enc.parameters())


def test_learns_with_a_contrastive_loss():
    torch.manual_seed(0)
    enc = cl.make_encoder("mlp", in_dim=10, hidden_dim=32, out_dim=8, layers=2, batch_norm=False)
    x = torch.randn(16, 10)
    sampler, loss = cl.make_sampler("two_view"), cl.make_loss("dcl")
    opt = torch.optim.Adam(enc.parameters(), lr=1e-2)
    values = []
    for _ in range(30):
        opt.zero_grad()
        v = loss(sampler(enc(x + 0.1 * torch.randn_like(x)), enc(x + 0.1 * torch.randn_like(x))))
        v.backward()
        opt.step()
        values.append(v.item())
    assert values[-1] < values[0]


@pytest.mark.parametrize(("hp", "param"), [({"layers": 0}, "layers"), ({"hidden_dim": 0}, "hidden_dim"),
                                           ({"out_dim": -3}, "out_dim")])
def test_bad_hyperparameters(hp, param):
    with pytest.raises(ConfigError, match=param):
        cl.make_encoder("mlp", **hp)


def test_hyperparameters_are_documented(check_documented_hparams):
    from contrastlab.encoders.mlp import MLPEncoder

    check_documented_hparams(MLPEncoder, {"hidden_dim": 300, "out_dim": 128, "layers": 3, "batch_norm": True})
    assert MLPEncoder().in_dim == 784


@pytest.mark.parametrize("batch_norm", [True, False])
def test_layers_match_the_nnpu_model(batch_norm):
    """Linear → (BN →) ReLU per hidden layer, then a linear output; hidden biases only without batch norm."""
    torch.manual_seed(0)
    enc = cl.make_encoder("mlp", in_dim=6, hidden_dim=5, out_dim=3, layers=3, batch_norm=batch_norm).train()
    lins = [m for m in enc.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in lins] == [(6, 5), (5, 5), (5, 3)]
    assert [m.bias is not None for m in lins] == [not batch_norm, not batch_norm, True]
    x = torch.randn(8, 2, 3)
    h = x.reshape(8, 6)
    for lin in lins[:-1]:
        h = h @ lin.weight.T + (0 if lin.bias is None else lin.bias)
        if batch_norm:
            h = (h - h.mean(0)) / torch.sqrt(h.var(0, unbiased=False) + 1e-5)
        h = torch.relu(h)
    assert torch.allclose(enc(x), h @ lins[-1].weight.T + lins[-1].bias, atol=1e-5)
