"""The samplers' shared checks and index tables (``contrastlab.samplers.base``), against their definitions."""

from __future__ import annotations

import math

import pytest
import torch

import contrastlab as cl
from contrastlab.samplers.base import (
    as_views,
    check_embeddings,
    check_labels,
    compute_dtype,
    feed_views,
    multi_view_index,
    positive_finite,
)

CPU = torch.device("cpu")


@pytest.mark.parametrize(("value", "ok"), [
    (1e-300, True), (0.5, True), (3, True), (1e300, True),
    (0, False), (0.0, False), (-0.1, False), (math.inf, False), (math.nan, False), (True, False), ("0.5", False),
])
def test_positive_finite_is_the_open_interval_zero_infinity(value, ok):
    assert positive_finite(value) is ok
    if ok:
        assert cl.make_sampler("two_view", temperature=value).temperature == value
    elif not isinstance(value, str):  # strings are coerced first (command-line values)
        with pytest.raises(cl.ConfigError, match="temperature"):
            cl.make_sampler("two_view", temperature=value)


def test_compute_dtype_upcasts_everything_but_float64():
    for dtype, want in ((torch.float64, torch.float64), (torch.float32, torch.float32),
                        (torch.float16, torch.float32), (torch.bfloat16, torch.float32)):
        assert compute_dtype(torch.zeros(1, dtype=dtype)) == want


def test_check_embeddings_wants_a_floating_b_by_d_tensor():
    x = torch.zeros(3, 4)
    assert check_embeddings(x, "s", "z") is x and check_embeddings(x, "s", "z", 3, 4) is x
    bad = [(torch.zeros(3, 4, dtype=torch.long), {}), (torch.zeros(12), {}), (torch.zeros(1, 3, 4), {}),
           ([[0.0] * 4] * 3, {}), (x, {"batch": 2}), (x, {"dim": 5}), (x, {"batch": 3, "dim": 3})]
    for value, kwargs in bad:
        with pytest.raises(cl.ConfigError, match="sampler 's': z must be a floating tensor"):
            check_embeddings(value, "s", "z", **kwargs)


def test_check_labels_takes_integer_classes_or_minus_one():
    assert check_labels(None, "s", 3, CPU) is None
    out = check_labels(torch.tensor([-1, 0, 7], dtype=torch.int32), "s", 3, CPU)
    assert out.dtype == torch.long and out.tolist() == [-1, 0, 7]
    assert check_labels(torch.zeros(0, dtype=torch.long), "s", 0, CPU).shape == (0,)
    bad = [torch.tensor([0.0, 1.0, 1.0]), torch.tensor([True, False, True]), torch.tensor([0, 1]),
           torch.tensor([[0, 1, 1]]), [0, 1, 1], torch.tensor([0, -2, 1])]
    for labels in bad:
        with pytest.raises(cl.ConfigError, match="sampler 's': labels must be"):
            check_labels(labels, "s", 3, CPU)


def test_as_views_takes_a_v_b_d_tensor_or_a_sequence_of_b_d():
    v = torch.randn(3, 2, 4)
    assert as_views(v, "s") is v
    torch.testing.assert_close(as_views([v[0], v[1], v[2]], "s"), v)
    torch.testing.assert_close(as_views((v[0],), "s"), v[:1])
    for bad in (v.long(), v[0], v[None], [], None, [v[0], v[1, :1]], [v[0], v[1, :, :3]]):
        with pytest.raises(cl.ConfigError, match="sampler 's': views"):
            as_views(bad, "s")


def test_feed_views_calls_each_kind_as_documented():
    calls = []

    def sampler(*args, labels=None):
        calls.append((args, labels))
        return len(args)

    views, labels = torch.randn(2, 3, 4), torch.tensor([0, 1, 0])
    assert feed_views(sampler, "multi_views", views, labels) == 1 and calls[-1][0][0] is views
    assert feed_views(sampler, "two_views", views, labels) == 2 and calls[-1][1] is labels
    assert torch.equal(calls[-1][0][0], views[0]) and torch.equal(calls[-1][0][1], views[1])
    with pytest.raises(cl.ConfigError, match="takes 2 views; got V=3"):
        feed_views(sampler, "two_views", torch.randn(3, 3, 4))
    with pytest.raises(ValueError, match="queue"):
        feed_views(sampler, "queue", views)


@pytest.mark.parametrize("embed_dim", [0, -3, 2.0, True, "8"])
def test_embed_dim_must_be_a_positive_integer(embed_dim):
    with pytest.raises(cl.ConfigError, match="embed_dim must be a positive integer"):
        cl.make_sampler("two_view", embed_dim=embed_dim)


def test_embed_dim_one_and_none_are_accepted():
    assert cl.make_sampler("two_view", embed_dim=1).embed_dim == 1
    assert cl.make_sampler("two_view").embed_dim is None and "embed_dim" not in repr(cl.make_sampler("two_view"))


@pytest.mark.parametrize(("V", "B", "W", "rank"), [(2, 2, 2, 1), (3, 2, 3, 2), (2, 3, 1, 0), (1, 3, 2, 1)])
def test_multi_view_index_from_its_definition(V, B, W, rank):
    """Candidates view-major (``v·B_total + c``); anchor ``(u, b)`` of rank ``r`` is global sample ``g = r·B + b``:
    positives its views ``u+1, u+2, …`` (mod ``V``), negatives every view of every other global sample."""
    B_total = W * B
    pos_idx, neg_idx = multi_view_index(V, B, B_total, rank * B, CPU)
    want_pos, want_neg = [], []
    for u in range(V):
        for b in range(B):
            g = rank * B + b
            want_pos.append([((u + s) % V) * B_total + g for s in range(1, V)])
            want_neg.append([v * B_total + c for v in range(V) for c in range(B_total) if c != g])
    assert pos_idx.tolist() == want_pos and neg_idx.tolist() == want_neg
    again = multi_view_index(V, B, B_total, rank * B, CPU)
    assert again[0].tolist() == want_pos and again[1].tolist() == want_neg


@pytest.mark.parametrize("name", ["two_view", "multi_view", "query_key", "queue"])
def test_a_sampler_built_directly_has_its_documented_defaults(name):
    """The class's own keyword defaults (``QueueSampler()``) are the documented hyperparameter defaults."""
    cls = cl.registry("sampler").get(name).factory
    sampler = cls(embed_dim=4)
    assert sampler.gather_distributed is True
    for hp in cls.hyperparameters:
        assert getattr(sampler, hp.name) == hp.default, hp.name
