"""recsys model pieces: LightGCN against a dense reference, the batch built through query_key, the metrics."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import contrastlab as cl
from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.recsys.metrics import matrix_scorer, ranking_metrics, topk_hits_metrics
from contrastlab.plugins.recsys.model import normalized_adjacency
from contrastlab.plugins.recsys.pairs import build_batch, is_known, negative_keys
from contrastlab.plugins.recsys.split import Split, make_part

# ----------------------------------------------------------------------------------------------- LightGCN
USERS = torch.tensor([0, 0, 1, 2, 2, 2])
ITEMS = torch.tensor([0, 1, 1, 1, 2, 3])


def _dense_lightgcn(e0: torch.Tensor, num_users: int, layers: int) -> torch.Tensor:
    """E = mean_k Âᵏ E⁽⁰⁾ with Â = D^{-1/2} A D^{-1/2} built densely from the same interactions."""
    n = e0.shape[0]
    a = torch.zeros(n, n, dtype=torch.float64)
    a[USERS, ITEMS + num_users] = 1.0
    a[ITEMS + num_users, USERS] = 1.0
    d = a.sum(1)
    inv = torch.where(d > 0, d.rsqrt(), torch.zeros_like(d))
    a_hat = inv[:, None] * a * inv[None, :]
    layer, out = e0, e0.clone()
    for _ in range(layers):
        layer = a_hat @ layer
        out = out + layer
    return out / (layers + 1)


@pytest.mark.parametrize("layers", [0, 1, 3])
def test_lightgcn_matches_dense_reference(layers):
    graph = normalized_adjacency(USERS, ITEMS, 3, 5)  # item 4 is isolated
    enc = cl.make_encoder("lightgcn", num_users=3, num_items=5, graph=graph, dim=4, layers=layers)
    users, items = enc()
    e0 = torch.cat([enc.user.weight, enc.item.weight]).detach().double()
    ref = _dense_lightgcn(e0, 3, layers)
    torch.testing.assert_close(torch.cat([users, items]).double(), ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(items[4].double(), e0[3 + 4] / (layers + 1))  # isolated: only layer 0 counts
    (users.sum() + items.sum()).backward()
    assert enc.user.weight.grad is not None and enc.item.weight.grad is not None
    mf_users, mf_items = cl.make_encoder("mf", num_users=3, num_items=5, graph=graph, dim=4)()
    assert mf_users.shape == (3, 4) and mf_items.shape == (5, 4)


# ----------------------------------------------------------------------------------------------- batches
def test_negative_columns_follow_query_key_order():
    sampler = cl.make_sampler("query_key", similarity="cosine", temperature=0.5)
    q, k = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    batch = sampler(q, k)
    cos = F.normalize(q, dim=1) @ F.normalize(k, dim=1).T / 0.5  # [6, 6]
    cols = negative_keys(6, 6)
    torch.testing.assert_close(batch.neg_logits, cos.gather(1, cols))
    torch.testing.assert_close(batch.pos_logits[:, 0], cos.diagonal())


def _keys(pairs: list[tuple[int, int]], num_items: int) -> torch.Tensor:
    return torch.tensor(sorted(u * num_items + i for u, i in pairs))


def test_in_batch_negatives_mask_known_positives_and_duplicate_items():
    # training set: user 0 has items {5, 6}, user 1 has {5}; the batch repeats item 5 and user 0
    train = _keys([(0, 5), (0, 6), (1, 5)], 10)
    users, items = torch.tensor([0, 1, 0]), torch.tensor([5, 5, 6])
    emb_u, emb_i = torch.randn(2, 4), torch.randn(10, 4)
    sampler = cl.make_sampler("query_key", similarity="cosine", temperature=0.2)
    batch = build_batch(sampler, emb_u, emb_i, users, items, None, mode="in_batch", train_keys=train, num_items=10)
    # row 0 (user 0, item 5): keys 1 (item 5) and 2 (item 6) are both user 0's own items → masked
    # row 1 (user 1, item 5): key 0 (item 5, its own) masked, key 2 (item 6) a real negative
    # row 2 (user 0, item 6): keys 0 and 1 (item 5, user 0's) masked
    assert batch.neg_mask.tolist() == [[False, False], [False, True], [False, False]]
    unmasked = build_batch(sampler, emb_u, emb_i, users, items, None, mode="in_batch", train_keys=None,
                           num_items=10)
    assert unmasked.neg_mask.all() and torch.equal(unmasked.neg_logits, batch.neg_logits)
    loss = cl.make_loss("dcl", tau_plus=0.05)(batch)  # a row with no valid negative is still finite
    assert torch.isfinite(loss)
    assert is_known(train, torch.tensor([0, 1, 1]), torch.tensor([6, 6, 5]), 10).tolist() == [True, False, True]


def test_sampled_negatives_only_use_the_sampled_items():
    train = _keys([(0, 1), (1, 2), (0, 3)], 8)
    users, items = torch.tensor([0, 1]), torch.tensor([1, 2])
    sampled = torch.tensor([3, 4, 5])
    emb_u, emb_i = torch.randn(2, 4, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
    sampler = cl.make_sampler("query_key", similarity="cosine", temperature=0.2)
    for mode, expect in (("sampled", [[False, False, True, True], [False, True, True, True]]),
                         ("both", [[True, False, True, True], [True, True, True, True]])):
        batch = build_batch(sampler, emb_u, emb_i, users, items, sampled, mode=mode, train_keys=train, num_items=8)
        assert batch.pos_logits.shape == (2, 1) and batch.neg_logits.shape == (2, 4)
        assert batch.neg_mask.tolist() == expect  # row 0: key 2 = item 3 is user 0's own → masked
    cos = F.normalize(emb_u, dim=1) @ F.normalize(emb_i, dim=1).T / 0.2
    torch.testing.assert_close(batch.neg_logits[0, 1:], cos[0, sampled])  # keys 2.. are the sampled items
    torch.testing.assert_close(batch.pos_logits[:, 0], cos[users, items])


def test_dot_product_through_bilinear_identity():
    sampler = cl.make_sampler("query_key", similarity="bilinear", temperature=0.5, embed_dim=4)
    with torch.no_grad():
        sampler.W.copy_(torch.eye(4))
    u, i = torch.randn(3, 4), torch.randn(5, 4)
    batch = build_batch(sampler, u, i, torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2]), None, mode="in_batch",
                        train_keys=None, num_items=5)
    torch.testing.assert_close(batch.pos_logits[:, 0], (u * i[:3]).sum(1) / 0.5)
    assert not batch.bounded


# ----------------------------------------------------------------------------------------------- metrics
def _toy_split() -> Split:
    """3 users × 5 items. u0: train {0}, test {2, 4}; u1: train {3, 4}, test {0}; u2: train {1}, test {0}."""
    tr = make_part(torch.tensor([0, 1, 1, 2]), torch.tensor([0, 3, 4, 1]), 3, 5)
    te = make_part(torch.tensor([0, 0, 1, 2]), torch.tensor([2, 4, 0, 0]), 3, 5)
    return Split(tr, te, 3, 5, 0, "toy")


SCORES = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5],   # u0 ranks 1, 2, 3, 4 once item 0 is masked → hits 0, 1, 0, 1
                       [0.1, 0.2, 0.3, 0.4, 0.5],   # u1 ranks 2, 1, 0 once items 4, 3 are masked → hits 0, 0, 1
                       [0.5, 0.4, 0.3, 0.2, 0.1]])  # u2 ranks 0, 2, 3, 4 once item 1 is masked → hits 1, 0, 0


def test_metrics_match_a_hand_computed_example():
    g = 1 / math.log2(3)  # discount of rank 2; rank 1 has 1, rank 3 has 1/log2(4) = 1/2
    ndcg_u0 = g / (1 + g)  # one hit at rank 2, two test items (IDCG = 1 + g) for K >= 2
    expected = {
        "precision@1": (0 + 0 + 1) / 3, "recall@1": (0 + 0 + 1) / 3, "ndcg@1": (0 + 0 + 1) / 3,
        "precision@2": (1 / 2 + 0 + 1 / 2) / 3, "recall@2": (1 / 2 + 0 + 1) / 3, "ndcg@2": (ndcg_u0 + 0 + 1) / 3,
        "precision@3": (1 / 3 + 1 / 3 + 1 / 3) / 3, "recall@3": (1 / 2 + 1 + 1) / 3,
        "ndcg@3": (ndcg_u0 + 0.5 + 1) / 3,  # u1: hit at rank 3 → (1/2) / IDCG(1 item) = 1/2
    }
    for batch_users in (1, 2, 3):  # user batches must not change the result
        got = ranking_metrics(matrix_scorer(SCORES), _toy_split(), ks=(1, 2, 3), batch_users=batch_users, prefix="")
        assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_scores_are_refused_not_ranked(bad):
    """topk over nan scores returns an arbitrary order, which would read as a near-random but valid result."""
    scores = SCORES.clone()
    scores[2, 1] = bad
    with pytest.raises(ConfigError, match="non-finite scores"):
        ranking_metrics(matrix_scorer(scores), _toy_split(), ks=(1, 2, 3), prefix="")


def test_training_items_are_masked_and_users_without_test_items_skipped():
    split = _toy_split()
    top_train = SCORES.clone()
    top_train[1, 4] = top_train[1, 3] = 10.0  # u1's training items score highest
    assert ranking_metrics(matrix_scorer(top_train), split, ks=(1, 2, 3), prefix="") == pytest.approx(
        ranking_metrics(matrix_scorer(SCORES), split, ks=(1, 2, 3), prefix=""))
    no_test_u1 = Split(split.train, make_part(torch.tensor([0, 0, 2]), torch.tensor([2, 4, 0]), 3, 5), 3, 5, 0, "t")
    got = ranking_metrics(matrix_scorer(SCORES), no_test_u1, ks=(1,), prefix="")
    assert got["precision@1"] == pytest.approx(1 / 2)  # mean over u0 (0) and u2 (1) only
    per_user = topk_hits_metrics(torch.tensor([[1.0, 1.0]]), torch.tensor([5]), (2,))
    assert float(per_user["recall@2"][0]) == pytest.approx(2 / 5) and float(per_user["ndcg@2"][0]) == 1.0


def _naive_metrics(scores: torch.Tensor, train: dict[int, set[int]], test: dict[int, set[int]], k: int
                   ) -> dict[str, float]:
    """One user at a time, in plain Python: rank the non-training items, count hits in the top k."""
    p = r = n = 0.0
    users = [u for u in test if test[u]]
    for u in users:
        ranked = sorted((i for i in range(scores.shape[1]) if i not in train[u]), key=lambda i: -float(scores[u, i]))
        hits = [1.0 if i in test[u] else 0.0 for i in ranked[:k]]
        dcg = sum(h / math.log2(rank + 2) for rank, h in enumerate(hits))
        idcg = sum(1 / math.log2(rank + 2) for rank in range(min(k, len(test[u]))))
        p, r, n = p + sum(hits) / k, r + sum(hits) / len(test[u]), n + dcg / idcg
    return {f"precision@{k}": p / len(users), f"recall@{k}": r / len(users), f"ndcg@{k}": n / len(users)}


def test_metrics_match_a_per_user_loop_on_a_random_split():
    """30 users × 40 items: test sets of 0 to 12 items (so |T_u| is below, equal to and above K = 5)."""
    g = torch.Generator().manual_seed(0)
    train, test, pairs_tr, pairs_te = {}, {}, [], []
    for u in range(30):
        items = torch.randperm(40, generator=g)
        n_tr, n_te = 1 + u % 7, u % 13
        train[u], test[u] = set(items[:n_tr].tolist()), set(items[n_tr:n_tr + n_te].tolist())
        pairs_tr += [(u, i) for i in train[u]]
        pairs_te += [(u, i) for i in test[u]]
    part = lambda pairs: make_part(torch.tensor([a for a, _ in pairs]), torch.tensor([b for _, b in pairs]), 30, 40)  # noqa: E731
    split = Split(part(pairs_tr), part(pairs_te), 30, 40, 0, "random")
    scores = torch.rand(30, 40, generator=g, dtype=torch.float64)
    for batch_users in (7, 30):
        got = ranking_metrics(matrix_scorer(scores), split, ks=(5, 20), batch_users=batch_users, prefix="")
        for k in (5, 20):
            want = _naive_metrics(scores, train, test, k)
            assert {key: got[key] for key in want} == pytest.approx(want, abs=1e-12)
