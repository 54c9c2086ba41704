"""recsys model pieces: LightGCN against a dense reference, the batch built through query_key, the metrics."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import contrastlab as cl
from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.recsys.metrics import (
    DEFAULT_KS,
    matrix_scorer,
    metric_names,
    popularity_scorer,
    ranking_metrics,
    topk_hits_metrics,
)
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


def test_encoder_defaults_are_the_documented_lightgcn_settings():
    """d = 64, N(0, 0.1²) init, K = 3 (docs/recsys.md), through the registry and the classes alike."""
    from contrastlab.plugins.recsys.model import LightGCNEncoder, MFEncoder

    for name, cls in (("mf", MFEncoder), ("lightgcn", LightGCNEncoder)):
        for enc in (cl.make_encoder(name, num_users=150, num_items=100), cls(num_users=150, num_items=100)):
            assert enc.dim == 64 and enc.user.weight.shape == (150, 64) and enc.item.weight.shape == (100, 64)
            weights = torch.cat([enc.user.weight, enc.item.weight]).detach()
            assert float(weights.std()) == pytest.approx(0.1, abs=0.005)  # 16,000 draws: std error ≈ 0.0006
            if name == "lightgcn":
                assert enc.layers == 3


@pytest.mark.parametrize(("hparams", "ok"), [
    ({"dim": 1}, True), ({"dim": 4096}, True), ({"dim": 0}, False), ({"dim": 4097}, False),
    ({"layers": 0}, True), ({"layers": 16}, True), ({"layers": -1}, False), ({"layers": 17}, False),
])  # fmt: skip
def test_encoder_size_limits(hparams, ok):
    """dim in [1, 4096] and layers in [0, 16], as `platform list encoders` shows them."""
    make = lambda: cl.make_encoder("lightgcn", num_users=2, num_items=3, **hparams)  # noqa: E731
    if ok:
        assert make() is not None
    else:
        with pytest.raises(ConfigError, match=next(iter(hparams))):
            make()


def test_lightgcn_without_a_graph_keeps_layer_zero_and_checkpoints_leave_the_graph_out():
    """No interactions: every node is isolated, so E = E⁽⁰⁾ / (K + 1); Â is rebuilt from the split, never saved."""
    enc = cl.make_encoder("lightgcn", num_users=2, num_items=3, dim=4, layers=2)
    users, items = enc()
    torch.testing.assert_close(users, enc.user.weight / 3)
    torch.testing.assert_close(items, enc.item.weight / 3)
    with_graph = cl.make_encoder("lightgcn", num_users=3, num_items=5, graph=normalized_adjacency(USERS, ITEMS, 3, 5))
    assert set(with_graph.state_dict()) == {"user.weight", "item.weight"}


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


def test_bilinear_floor_is_the_smallest_valid_negative_and_carries_no_gradient():
    """Unbounded scores use the row's smallest *valid* negative logit as the floor (masked columns do not count;
    a row with none keeps query_key's row minimum); like query_key's floor it is a constant (detached)."""
    sampler = cl.make_sampler("query_key", similarity="bilinear", temperature=0.5, embed_dim=4)
    with torch.no_grad():
        sampler.W.copy_(torch.eye(4))
    train = _keys([(0, 5), (0, 6), (0, 7), (1, 5), (2, 7)], 10)
    users, items = torch.tensor([0, 1, 0, 2]), torch.tensor([5, 5, 6, 7])
    emb_u = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    emb_i = torch.randn(10, 4, dtype=torch.float64, requires_grad=True)
    batch = build_batch(sampler, emb_u, emb_i, users, items, None, mode="in_batch", train_keys=train, num_items=10)
    assert batch.meta["known_positives_masked"] and batch.meta["negatives"] == "in_batch"
    neg, valid = batch.neg_logits.detach(), batch.neg_mask
    for row in range(4):
        want = neg[row][valid[row]].min() if valid[row].any() else neg[row].min()
        assert float(batch.floor_logit[row]) == pytest.approx(float(want))
    assert not valid[0].any() and valid[1].any() and not valid[1].all()  # both cases are exercised
    assert not batch.floor_logit.requires_grad
    unmasked = build_batch(sampler, emb_u, emb_i, users, items, None, mode="in_batch", train_keys=None, num_items=10)
    assert not unmasked.meta["known_positives_masked"]


def test_sampled_modes_without_sampled_items_are_refused():
    sampler = cl.make_sampler("query_key", similarity="cosine", temperature=0.2)
    emb_u, emb_i = torch.randn(2, 4), torch.randn(5, 4)
    for mode in ("sampled", "both"):
        for sampled in (None, torch.tensor([], dtype=torch.long)):
            with pytest.raises(ValueError, match="needs sampled items"):
                build_batch(sampler, emb_u, emb_i, torch.tensor([0, 1]), torch.tensor([0, 1]), sampled, mode=mode,
                            train_keys=None, num_items=5)


def test_is_known_with_one_or_no_training_interaction():
    one = _keys([(1, 2)], 5)
    assert is_known(one, torch.tensor([1, 1, 0]), torch.tensor([2, 3, 2]), 5).tolist() == [True, False, False]
    assert not is_known(_keys([], 5), torch.tensor([1]), torch.tensor([2]), 5).any()


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


def test_one_evaluated_user_and_a_cut_off_above_the_item_count():
    """A single user with test items is a mean over one user, not "no users"; K may exceed the items there are."""
    # 2 users × 4 items; u0: train {0}, test {1, 2}; u1: train {3}, no test items (not evaluated)
    split = Split(make_part(torch.tensor([0, 1]), torch.tensor([0, 3]), 2, 4),
                  make_part(torch.tensor([0, 0]), torch.tensor([1, 2]), 2, 4), 2, 4, 0, "one-user")
    scores = torch.tensor([[0.4, 0.1, 0.3, 0.2], [0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    got = ranking_metrics(matrix_scorer(scores), split, ks=(2, 10), prefix="")
    for k in (2, 10):  # ranks of u0 without item 0: 2, 3, 1 → hits 1, 0, 1
        want = _naive_metrics(scores, {0: {0}, 1: {3}}, {0: {1, 2}, 1: set()}, k)
        assert {key: got[key] for key in want} == pytest.approx(want, abs=1e-12)
    assert got["precision@10"] == pytest.approx(2 / 10) and got["recall@10"] == 1.0


def test_popularity_scores_every_user_by_the_training_counts():
    """The popularity baseline: each row of every user range is the items' training interaction counts."""
    split = Split(make_part(torch.tensor([0, 1, 1, 2, 3]), torch.tensor([2, 2, 0, 2, 0]), 4, 3),
                  make_part(torch.tensor([0, 2]), torch.tensor([0, 0]), 4, 3), 4, 3, 0, "pop")
    counts = torch.tensor([2.0, 0.0, 3.0])  # item 0: users 1, 3; item 1: none; item 2: users 0, 1, 2
    score = popularity_scorer(split)
    for u0, u1 in ((0, 4), (1, 3), (3, 4)):
        torch.testing.assert_close(score(u0, u1), counts[None, :].repeat(u1 - u0, 1))


def test_the_default_cut_offs_are_bcl_table_10s():
    """Precision/Recall/NDCG at 5, 10 and 20 (BCL Table 10), logged as eval/<metric>@<K>."""
    assert tuple(DEFAULT_KS) == (5, 10, 20)
    assert metric_names() == [f"eval/{m}@{k}" for k in (5, 10, 20) for m in ("precision", "recall", "ndcg")]
    got = ranking_metrics(matrix_scorer(SCORES), _toy_split())
    assert sorted(got) == sorted(metric_names())
