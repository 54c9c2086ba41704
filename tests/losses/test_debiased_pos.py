"""DebiasedPos specifics not covered by the shared reference tests: the self term of unbounded logits."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import contrastlab as cl
from contrastlab import ContrastiveBatch


def _row(b: ContrastiveBatch, i: int) -> ContrastiveBatch:
    return replace(b, pos_logits=b.pos_logits[i:i + 1], neg_logits=b.neg_logits[i:i + 1],
                   neg_mask=None if b.neg_mask is None else b.neg_mask[i:i + 1], floor_logit=None)


@pytest.mark.parametrize("n_neg", [1, 9])
@pytest.mark.parametrize("aggregation", ["outer", "inner"])
def test_unbounded_self_logit_is_the_row_max_over_positives_and_valid_negatives(aggregation, n_neg, ref):
    """Unbounded logits: ``e^{ℓ_self}`` is not observed and the row's largest *valid* logit (positives or
    negatives) stands in for it; a masked column must not count, even if it holds the largest value."""
    b = ref.masked_batch(seed=21, N=n_neg, t=1.0, labels=False)
    neg = b.neg_logits.clone()
    neg[::2, 0] += 3.0  # even rows: the max is a (valid) negative
    neg[1::2] -= 3.0  # odd rows: the max is a positive
    if n_neg > 1:
        neg[:, 1] = torch.where(b.neg_mask[:, 1], neg[:, 1], torch.full_like(neg[:, 1], 50.0))  # masked: ignored
    pos = b.pos_logits.clone().requires_grad_()
    neg = neg.requires_grad_()
    b = replace(b, pos_logits=pos, neg_logits=neg, bounded=False, floor_logit=-30.0)
    got = cl.make_loss("debiased_pos", tau_plus=0.5, aggregation=aggregation, reduction="none")(b)
    want = []
    for i in range(b.num_anchors):
        valid = b.neg_logits[i][b.neg_mask[i]]
        self_logit = float(torch.cat([b.pos_logits[i], valid]).max().detach())  # a constant: no gradient through it
        want.append(ref.debiased_pos(_row(b, i), 0.5, aggregation, self_logit=self_logit)[0])
    want = torch.stack(want)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    grads = torch.autograd.grad(got.sum(), (pos, neg))
    want_grads = torch.autograd.grad(want.sum(), (pos, neg))
    for g, w in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-10)


def test_unbounded_rows_without_negatives():
    """An empty queue (N = 0) with unbounded logits: the self term comes from the positives alone (no error)."""
    pos = torch.tensor([[0.3, 2.0], [-1.0, 4.0]], dtype=torch.float64)
    b = ContrastiveBatch(pos, pos[:, :0], temperature=1.0, bounded=False, floor_logit=-30.0)
    v = cl.make_loss("debiased_pos", reduction="none")(b)
    assert torch.isfinite(v).all()


@pytest.mark.parametrize("aggregation", ["outer", "inner"])
def test_guard_off_is_the_paper_formula(aggregation, ref):
    """``guard=False`` (paper-faithful) at small ``N`` (``k = (τ⁺N − 2τ⁻)/(N(N+2)) < 0``, so ``Ê⁺`` is a
    difference) with a positive numerator: exactly eq. 2, and no clamp is reported."""
    b = ref.masked_batch(seed=22, labels=False)
    loss = cl.make_loss("debiased_pos", tau_plus=0.1, aggregation=aggregation, guard=False, reduction="none")
    torch.testing.assert_close(loss(b), ref.debiased_pos(b, 0.1, aggregation), rtol=1e-10, atol=1e-10)
    assert float(loss.last_stats["clamped_frac"]) == 0.0
