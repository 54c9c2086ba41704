"""Gradients: torch.autograd.gradcheck (float64) for every loss, plus analytic checks of losses-spec §9.5."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck

import contrastlab as cl
from contrastlab import ContrastiveBatch
from contrastlab.losses.bcl import bcl_weights, ecdf

SETTINGS = [
    ("infonce", {}),
    ("dcl", {"tau_plus": 0.1}),
    ("dcl", {"tau_plus": 0.95}),  # clamp active on most rows
    ("hcl", {"tau_plus": 0.1, "beta": 1.0}),
    ("bcl", {"tau_plus": 0.1, "alpha": 0.9, "beta": 0.9}),
    ("pucl", {"alpha": 0.12, "c": 0.1}),
    ("punce", {"prior": 0.4}),
    ("debiased_pos", {"tau_plus": 0.1, "aggregation": "outer"}),
    ("debiased_pos", {"tau_plus": 0.1, "aggregation": "inner"}),
    ("supcon", {"aggregation": "out"}),
    ("supcon", {"aggregation": "in"}),
    ("unbiased", {"fill_to_n": True}),
]


def _labels(name, ref, B):
    needs = cl.loss_label_kinds(name)
    if not needs:
        return None
    return ref.pu_labels(B, n_labeled=3) if needs == frozenset({"pu"}) else ref.class_labels(B, classes=2)


@pytest.mark.parametrize(("name", "hp"), SETTINGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SETTINGS)])
def test_gradcheck_through_multi_view_sampler(name, hp, ref):
    B = 5
    y = _labels(name, ref, B)
    views = ref.random_views(B=B, d=4, V=3, seed=21).requires_grad_(True)
    sampler = cl.make_sampler("multi_view", temperature=0.5)
    loss = cl.make_loss(name, **hp)
    assert gradcheck(lambda v: loss(sampler(v, labels=y)), (views,), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize(("name", "hp"), SETTINGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SETTINGS)])
def test_gradcheck_on_masked_logits(name, hp, ref):
    b = ref.masked_batch(A=6, N=7, M=2, seed=22)
    pos = b.pos_logits.clone().requires_grad_(True)
    neg = b.neg_logits.clone().requires_grad_(True)
    loss = cl.make_loss(name, reduction="none", **hp)

    def f(p, n):
        return loss(ContrastiveBatch(p, n, neg_mask=b.neg_mask, temperature=b.temperature,
                                     anchor_labels=b.anchor_labels, neg_labels=b.neg_labels))

    assert gradcheck(f, (pos, neg), eps=1e-6, atol=1e-7)


def test_gradcheck_query_key_bilinear(ref):
    """Gradients w.r.t. the queries and the learnable W of the bilinear score (unbounded logits, row-min floor).

    DebiasedPos is left out: for unbounded logits its self term is the detached row max (a constant stand-in);
    scores are kept small so that no clamp (whose row-min floor is detached) is active.
    """
    torch.manual_seed(0)
    sampler = cl.make_sampler("query_key", embed_dim=4)
    W = sampler.W.detach().double().clone().requires_grad_(True)
    del sampler.W
    z = ref.random_views(B=5, d=4, V=3, seed=23) * 0.3
    q = z[0].clone().requires_grad_(True)
    for name in ("infonce", "dcl", "hcl", "pucl", "bcl"):
        loss = cl.make_loss(name)

        def f(q_, W_, loss=loss):
            sampler.W = W_
            return loss(sampler(q_, [z[1], z[2]]))

        assert gradcheck(f, (q, W), eps=1e-6, atol=1e-6), name


def test_hcl_detached_weights_gradient(ref):
    """detach_weights=True: the gradient of Σ_j w_j e^{ℓ_j} with w frozen at its current value."""
    b = ref.two_view_batch(B=6, seed=28)
    neg = b.neg_logits.clone().requires_grad_(True)
    cl.make_loss("hcl", tau_plus=0.1, beta=1.0, detach_weights=True, reduction="sum")(
        ContrastiveBatch(b.pos_logits, neg, temperature=b.temperature)).backward()
    h, p = torch.exp(b.neg_logits), torch.exp(b.pos_logits[:, 0])
    N = h.shape[1]
    w = N * torch.softmax(b.neg_logits, dim=1)
    ng = ((w * h).sum(1) - N * 0.1 * p) / 0.9
    torch.testing.assert_close(neg.grad, w * h / (0.9 * (p + ng))[:, None])


def test_dcl_analytic_gradient_unclamped(ref):
    b = ref.two_view_batch(B=6, seed=24)
    tau = 0.1
    pos = b.pos_logits.clone().requires_grad_(True)
    neg = b.neg_logits.clone().requires_grad_(True)
    cl.make_loss("dcl", tau_plus=tau, reduction="sum")(ContrastiveBatch(pos, neg, temperature=b.temperature)).backward()
    h, p = torch.exp(b.neg_logits), torch.exp(b.pos_logits[:, 0])
    N = h.shape[1]
    ng = (h.sum(1) - N * tau * p) / (1 - tau)
    assert bool((ng > N * torch.exp(torch.tensor(-1 / b.temperature, dtype=torch.float64))).all())
    torch.testing.assert_close(neg.grad, h / ((1 - tau) * (p + ng))[:, None])
    torch.testing.assert_close(pos.grad[:, 0], -1 + p * (1 - N * tau / (1 - tau)) / (p + ng))


def test_dcl_clamped_rows_have_zero_negative_gradient():
    t = 0.5
    pos = torch.full((3, 1), 2.0, dtype=torch.float64, requires_grad=True)  # pos = e^{1/t}: clamp fires at τ⁺=0.9
    neg = torch.zeros(3, 5, dtype=torch.float64, requires_grad=True)
    loss = cl.make_loss("dcl", tau_plus=0.9, reduction="sum")(ContrastiveBatch(pos, neg, temperature=t))
    loss.backward()
    assert torch.count_nonzero(neg.grad) == 0
    ng = 5 * torch.exp(torch.tensor(-1 / t, dtype=torch.float64))
    torch.testing.assert_close(pos.grad[:, 0], torch.full((3,), float(-ng / (torch.exp(torch.tensor(2.0)) + ng)),
                                                          dtype=torch.float64))


def test_bcl_gradient_is_weighted_softmax(ref):
    b = ref.two_view_batch(B=6, seed=25)
    neg = b.neg_logits.clone().requires_grad_(True)
    cl.make_loss("bcl", reduction="sum")(ContrastiveBatch(b.pos_logits, neg, temperature=b.temperature)).backward()
    w = bcl_weights(ecdf(b.neg_logits, None), 0.1, 0.9, 0.9)
    wh = w * torch.exp(b.neg_logits)
    expected = wh / (torch.exp(b.pos_logits[:, 0]) + wh.sum(1))[:, None]
    torch.testing.assert_close(neg.grad, expected)


def test_hcl_detach_changes_gradient_not_value(ref):
    b = ref.two_view_batch(B=6, seed=26)
    grads, values = [], []
    for detach in (False, True):
        neg = b.neg_logits.clone().requires_grad_(True)
        v = cl.make_loss("hcl", detach_weights=detach)(ContrastiveBatch(b.pos_logits, neg, temperature=b.temperature))
        v.backward()
        grads.append(neg.grad)
        values.append(v.detach())
    torch.testing.assert_close(values[0], values[1])
    assert not torch.allclose(grads[0], grads[1])


def test_infonce_gradient_sums_to_zero_per_row(ref):
    b = ref.two_view_batch(B=6, seed=27)
    pos = b.pos_logits.clone().requires_grad_(True)
    neg = b.neg_logits.clone().requires_grad_(True)
    cl.make_loss("infonce", reduction="sum")(ContrastiveBatch(pos, neg, temperature=b.temperature)).backward()
    torch.testing.assert_close(pos.grad.sum(1) + neg.grad.sum(1), torch.zeros(12, dtype=torch.float64))
