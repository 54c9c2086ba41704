"""SupCon / unbiased / puNCE computed with 0/1 weights equal the plain bool-mask formulas (values, gradients),
including ``neg_mask``, unlabeled anchors and rows where every negative is dropped."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl


def _batch(seed: int, masked: bool, pu: bool):
    gen = torch.Generator().manual_seed(seed)
    A, M, N = 7, 2, 9
    pos = torch.randn(A, M, generator=gen, dtype=torch.float64, requires_grad=True)
    neg = torch.randn(A, N, generator=gen, dtype=torch.float64, requires_grad=True)
    if pu:
        a = torch.where(torch.rand(A, generator=gen) < 0.4, 1, -1)
        n = torch.where(torch.rand(A, N, generator=gen) < 0.4, 1, -1)
    else:
        a = torch.randint(-1, 3, (A,), generator=gen)
        n = torch.randint(-1, 3, (A, N), generator=gen)
    a[0] = 2 if not pu else 1
    n[0] = a[0]  # row 0: every negative shares the anchor's label (no true negative)
    mask = (torch.rand(A, N, generator=gen) < 0.8) if masked else None
    if masked:
        mask[1] = False  # row 1: no valid column at all
    return pos, neg, a, n, mask


def _lse(x, keep):
    return torch.logsumexp(x.masked_fill(~keep, -1e30), dim=1)


def _reference(name, pos, neg, a, n, mask, hp):
    valid = torch.ones_like(neg, dtype=torch.bool) if mask is None else mask
    lse_all = torch.logaddexp(torch.logsumexp(pos, 1), _lse(neg, valid))
    if name == "unbiased":
        true_neg = ~((n == a[:, None]) & (a >= 0)[:, None]) & valid
        log_mass = _lse(neg, true_neg)
        if hp["fill_to_n"]:
            log_mass = log_mass + torch.log(valid.sum(1).double()) - torch.log(true_neg.sum(1).double().clamp_min(1))
        return torch.nn.functional.softplus(log_mass - pos[:, 0])
    sel = ((n == 1) if name == "punce" else (n == a[:, None]) & (a >= 0)[:, None]) & valid
    mean = (pos.sum(1) + torch.where(sel, neg, 0.0).sum(1)) / (pos.shape[1] + sel.sum(1))
    if name == "punce":
        aug = lse_all - pos.mean(1)
        return torch.where(a == 1, lse_all - mean, hp["prior"] * (lse_all - mean) + (1 - hp["prior"]) * aug)
    if hp["aggregation"] == "out":
        return lse_all - mean
    lse_pos = torch.logaddexp(torch.logsumexp(pos, 1), _lse(neg, sel))
    return lse_all - lse_pos + torch.log(pos.shape[1] + sel.sum(1).double())


CASES = [("supcon", {"aggregation": "out"}), ("supcon", {"aggregation": "in"}), ("unbiased", {"fill_to_n": True}),
         ("unbiased", {"fill_to_n": False}), ("punce", {"prior": 0.3})]


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize(("name", "hp"), CASES)
def test_weights_match_bool_masks(name, hp, masked):
    pos, neg, a, n, mask = _batch(len(name) + masked, masked, pu=name == "punce")
    loss = cl.make_loss(name, reduction="none", **hp)
    ours = loss(cl.ContrastiveBatch(pos, neg, neg_mask=mask, anchor_labels=a, neg_labels=n))
    ref = _reference(name, pos, neg, a, n, mask, hp)
    torch.testing.assert_close(ours, ref)
    w = torch.linspace(0.5, 1.5, ours.shape[0], dtype=torch.float64)
    g_ours = torch.autograd.grad((ours * w).sum(), (pos, neg))
    g_ref = torch.autograd.grad((ref * w).sum(), (pos, neg))
    for go, gr in zip(g_ours, g_ref, strict=True):
        assert torch.isfinite(go).all()
        torch.testing.assert_close(go, gr)
