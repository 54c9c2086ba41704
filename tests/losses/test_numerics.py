"""Robustness (losses-spec §9.6): small temperatures, AMP, unbounded logits, degenerate rows and settings."""

from __future__ import annotations

import math

import pytest
import torch

import contrastlab as cl
from contrastlab import ContrastiveBatch

ALL = ["infonce", "dcl", "hcl", "bcl", "pucl", "punce", "debiased_pos", "supcon", "unbiased"]


def _labels(name, B, ref):
    needs = cl.loss_label_kinds(name)
    if not needs:
        return None
    return ref.pu_labels(B, n_labeled=3) if needs == frozenset({"pu"}) else ref.class_labels(B, classes=2)


def _finite_value_and_grad(loss, batch_fn, *leaves):
    value = loss(batch_fn())
    value.backward()
    assert torch.isfinite(value), value
    for leaf in leaves:
        assert leaf.grad is not None and bool(torch.isfinite(leaf.grad).all())
    return value


@pytest.mark.parametrize("name", ALL)
def test_small_temperature_float32(name, ref):
    z = ref.random_views(B=16, d=8, seed=31, dtype=torch.float32)
    z1, z2 = z[0].requires_grad_(True), z[1].requires_grad_(True)
    s = cl.make_sampler("two_view", temperature=0.05)
    y = _labels(name, 16, ref)
    v = _finite_value_and_grad(cl.make_loss(name), lambda: s(z1, z2, labels=y), z1, z2)
    assert v.dtype == torch.float32


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("amp_dtype", [torch.bfloat16, torch.float16])
def test_amp_computes_in_float32(name, amp_dtype, ref):
    z = ref.random_views(B=12, d=8, seed=32, dtype=torch.float32)
    z1, z2 = z[0].requires_grad_(True), z[1].requires_grad_(True)
    y = _labels(name, 12, ref)
    s = cl.make_sampler("two_view", temperature=0.1)
    loss = cl.make_loss(name)
    with torch.autocast("cpu", dtype=amp_dtype):
        h1, h2 = (z1 * 1.0).to(amp_dtype), (z2 * 1.0).to(amp_dtype)  # what an AMP encoder emits
        batch = s(h1, h2, labels=y)
        value = loss(batch)
    assert batch.pos_logits.dtype == torch.float32 and value.dtype == torch.float32
    value.backward()
    assert torch.isfinite(value) and bool(torch.isfinite(z1.grad).all())
    ref_value = loss(s(h1.float(), h2.float(), labels=y))  # same rounded inputs, no autocast
    torch.testing.assert_close(value, ref_value)


@pytest.mark.parametrize("name", ALL)
def test_half_logits_are_upcast(name, ref):
    b = ref.masked_batch(seed=33)
    half = ContrastiveBatch(b.pos_logits.half(), b.neg_logits.half(), neg_mask=b.neg_mask,
                            temperature=b.temperature, anchor_labels=b.anchor_labels, neg_labels=b.neg_labels)
    up = ContrastiveBatch(b.pos_logits.half().float(), b.neg_logits.half().float(), neg_mask=b.neg_mask,
                          temperature=b.temperature, anchor_labels=b.anchor_labels, neg_labels=b.neg_labels)
    loss = cl.make_loss(name)
    assert loss(half).dtype == torch.float32
    torch.testing.assert_close(loss(half), loss(up))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("floor", ["row_min", "default"])
def test_unbounded_logits_up_to_1e4(name, floor, ref):
    g = torch.Generator().manual_seed(34)
    A, N = 12, 11
    pos = ((torch.rand(A, 2, generator=g) * 2 - 1) * 1e4).requires_grad_(True)
    neg = ((torch.rand(A, N, generator=g) * 2 - 1) * 1e4).requires_grad_(True)
    labels = _labels(name, A, ref)
    kw = {} if labels is None else {"anchor_labels": labels, "neg_labels": labels.roll(1)[None, :N].expand(A, N)}

    def make():
        fl = neg.detach().amin(1) if floor == "row_min" else None
        return ContrastiveBatch(pos, neg, temperature=1.0, bounded=False, floor_logit=fl, **kw)

    _finite_value_and_grad(cl.make_loss(name), make, pos, neg)


@pytest.mark.parametrize("name", ALL)
def test_query_key_bilinear_large_scale(name, ref):
    s = cl.make_sampler("query_key", embed_dim=16)
    g = torch.Generator().manual_seed(35)
    q = (torch.randn(10, 16, generator=g) * 30).requires_grad_(True)
    k = torch.randn(10, 16, generator=g) * 30
    y = _labels(name, 10, ref)
    _finite_value_and_grad(cl.make_loss(name), lambda: s(q, k, labels=y), q, s.W)


@pytest.mark.parametrize("name", ["supcon", "unbiased", "punce"])
def test_rows_where_every_negative_is_a_known_positive(name, ref):
    z = ref.random_views(B=6, d=4, seed=36, dtype=torch.float32)
    z1 = z[0].requires_grad_(True)
    y = torch.ones(6, dtype=torch.long)  # one class (PU: all labeled)
    s = cl.make_sampler("two_view")
    v = _finite_value_and_grad(cl.make_loss(name), lambda: s(z1, z[1], labels=y), z1)
    if name == "unbiased":
        assert v.item() == 0.0  # no true negative anywhere: zero negative mass


@pytest.mark.parametrize(
    ("name", "hp"),
    [
        ("dcl", {"tau_plus": 0.99}),
        ("hcl", {"tau_plus": 0.99, "beta": 5.0}),
        ("pucl", {"alpha": 0.99, "c": 0.0}),
        ("pucl", {"alpha": 0.99, "c": 1.0}),
        ("bcl", {"tau_plus": 0.5, "alpha": 0.9, "beta": 0.9}),
        ("bcl", {"tau_plus": 0.0, "alpha": 1.0, "beta": 0.7}),
        ("bcl", {"tau_plus": 0.3, "alpha": 1.0, "beta": 1.0}),
        ("bcl", {"tau_plus": 0.99, "alpha": 0.5, "beta": 1.0}),
        ("debiased_pos", {"tau_plus": 0.01, "aggregation": "outer"}),
        ("debiased_pos", {"tau_plus": 0.99, "aggregation": "inner"}),
        ("punce", {"prior": 0.999}),
    ],
)
def test_extreme_hyperparameters(name, hp, ref):
    z = ref.random_views(B=8, d=4, V=3, seed=37, dtype=torch.float32).requires_grad_(True)
    y = _labels(name, 8, ref)
    s = cl.make_sampler("multi_view", temperature=0.05)
    _finite_value_and_grad(cl.make_loss(name, **hp), lambda: s(z, labels=y), z)


def test_debiased_pos_guard_for_small_n():
    """N = 2 < 2τ⁻/τ⁺ = 18 with large negative scores: the paper's numerator is ≤ 0; the guard clamps Ê⁺."""
    pos = torch.tensor([[-2.0]], requires_grad=True)
    neg = torch.tensor([[2.0, 2.0]], requires_grad=True)
    b = ContrastiveBatch(pos, neg, temperature=0.5)
    guarded = cl.make_loss("debiased_pos", tau_plus=0.1)(b)
    e_floor = torch.exp(torch.tensor(-2.0))
    expected = -torch.log(e_floor / (e_floor + 2 * torch.exp(torch.tensor(2.0))))
    torch.testing.assert_close(guarded, expected)
    guarded.backward()
    assert bool(torch.isfinite(neg.grad).all())
    assert torch.isfinite(cl.make_loss("debiased_pos", tau_plus=0.1, guard=False)(b))


@pytest.mark.parametrize("n_labeled", [0, 1])
def test_punce_with_zero_or_one_labeled_sample(n_labeled, ref):
    z = ref.random_views(B=8, d=4, seed=38, dtype=torch.float32)
    z1 = z[0].requires_grad_(True)
    y = ref.pu_labels(8, n_labeled=n_labeled)
    b = cl.make_sampler("two_view")(z1, z[1], labels=y)
    v = cl.make_loss("punce")(b)
    v.backward()
    assert torch.isfinite(v) and bool(torch.isfinite(z1.grad).all())
    if n_labeled == 0:
        torch.testing.assert_close(v, cl.make_loss("infonce")(b))


@pytest.mark.parametrize("name", ALL)
def test_rows_without_any_valid_negative(name, ref):
    """An empty queue (N = 0) or fully masked rows: finite value, finite gradients."""
    pos = torch.randn(4, 1, requires_grad=True)
    neg = torch.randn(4, 3, requires_grad=True)
    mask = torch.tensor([[False] * 3, [True, False, False], [False] * 3, [True] * 3])
    lab = torch.tensor([1, -1, 0, 1])
    b = ContrastiveBatch(pos, neg, neg_mask=mask, anchor_labels=lab, neg_labels=lab[:3][None].expand(4, 3))
    _finite_value_and_grad(cl.make_loss(name), lambda: b, pos, neg)
    empty = ContrastiveBatch(pos, neg[:, :0], anchor_labels=lab, neg_labels=lab[None, :0].expand(4, 0))
    v = cl.make_loss(name)(empty)
    assert torch.isfinite(v)


def test_float64_in_float64_out(ref):
    b = ref.two_view_batch()
    for name in ALL:
        bb = b if not cl.loss_label_kinds(name) else ref.two_view_batch(labels=ref.pu_labels(8))
        assert cl.make_loss(name)(bb).dtype == torch.float64


@pytest.mark.parametrize("beta", [0.5, 3.1, 5.0, 50.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hcl_rows_without_any_valid_negative_at_large_beta(beta, dtype):
    """HCL's gradient buffer divides by a row's mass: a fully masked row must give zero gradient, not 0·inf = nan
    (it did for 1 + β > 4: recsys's sampled negatives can mask every column of a user's row)."""
    g = torch.Generator().manual_seed(0)
    pos = torch.randn(3, 1, generator=g, dtype=dtype).requires_grad_()
    neg = torch.randn(3, 4, generator=g, dtype=dtype).requires_grad_()
    mask = torch.tensor([[False] * 4, [True] * 4, [True, True, False, True]])
    loss = cl.make_loss("hcl", beta=beta, tau_plus=0.1)
    v = loss(ContrastiveBatch(pos, neg, neg_mask=mask))
    v.backward()
    assert torch.isfinite(v) and torch.isfinite(pos.grad).all() and torch.isfinite(neg.grad).all()
    assert torch.equal(neg.grad[0], torch.zeros(4, dtype=dtype))
    neg_rest = neg.detach()[1:].requires_grad_()
    loss(ContrastiveBatch(pos.detach()[1:], neg_rest, neg_mask=mask[1:])).backward()
    torch.testing.assert_close(neg.grad[1:] * 3, neg_rest.grad * 2)  # the other rows' gradients (mean over 3 vs 2)


@pytest.mark.parametrize("name", ["dcl", "hcl", "pucl"])
def test_clamp_is_exact_when_extra_positives_dominate_float32(name, ref):
    """M > 1 at a small t in float32: the correction's mean positive exceeds the negatives' mass, so the exact clamp
    is the floor ``N e^{-1/t}``. The dtype-resolution guard of ``log_sub_clamped`` used to replace it by
    ``eps · Σ e^{ℓ_j} / τ⁻``, which is far above the floor and above the numerator ``e^{ℓ⁺}`` in these rows: losses were
    off by up to ≈ 11 and the negatives got a gradient although the clamp was active."""
    g = torch.Generator().manual_seed(0)
    views = torch.randn(3, 64, 8, generator=g)  # V = 3: M = 2 positives per anchor
    batch = cl.make_sampler("multi_view", temperature=0.05)(views)
    hp = {"dcl": {"tau_plus": 0.1}, "hcl": {"tau_plus": 0.1, "beta": 0.0}, "pucl": {"alpha": 0.1, "c": 0.0}}[name]
    got = cl.make_loss(name, reduction="none", **hp)(batch).double()
    b64 = ContrastiveBatch(batch.pos_logits.double(), batch.neg_logits.double(), temperature=0.05)
    want = ref.dcl(b64, 0.1)  # all three reduce to DCL(τ⁺ = 0.1) with these hyperparameters
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_clamped_rows_have_zero_negative_gradient_when_guard_exceeds_floor():
    """float64, t = 0.01: rows where ``N τ⁺ P̄ ≥ Σ e^{ℓ_j}`` are at the floor (a constant): their loss is
    ``softplus(log(N e^{-1/t}) − ℓ⁺)`` and the negatives get no gradient."""
    t, N = 0.01, 12
    pos = torch.tensor([[18.7, 85.4]], dtype=torch.float64, requires_grad=True)  # P̄ ≫ Σ_j e^{ℓ_j} / (N τ⁺)
    neg = torch.linspace(-97.0, 80.0, N, dtype=torch.float64)[None].requires_grad_(True)
    value = cl.make_loss("dcl", tau_plus=0.5)(ContrastiveBatch(pos, neg, temperature=t))
    value.backward()
    want = torch.nn.functional.softplus(torch.tensor(math.log(N) - 1 / t - 18.7, dtype=torch.float64))
    torch.testing.assert_close(value.detach(), want)
    assert bool((neg.grad == 0).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("aggregation", ["outer", "inner"])
def test_debiased_pos_guard_sets_the_floor_at_small_t(dtype, aggregation):
    """N = 2 < 2τ⁻/τ⁺ with negatives near 1/t: ``Ê⁺`` would be negative, so the guard sets it to ``e^{-1/t}`` and the
    loss is ``softplus(log Σ_j e^{ℓ_j} + 1/t)``. The resolution guard used to give ``Ê⁺ = eps·(…)/τ⁺`` instead
    (float32: loss 15.6 instead of 40.6), and a gradient through the would-be-negative numerator."""
    t = 0.05
    pos = torch.tensor([[-10.0]], dtype=dtype, requires_grad=True)
    neg = torch.tensor([[19.9, 19.9]], dtype=dtype, requires_grad=True)
    loss = cl.make_loss("debiased_pos", tau_plus=0.1, aggregation=aggregation)
    value = loss(ContrastiveBatch(pos, neg, temperature=t))
    value.backward()
    want = torch.nn.functional.softplus(torch.logsumexp(neg.detach().double(), dim=1) + 1 / t)[0]
    torch.testing.assert_close(value.double(), want, rtol=1e-6, atol=1e-5)
    assert float(loss.last_stats["clamped_frac"]) == 1.0
    assert float(pos.grad.abs().max()) == 0.0


@pytest.mark.parametrize("beta", [0.0, 1e-40, 1e-30])
def test_hcl_masked_columns_carry_no_weight_for_tiny_beta(beta, ref):
    """``e^{β·NEG}`` does not underflow for tiny β > 0, so masked columns used to count in ``Σ_k e^{βℓ_k}`` (the
    weights' normaliser) and shrink the reweighted mass by ``N_valid / N_columns``: at β = 1e-40 the loss was 0.69
    instead of DCL's 1.23."""
    b = ref.masked_batch(A=10, N=9, M=2, seed=3, labels=False)
    got = cl.make_loss("hcl", tau_plus=0.1, beta=beta, reduction="none")(b)
    torch.testing.assert_close(got, cl.make_loss("dcl", tau_plus=0.1, reduction="none")(b))


@pytest.mark.parametrize("fill", [float("-inf"), float("nan"), 1e6])
@pytest.mark.parametrize("name", ALL)
def test_values_in_masked_columns_are_ignored(name, fill, ref):
    """Padding columns (``neg_mask`` False) may hold anything, e.g. the ``-inf`` of a masked logit: the loss and its
    gradient equal those of the batch without the padding. ``-inf`` used to make SupCon (out) and puNCE nan on every
    row (``0 · -inf`` in the mean over positives); nan padding broke HCL (detached weights), BCL, SupCon (in) and
    Unbiased."""
    g = torch.Generator().manual_seed(4)
    A, N, n = 6, 7, 5
    pos = torch.randn(A, 2, generator=g, dtype=torch.float64)
    neg = torch.randn(A, N, generator=g, dtype=torch.float64)
    mask = torch.zeros(A, N, dtype=torch.bool)
    mask[:, :n] = True
    kinds = cl.loss_label_kinds(name)
    if kinds == frozenset({"pu"}):
        al, nl = torch.tensor([1, 1, -1, -1, 1, -1]), torch.randint(0, 2, (A, N), generator=g) * 2 - 1
    else:
        al, nl = torch.randint(-1, 2, (A,), generator=g), torch.randint(-1, 2, (A, N), generator=g)
    lab = dict(anchor_labels=al, neg_labels=nl) if kinds else {}
    padded = neg.masked_fill(~mask, fill).requires_grad_(True)
    trimmed = neg[:, :n].clone().requires_grad_(True)
    lab_trim = dict(anchor_labels=al, neg_labels=nl[:, :n]) if kinds else {}
    loss = cl.make_loss(name, reduction="none")
    got = loss(ContrastiveBatch(pos, padded, neg_mask=mask, temperature=0.5, **lab))
    want = loss(ContrastiveBatch(pos, trimmed, temperature=0.5, **lab_trim))
    torch.testing.assert_close(got, want)
    (g_pad,) = torch.autograd.grad(got.sum(), padded)
    (g_trim,) = torch.autograd.grad(want.sum(), trimmed)
    torch.testing.assert_close(g_pad[:, :n], g_trim)
    assert bool((g_pad[:, n:] == 0).all())
