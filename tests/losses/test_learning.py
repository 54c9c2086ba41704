"""Each loss decreases under gradient descent on raw embeddings (solo-learn style behavioural test)."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl

ALL = ["infonce", "dcl", "hcl", "bcl", "pucl", "punce", "debiased_pos", "supcon", "unbiased"]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("sampler", ["two_view", "query_key"])
def test_loss_decreases(name, sampler, ref):
    torch.manual_seed(0)
    B, d = 16, 8
    base = torch.randn(B, d)
    z1 = torch.nn.Parameter(base + 0.8 * torch.randn(B, d))
    z2 = torch.nn.Parameter(base + 0.8 * torch.randn(B, d))
    needs = cl.loss_label_kinds(name)
    y = (ref.pu_labels(B, n_labeled=4) if needs == frozenset({"pu"}) else ref.class_labels(B, classes=4)) if needs \
        else None
    s = cl.make_sampler(sampler, temperature=0.5, **({"similarity": "cosine"} if sampler == "query_key" else {}))
    loss = cl.make_loss(name)
    opt = torch.optim.Adam([z1, z2], lr=0.05)
    values = []
    for _ in range(40):
        opt.zero_grad()
        v = loss(s(z1, z2, labels=y))
        v.backward()
        opt.step()
        values.append(v.item())
    assert values[-1] < values[0] - 0.1, values
