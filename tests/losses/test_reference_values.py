"""Every loss against a straightforward reference written from the formulas (float64, small sizes)."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl

SETTINGS = [
    ("infonce", {}),
    ("dcl", {"tau_plus": 0.0}),
    ("dcl", {"tau_plus": 0.1}),
    ("dcl", {"tau_plus": 0.5}),
    ("dcl", {"tau_plus": 0.9}),
    ("hcl", {"tau_plus": 0.1, "beta": 1.0}),
    ("hcl", {"tau_plus": 0.0, "beta": 0.5}),
    ("hcl", {"tau_plus": 0.3, "beta": 2.0}),
    ("pucl", {"alpha": 0.12, "c": 0.1}),
    ("pucl", {"alpha": 0.5, "c": 0.02}),
    ("pucl", {"alpha": 0.9, "c": 0.5}),
    ("bcl", {"tau_plus": 0.1, "alpha": 0.9, "beta": 0.9}),
    ("bcl", {"tau_plus": 0.5, "alpha": 0.7, "beta": 1.0}),
    ("bcl", {"tau_plus": 0.2, "alpha": 0.6, "beta": 0.5}),
    ("bcl", {"tau_plus": 0.1, "alpha": 1.0, "beta": 0.8}),
    ("debiased_pos", {"tau_plus": 0.1, "aggregation": "outer"}),
    ("debiased_pos", {"tau_plus": 0.3, "aggregation": "inner"}),
    ("supcon", {"aggregation": "out"}),
    ("supcon", {"aggregation": "in"}),
    ("punce", {"prior": 0.388}),
    ("punce", {"prior": 0.9}),
    ("unbiased", {"fill_to_n": True}),
    ("unbiased", {"fill_to_n": False}),
]
KINDS = ["two_view", "two_view_labels", "multi_view", "masked", "bilinear"]


def _ids(s):
    name, hp = s
    return name + "".join(f"-{k}={v}" for k, v in hp.items())


def _batch(kind: str, name: str, ref):
    needs = cl.loss_label_kinds(name)
    labels_fn = ref.pu_labels if "pu" in needs and "class" not in needs else ref.class_labels
    if kind == "two_view":
        return ref.two_view_batch(B=8, labels=labels_fn(8) if needs else None)
    if kind == "two_view_labels":
        return ref.two_view_batch(B=8, seed=1, labels=labels_fn(8, seed=1))
    if kind == "multi_view":
        return ref.multi_view_batch(B=6, V=3, labels=labels_fn(6, seed=2))
    if kind == "masked":
        return ref.masked_batch(seed=3)
    sampler = cl.make_sampler("query_key", embed_dim=5)
    z = ref.random_views(B=7, d=5, V=3, seed=4)
    return sampler(z[0], [z[1], z[2]], labels=labels_fn(7, seed=4))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("setting", SETTINGS, ids=_ids)
def test_matches_reference(setting, kind, ref):
    name, hp = setting
    if name == "debiased_pos" and kind == "bilinear":
        pytest.skip("self term of unbounded logits checked in test_invariances")
    batch = _batch(kind, name, ref)
    loss = cl.make_loss(name, reduction="none", **hp)
    ours = loss(batch)
    expected = getattr(ref, name)(batch, **hp)
    assert ours.dtype == torch.float64 and ours.shape == (batch.num_anchors,)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)
    mean = cl.make_loss(name, **hp)(batch)
    torch.testing.assert_close(mean, expected.mean(), rtol=1e-10, atol=1e-10)


def test_bcl_weights_match_eq20(ref):
    from contrastlab.losses.bcl import bcl_weights, ecdf

    scores = torch.tensor([[6.0, 4.0, 3.0, 7.0, 5.0, 5.0]], dtype=torch.float64)
    phi_un = ecdf(scores, None)
    torch.testing.assert_close(phi_un[0, 0], torch.tensor(5 / 6, dtype=torch.float64))  # eq. 18 example
    torch.testing.assert_close(phi_un[0, 4], torch.tensor(4 / 6, dtype=torch.float64))  # ties count as <=
    for tp, a, bt in [(0.1, 0.9, 0.5), (0.1, 0.9, 0.9), (0.3, 0.55, 0.7)]:
        torch.testing.assert_close(bcl_weights(phi_un, tp, a, bt)[0], ref.bcl_weights(scores[0], tp, a, bt))


def test_bcl_weight_ranges_from_spec():
    from contrastlab.losses.bcl import bcl_weights

    phi = torch.linspace(0, 1, 1001, dtype=torch.float64)
    w = bcl_weights(phi, 0.1, 0.9, 0.5)  # spec §9.3: ω ∈ [0.556, 1.098], decreasing
    assert abs(float(w.min()) - 0.556) < 1e-3 and abs(float(w.max()) - 1.098) < 1e-3
    assert bool((w[1:] <= w[:-1] + 1e-15).all())
    w = bcl_weights(phi, 0.1, 0.9, 0.9)  # ω ∈ [0.610, 2.778], increasing
    assert abs(float(w.min()) - 0.610) < 1e-3 and abs(float(w.max()) - 2.778) < 1e-3
    assert bool((w[1:] >= w[:-1] - 1e-15).all())
