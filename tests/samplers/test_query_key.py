"""``query_key`` (CURL's layout) built by hand: on rank ``r`` of a world, and its ``floor`` choices."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import contrastlab as cl
from contrastlab.samplers import query_key


def _scores(q, k, similarity, W, t):
    """``ℓ(q, k)``: ``q W kᵀ / t`` (CURL) or ``cos(q, k) / t``."""
    return (q @ W @ k) / t if similarity == "bilinear" else F.cosine_similarity(q, k, dim=0) / t


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("similarity", ["bilinear", "cosine"])
def test_rank_r_of_a_world_of_2(fake_world, rank, similarity):
    """Query ``i`` of rank ``r`` (global ``g = r·B + i``): positives ``keys[m][i]``, negatives the first key set's
    keys of every other global sample, in global order."""
    Wd, B, d, t = 2, 3, 4, 0.7
    gen = torch.Generator().manual_seed(rank)
    q_all, k0_all, k1_all = torch.randn(3, Wd * B, d, generator=gen, dtype=torch.float64)
    labels_all = torch.tensor([0, 1, -1, 1, 0, 1])
    shard = [slice(i * B, (i + 1) * B) for i in range(Wd)]
    torch.manual_seed(0)
    sampler = cl.make_sampler("query_key", similarity=similarity, temperature=t, embed_dim=d).double()
    W = sampler.W.detach() if similarity == "bilinear" else None
    sent = k0_all if similarity == "bilinear" else F.normalize(k0_all, dim=-1)  # what a rank gathers
    fake_world(query_key, rank, Wd, {"keys": [sent[s] for s in shard]}, [labels_all[s] for s in shard])
    q = q_all[shard[rank]].clone().requires_grad_(True)
    batch = sampler(q, [k0_all[shard[rank]], k1_all[shard[rank]]], labels=labels_all[shard[rank]])
    pos, neg, neg_lab = [], [], []
    for i in range(B):
        g = rank * B + i
        pos.append(torch.stack([_scores(q[i], k[g], similarity, W, t) for k in (k0_all, k1_all)]))
        neg.append(torch.stack([_scores(q[i], k0_all[j], similarity, W, t) for j in range(Wd * B) if j != g]))
        neg_lab.append([int(labels_all[j]) for j in range(Wd * B) if j != g])
    pos, neg = torch.stack(pos), torch.stack(neg)
    torch.testing.assert_close(batch.pos_logits, pos)
    torch.testing.assert_close(batch.neg_logits, neg)
    assert batch.meta["world_size"] == Wd and batch.meta["rank"] == rank
    local = labels_all[shard[rank]]
    assert torch.equal(batch.anchor_labels, local) and torch.equal(batch.pos_labels, local[:, None].expand(B, 2))
    assert batch.neg_labels.tolist() == neg_lab
    w = torch.randn(neg.shape, generator=gen, dtype=torch.float64)
    got = torch.autograd.grad((batch.neg_logits * w).sum() - batch.pos_logits.sum(), q)[0]
    torch.testing.assert_close(got, torch.autograd.grad((neg * w).sum() - pos.sum(), q)[0])


# (similarity, floor) -> (negative_floor, floor_logit is the row's smallest negative logit), from the docstring:
# auto = trimmed for bilinear and bound for cosine; row_min = N·e^{min ℓ} (the "bound" rule at the row minimum);
# bilinear scores always carry their row minimum (DebiasedPos' guard), cosine ones only for row_min.
FLOOR_RULES = {
    ("bilinear", "auto"): ("trimmed", True), ("bilinear", "trimmed"): ("trimmed", True),
    ("bilinear", "row_min"): ("bound", True),
    ("cosine", "auto"): ("bound", False), ("cosine", "bound"): ("bound", False),
    ("cosine", "trimmed"): ("trimmed", False), ("cosine", "row_min"): ("bound", True),
}


@pytest.mark.parametrize(("similarity", "floor"), FLOOR_RULES)
def test_floor_choices(similarity, floor):
    negative_floor, row_min = FLOOR_RULES[similarity, floor]
    z = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(1))
    batch = cl.make_sampler("query_key", similarity=similarity, floor=floor, temperature=0.5, embed_dim=4)(z[0], z[1])
    assert batch.negative_floor == negative_floor and batch.bounded == (similarity == "cosine")
    if row_min:
        torch.testing.assert_close(batch.floor_logit, batch.neg_logits.detach().amin(dim=1))
        assert not batch.floor_logit.requires_grad
    else:
        assert batch.floor_logit is None
        torch.testing.assert_close(batch.floor(), torch.full((5,), -1 / 0.5))


def test_bilinear_refuses_the_bound_floor_and_needs_embed_dim():
    with pytest.raises(cl.ConfigError, match="floor='bound'"):
        cl.make_sampler("query_key", floor="bound", embed_dim=4)
    with pytest.raises(cl.ConfigError, match="needs embed_dim"):
        cl.make_sampler("query_key")


def test_one_query_has_no_negatives_and_no_row_minimum():
    batch = cl.make_sampler("query_key", embed_dim=3)(torch.randn(1, 3), torch.randn(1, 3))
    assert batch.neg_logits.shape == (1, 0) and batch.floor_logit is None
    two = cl.make_sampler("query_key", embed_dim=3)(torch.randn(2, 3), torch.randn(2, 3))  # one negative each
    assert two.neg_logits.shape == (2, 1) and torch.equal(two.floor_logit, two.neg_logits.detach()[:, 0])


def test_keys_must_be_given_and_match_the_queries():
    s = cl.make_sampler("query_key", similarity="cosine")
    q = torch.randn(4, 3)
    for keys, match in (([], "keys"), ([q, torch.randn(3, 3)], r"keys\[1\]"), (torch.randn(4, 2), r"keys\[0\]")):
        with pytest.raises(cl.ConfigError, match=match):
            s(q, keys)
    with pytest.raises(cl.ConfigError, match="queries"):
        cl.make_sampler("query_key", embed_dim=4)(q, q)


def test_gather_distributed_false_keeps_the_local_batch(fake_world):
    B = 3
    k_other = torch.randn(B, 4, generator=torch.Generator().manual_seed(4))
    fake_world(query_key, 1, 2, {"keys": [k_other, None]}, [torch.tensor([5, 6, 7]), None])
    q, k = torch.randn(2, B, 4, generator=torch.Generator().manual_seed(5))
    labels = torch.tensor([0, 1, 2])
    gathered = cl.make_sampler("query_key", embed_dim=4)(q, k, labels=labels)  # gathers by default
    assert gathered.neg_logits.shape == (B, 2 * B - 1) and gathered.neg_labels[0].tolist() == [5, 6, 7, 1, 2]
    batch = cl.make_sampler("query_key", embed_dim=4, gather_distributed=False)(q, k, labels=labels)
    assert batch.neg_logits.shape == (B, B - 1) and batch.meta["world_size"] == 1 and batch.meta["rank"] == 0
    assert batch.neg_labels.tolist() == [[1, 2], [0, 2], [0, 1]]
