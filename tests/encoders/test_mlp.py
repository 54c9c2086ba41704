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
