"""The single-process strided split of ``multi_view``/``two_view`` equals the index-gather construction."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import contrastlab as cl
from contrastlab.samplers.base import multi_view_index


def _reference(views: torch.Tensor, labels: torch.Tensor | None, t: float):
    """The index-gather layout (the distributed path with one rank): logits, then ``gather`` of the columns."""
    V, B, _ = views.shape
    z = F.normalize(views, dim=-1)
    logits = (z.reshape(V * B, -1) / t) @ z.reshape(V * B, -1).T  # [A, V·B] view-major candidates
    pos_idx, neg_idx = multi_view_index(V, B, B, 0, views.device)
    out = [logits.gather(1, pos_idx), logits.gather(1, neg_idx)]
    if labels is not None:
        cand = labels.repeat(V)
        out += [cand[pos_idx[:, 0]], cand[pos_idx], cand[neg_idx]]
    return out


@pytest.mark.parametrize(("V", "B"), [(2, 1), (2, 2), (2, 7), (3, 5), (4, 3)])
def test_fast_path_matches_gather(V, B):
    gen = torch.Generator().manual_seed(10 * V + B)
    views = torch.randn(V, B, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(-1, 3, (B,), generator=gen)
    batch = cl.make_sampler("multi_view", temperature=0.4)(views, labels=labels)
    pos, neg, a_lab, p_lab, n_lab = _reference(views, labels, 0.4)
    torch.testing.assert_close(batch.pos_logits, pos)
    torch.testing.assert_close(batch.neg_logits, neg)  # same columns in the same (sample-major) order
    assert torch.equal(batch.anchor_labels, a_lab) and torch.equal(batch.pos_labels, p_lab)
    assert torch.equal(batch.neg_labels, n_lab) and batch.neg_labels.dtype == torch.long
    # gradients of an arbitrary function of both outputs (also through only one of them)
    wp = torch.randn(pos.shape, generator=gen, dtype=torch.float64)
    wn = torch.randn(neg.shape, generator=gen, dtype=torch.float64)
    for use_pos, use_neg in ((True, True), (True, False), (False, True)):
        def f(p, n, use_pos=use_pos, use_neg=use_neg):
            return (p * wp).sum() * use_pos + (n.sin() * wn).sum() * use_neg

        g_fast = torch.autograd.grad(f(batch.pos_logits, batch.neg_logits), views, retain_graph=True)[0]
        g_ref = torch.autograd.grad(f(pos, neg), views, retain_graph=True)[0]
        torch.testing.assert_close(g_fast, g_ref)


def test_two_view_gradcheck():
    gen = torch.Generator().manual_seed(3)
    z1 = torch.randn(4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    sampler = cl.make_sampler("two_view")

    def f(a, b):
        batch = sampler(a, b)
        return batch.pos_logits, batch.neg_logits

    assert torch.autograd.gradcheck(f, (z1, z2))


@pytest.mark.parametrize("V", [2, 3])
def test_fast_path_bitwise_equal_to_gather_float32(V):
    """Same sums in the same order as autograd through the gather path (the DDP tests compare the two)."""
    gen = torch.Generator().manual_seed(V)
    views = torch.randn(V, 16, 8, generator=gen, requires_grad=True)
    batch = cl.make_sampler("multi_view", temperature=0.5)(views)
    pos, neg = _reference(views, None, 0.5)
    assert torch.equal(batch.pos_logits, pos) and torch.equal(batch.neg_logits, neg)
    w = torch.randn(neg.shape, generator=gen)
    g_fast = torch.autograd.grad((batch.neg_logits.exp() * w).sum() - batch.pos_logits.sum(), views)[0]
    g_ref = torch.autograd.grad((neg.exp() * w).sum() - pos.sum(), views)[0]
    assert torch.equal(g_fast, g_ref)
