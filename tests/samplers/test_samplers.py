"""Sampler layouts: which columns are positives/negatives, labels, geometry, the queue's FIFO."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import contrastlab as cl


def _views(V=2, B=6, d=4, seed=0, dtype=torch.float64):
    return torch.randn(V, B, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _brute_rows(views, t):
    """Per anchor (view-major), the sorted negative logits and the positive logits by brute force."""
    V, B, _ = views.shape
    z = F.normalize(views, dim=-1).reshape(V * B, -1)
    sim = z @ z.T / t
    rows = []
    for a in range(V * B):
        v, b = divmod(a, B)
        pos = [sim[a, ((v + s) % V) * B + b] for s in range(1, V)]
        neg = torch.stack([sim[a, c] for c in range(V * B) if c % B != b])
        rows.append((torch.stack(pos), neg.sort().values))
    return rows


def test_two_view_layout():
    z = _views()
    b = cl.make_sampler("two_view", temperature=0.3)(z[0], z[1])
    B = 6
    assert b.pos_logits.shape == (2 * B, 1) and b.neg_logits.shape == (2 * B, 2 * B - 2)
    assert b.neg_mask is None and bool((b.num_negatives() == 2 * B - 2).all())
    assert (
        b.bounded
        and b.temperature == 0.3
        and torch.allclose(b.floor(), torch.full((b.num_anchors,), -1 / 0.3, dtype=b.neg_logits.dtype))
    )
    for a, (pos, neg) in enumerate(_brute_rows(z, 0.3)):
        torch.testing.assert_close(b.pos_logits[a], pos)
        torch.testing.assert_close(b.neg_logits[a].sort().values, neg)


def test_two_view_labels_follow_columns():
    z = _views(B=5)
    y = torch.tensor([3, -1, 0, 3, 1])
    b = cl.make_sampler("two_view")(z[0], z[1], labels=y)
    torch.testing.assert_close(b.anchor_labels, y.repeat(2))
    torch.testing.assert_close(b.pos_labels[:, 0], y.repeat(2))
    # the negative columns are the other samples: rebuild their labels from the logits' identity
    zn = F.normalize(z, dim=-1).reshape(10, -1)
    sim = zn @ zn.T / 0.5
    for a in range(10):
        for j in range(8):
            col = int((sim[a] - b.neg_logits[a, j]).abs().argmin())
            assert int(b.neg_labels[a, j]) == int(y[col % 5])


def test_multi_view_layout_and_two_view_equivalence():
    z = _views(V=3, B=5)
    b = cl.make_sampler("multi_view", temperature=0.5)(z)
    assert b.pos_logits.shape == (15, 2) and b.neg_logits.shape == (15, 12)
    for a, (pos, neg) in enumerate(_brute_rows(z, 0.5)):
        torch.testing.assert_close(b.pos_logits[a], pos)
        torch.testing.assert_close(b.neg_logits[a].sort().values, neg)
    seq = cl.make_sampler("multi_view")([z[0], z[1], z[2]])
    torch.testing.assert_close(seq.neg_logits, b.neg_logits)
    z2 = _views(V=2, B=5)
    mv = cl.make_sampler("multi_view")(z2)
    tv = cl.make_sampler("two_view")(z2[0], z2[1])
    torch.testing.assert_close(mv.pos_logits, tv.pos_logits)
    torch.testing.assert_close(mv.neg_logits, tv.neg_logits)


def test_compute_dtypes():
    z = _views(dtype=torch.bfloat16)
    assert cl.make_sampler("two_view")(z[0], z[1]).pos_logits.dtype == torch.float32
    z = _views(dtype=torch.float64)
    assert cl.make_sampler("two_view")(z[0], z[1]).pos_logits.dtype == torch.float64


def test_query_key_bilinear():
    torch.manual_seed(0)
    s = cl.make_sampler("query_key", embed_dim=4)
    assert s.similarity == "bilinear" and s.temperature == 1.0 and s.W.shape == (4, 4)
    z = _views(V=3, B=6, dtype=torch.float32)
    q = z[0].requires_grad_(True)
    b = s(q, [z[1], z[2]])
    full = q @ s.W @ z[1].T  # [B, B], CURL's logits
    assert b.pos_logits.shape == (6, 2) and b.neg_logits.shape == (6, 5)
    torch.testing.assert_close(b.pos_logits[:, 0], full.diagonal())
    torch.testing.assert_close(b.pos_logits[:, 1], (q @ s.W * z[2]).sum(1))
    for i in range(6):
        others = torch.cat([full[i, :i], full[i, i + 1 :]])
        torch.testing.assert_close(b.neg_logits[i], others)
    assert b.bounded is False
    torch.testing.assert_close(b.floor_logit, b.neg_logits.detach().amin(1))  # documented floor: row min
    cl.make_loss("dcl")(b).backward()
    assert s.W.grad is not None and q.grad is not None


def test_query_key_cosine_and_single_key():
    s = cl.make_sampler("query_key", similarity="cosine", temperature=0.2)
    assert not hasattr(s, "W") or s.W is None
    z = _views(B=5)
    b = s(z[0], z[1], labels=torch.tensor([0, 1, 0, -1, 1]))
    assert b.bounded and b.floor_logit is None and b.pos_logits.shape == (5, 1)
    torch.testing.assert_close(b.pos_logits[:, 0], F.cosine_similarity(z[0], z[1]) / 0.2)
    assert b.neg_labels.shape == (5, 4) and b.anchor_labels.tolist() == [0, 1, 0, -1, 1]


def test_queue_fifo_and_mask():
    s = cl.make_sampler("queue", size=7, temperature=0.5)
    z = _views(V=8, B=3, seed=1)
    b0 = s(z[0], z[1], labels=torch.tensor([0, 1, 2]))
    assert b0.neg_logits.shape == (3, 0)  # empty queue: no negatives yet
    b1 = s(z[2], z[3], labels=torch.tensor([3, 4, 5]))
    assert b1.neg_logits.shape == (3, 7) and bool((b1.num_negatives() == 3).all())
    kn = F.normalize(z[1], dim=-1)
    torch.testing.assert_close(b1.neg_logits[:, :3], F.normalize(z[2], dim=-1) @ kn.T / 0.5)
    assert b1.neg_labels[0, :3].tolist() == [0, 1, 2]
    s(z[4], z[5], labels=torch.tensor([6, 7, 8]))  # fills 9 > 7 keys: wraps around
    assert int(s.filled) == 7 and int(s.ptr) == 2
    b3 = s(z[6], z[7])
    assert b3.neg_mask is None and b3.neg_logits.shape == (3, 7)
    # the queue holds the last 7 keys, oldest overwritten first (the last call enqueued 3 unlabeled keys)
    assert s.key_labels.tolist() == [7, 8, -1, -1, -1, 5, 6] and int(s.ptr) == 5
    torch.testing.assert_close(s.keys[5], F.normalize(z[3], dim=-1)[2])
    torch.testing.assert_close(s.keys[[6, 0, 1]], F.normalize(z[5], dim=-1))
    assert s.keys.requires_grad is False


def test_queue_state_dict_roundtrip():
    s = cl.make_sampler("queue", size=5)
    z = _views(V=4, B=3, seed=2, dtype=torch.float32)
    s(z[0], z[1], labels=torch.tensor([1, -1, 1]))
    s(z[2], z[3], labels=torch.tensor([-1, 1, -1]))
    fresh = cl.make_sampler("queue", size=5)
    fresh.load_state_dict(s.state_dict())
    torch.testing.assert_close(fresh.keys, s.keys)
    assert fresh.key_labels.tolist() == s.key_labels.tolist() and int(fresh.ptr) == int(s.ptr)
    q = torch.randn(3, 4)
    torch.testing.assert_close(fresh(q, q).neg_logits, s(q, q).neg_logits)


def test_samplers_are_modules_with_documented_hparams():
    for name in ("two_view", "multi_view", "query_key", "queue"):
        s = cl.make_sampler(name, embed_dim=8)
        assert isinstance(s, torch.nn.Module)
        for hp in type(s).hyperparameters:
            assert hp.description and hp.range and hp.source


def test_queue_keys_in_another_dtype_than_the_queries():
    """float64 queries with float32 keys (e.g. a momentum encoder kept in float32): the queue used to store the keys
    as float32, find them "incompatible" with the float64 queries on every call, and give no negatives ever (InfoNCE
    silently 0 forever). Keys now follow the queries' dtype."""
    s = cl.make_sampler("queue", size=8, temperature=0.5)
    z = _views(V=4, B=3, seed=2)
    s(z[0], z[1].float())
    b = s(z[2], z[3].float())
    assert b.neg_logits.dtype == torch.float64 and bool((b.num_negatives() == 3).all())
    want = F.normalize(z[2], dim=-1) @ F.normalize(z[1].float(), dim=-1).double().T / 0.5
    torch.testing.assert_close(b.neg_logits[:, :3], want)
    assert float(cl.make_loss("infonce")(b)) > 0


def test_query_key_cosine_keys_in_another_dtype_than_the_queries():
    """Cosine scores of float64 queries against float32 keys (the bilinear path already cast; cosine raised)."""
    s = cl.make_sampler("query_key", similarity="cosine", temperature=0.2)
    z = _views(V=2, B=4, seed=3)
    b = s(z[0], z[1].float())
    assert b.neg_logits.dtype == torch.float64
    torch.testing.assert_close(b.pos_logits[:, 0], F.cosine_similarity(z[0], z[1].float().double()) / 0.2)
