"""``multi_view``/``two_view`` on rank ``r`` of a world: the batch built by hand from the SimCLR definition.

Anchor ``(u, b)`` of rank ``r`` is global sample ``g = r·B + b``; its positives are the same sample's other views
``u+1, u+2, …`` (mod ``V``), its negatives every view of every other global sample (view-major columns).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import contrastlab as cl
from contrastlab.samplers import multi_view
from contrastlab.samplers.multi_view import build_multi_view


def _expected(views_all, labels_all, rank, B, t):
    """Logits and labels of rank ``rank``'s anchors, element by element (differentiable in ``views_all``)."""
    V, B_total, _ = views_all.shape
    z = F.normalize(views_all, dim=-1)
    pos, neg, a_lab, p_lab, n_lab = [], [], [], [], []
    for u in range(V):
        for b in range(B):
            g = rank * B + b
            others = [c for c in range(B_total) if c != g]
            pos.append(torch.stack([z[u, g] @ z[(u + s) % V, g] / t for s in range(1, V)]))
            neg.append(torch.stack([z[u, g] @ z[v, c] / t for v in range(V) for c in others]))
            if labels_all is not None:
                a_lab.append(int(labels_all[g]))
                p_lab.append([int(labels_all[g])] * (V - 1))
                n_lab.append([int(labels_all[c]) for _ in range(V) for c in others])
    labels = None if labels_all is None else (torch.tensor(a_lab), torch.tensor(p_lab), torch.tensor(n_lab))
    return torch.stack(pos), torch.stack(neg), labels


@pytest.mark.parametrize("rank", [0, 1, 2])
@pytest.mark.parametrize("V", [2, 3])
@pytest.mark.parametrize("with_labels", [True, False])
def test_rank_r_of_a_world_of_3(fake_world, rank, V, with_labels):
    W, B, t = 3, 3, 0.4
    gen = torch.Generator().manual_seed(7 * rank + V)
    views_all = torch.randn(V, W * B, 5, generator=gen, dtype=torch.float64)
    labels_all = torch.randint(-1, 4, (W * B,), generator=gen) if with_labels else None
    shard = [slice(i * B, (i + 1) * B) for i in range(W)]
    fake_world(multi_view, rank, W, {"views": [F.normalize(views_all[:, s], dim=-1) for s in shard]},
               None if labels_all is None else [labels_all[s] for s in shard])
    local = views_all[:, shard[rank]].clone().requires_grad_(True)
    lab = None if labels_all is None else labels_all[shard[rank]]
    batch = (cl.make_sampler("two_view", temperature=t)(local[0], local[1], labels=lab) if V == 2
             else cl.make_sampler("multi_view", temperature=t)(local, labels=lab))
    ref_views = views_all.clone()
    ref_views[:, shard[rank]] = local  # gradient reaches only this rank's views, as through the real gather
    pos, neg, labels = _expected(ref_views, labels_all, rank, B, t)
    assert batch.meta["world_size"] == W and batch.meta["rank"] == rank and batch.meta["views"] == V
    assert batch.bounded and batch.temperature == t and batch.neg_mask is None  # cosine / t: floor -1/t
    torch.testing.assert_close(batch.pos_logits, pos)
    torch.testing.assert_close(batch.neg_logits, neg)
    if labels is None:
        assert batch.anchor_labels is None and batch.pos_labels is None and batch.neg_labels is None
    else:
        assert torch.equal(batch.anchor_labels, labels[0]) and torch.equal(batch.pos_labels, labels[1])
        assert torch.equal(batch.neg_labels, labels[2])
    w = torch.randn(neg.shape, generator=gen, dtype=torch.float64)
    got = torch.autograd.grad((batch.neg_logits.exp() * w).sum() - batch.pos_logits.sum(), local)[0]
    want = torch.autograd.grad((neg.exp() * w).sum() - pos.sum(), local)[0]
    torch.testing.assert_close(got, want)


def test_gathering_is_on_by_default_and_can_be_turned_off(fake_world):
    """``gather_distributed`` (samplers) and ``gather`` (``build_multi_view``) default to True (docs/losses.md)."""
    B = 2
    views_all = torch.randn(2, 2 * B, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    fake_world(multi_view, 1, 2, {"views": [F.normalize(views_all[:, :B], dim=-1), None]}, None)
    local = views_all[:, B:]
    assert cl.make_sampler("two_view").gather_distributed is True
    for batch in (cl.make_sampler("multi_view")(local), build_multi_view(local, None, 0.5)):
        assert batch.meta["world_size"] == 2 and batch.neg_logits.shape == (2 * B, 2 * (2 * B - 1))
    for batch in (cl.make_sampler("multi_view", gather_distributed=False)(local),
                  build_multi_view(local, None, 0.5, gather=False)):
        assert batch.meta["world_size"] == 1 and batch.meta["rank"] == 0
        assert batch.neg_logits.shape == (2 * B, 2 * (B - 1))
