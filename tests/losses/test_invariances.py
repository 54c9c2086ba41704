"""Invariances (losses-spec §9.2): permutations, row shifts, BCL rank invariance, view swap."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import contrastlab as cl
from contrastlab.losses.bcl import bcl_weights, ecdf

ALL = ["infonce", "dcl", "hcl", "bcl", "pucl", "punce", "debiased_pos", "supcon", "unbiased"]
ATOL = dict(rtol=1e-10, atol=1e-10)


def _hp(name):
    return {"bcl": {"tau_plus": 0.1, "alpha": 0.8, "beta": 0.9}, "pucl": {"alpha": 0.2, "c": 0.1}}.get(name, {})


@pytest.mark.parametrize("name", ALL)
def test_permuting_negatives(name, ref):
    b = ref.masked_batch(seed=11)
    perm = torch.randperm(b.neg_logits.shape[1], generator=torch.Generator().manual_seed(0))
    pb = replace(b, neg_logits=b.neg_logits[:, perm], neg_mask=b.neg_mask[:, perm], neg_labels=b.neg_labels[:, perm])
    loss = cl.make_loss(name, reduction="none", **_hp(name))
    torch.testing.assert_close(loss(pb), loss(b), **ATOL)


@pytest.mark.parametrize("name", ALL)
def test_row_shift_without_active_clamp(name, ref):
    """ℓ → ℓ + κ_i for all logits of row i (unbounded geometry: DebiasedPos's self term and the floor move too)."""
    b = ref.masked_batch(seed=12, t=1.0)
    b = replace(b, bounded=False, floor_logit=torch.full((b.num_anchors,), -30.0, dtype=torch.float64))
    kappa = torch.linspace(-50, 80, b.num_anchors, dtype=torch.float64)[:, None]
    sb = replace(b, pos_logits=b.pos_logits + kappa, neg_logits=b.neg_logits + kappa,
                 floor_logit=b.floor_logit + kappa[:, 0])
    loss = cl.make_loss(name, reduction="none", **_hp(name))
    torch.testing.assert_close(loss(sb), loss(b), rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("name", ["infonce", "dcl", "hcl", "pucl", "bcl", "supcon", "punce", "unbiased"])
def test_bounded_shift_matches_naive(name, ref):
    """A shifted cosine batch (no clamp active) gives the same value as the unshifted one."""
    b = ref.masked_batch(seed=13, t=0.5)
    sb = replace(b, pos_logits=b.pos_logits + 3.0, neg_logits=b.neg_logits + 3.0)
    loss = cl.make_loss(name, reduction="none", **_hp(name))
    torch.testing.assert_close(loss(sb), loss(b), **ATOL)


def test_bcl_weights_depend_only_on_ranks(ref):
    b = ref.masked_batch(seed=14, labels=False)
    w = bcl_weights(ecdf(b.neg_logits, b.neg_mask), 0.1, 0.9, 0.9)
    for f in (lambda x: 3 * x + 1, torch.exp, lambda x: x / 0.07):
        torch.testing.assert_close(bcl_weights(ecdf(f(b.neg_logits), b.neg_mask), 0.1, 0.9, 0.9), w)


def test_bcl_phi_endpoints_and_rationalised_root():
    from contrastlab.losses.bcl import bcl_weights as _w  # noqa: F401

    phi_un = torch.linspace(0, 1, 11, dtype=torch.float64)
    for tau, alpha in [(0.1, 0.9), (0.3, 0.6), (0.5, 0.8), (0.1, 0.5)]:
        tm = 1 - tau
        a = (1 - 2 * alpha) * (tm - tau)
        b = 2 * (alpha * tm + (1 - alpha) * tau)
        phi = 2 * phi_un / (b + torch.sqrt(b * b + 4 * a * phi_un))
        assert abs(float(phi[0])) < 1e-15 and abs(float(phi[-1]) - 1) < 1e-15
        if a != 0:
            torch.testing.assert_close(phi, (-b + torch.sqrt(b * b + 4 * a * phi_un)) / (2 * a), rtol=0, atol=1e-15)
        else:
            torch.testing.assert_close(phi, phi_un / b, rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ALL)
def test_two_view_symmetry(name, ref):
    z = ref.random_views(B=8, d=5, seed=15)
    needs = cl.loss_label_kinds(name)
    y = (ref.pu_labels(8) if needs == frozenset({"pu"}) else ref.class_labels(8)) if needs else None
    s = cl.make_sampler("two_view")
    loss = cl.make_loss(name, **_hp(name))
    torch.testing.assert_close(loss(s(z[0], z[1], labels=y)), loss(s(z[1], z[0], labels=y)), **ATOL)


def test_bcl_ecdf_cpu_fast_path_matches_sort_path():
    """The float32 CPU packed-key sort and the generic sort + searchsorted path give identical eCDFs."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(40, 33, generator=g)
    x[:, 3] = x[:, 9]  # ties
    x[:, 10], x[:, 11] = -0.0, 0.0  # signed zeros tie
    x[:, 12], x[:, 13] = float("inf"), -float("inf")
    x[:, 20] = x[:, 21] = x[:, 22]
    mask = torch.rand(40, 33, generator=g) > 0.2
    for m in (None, mask):
        torch.testing.assert_close(ecdf(x, m), ecdf(x.double(), m).float(), rtol=0, atol=0)


def test_bcl_ecdf_fast_path_blocks_with_and_without_ties():
    """Several row blocks (N large), ties in some blocks only: fast path == generic path."""
    g = torch.Generator().manual_seed(6)
    x = torch.randn(40, 4096, generator=g)  # 16 rows per block → 3 blocks
    x[20, 5] = x[20, 6]  # a tie in the second block only
    torch.testing.assert_close(ecdf(x, None), ecdf(x.double(), None).float(), rtol=0, atol=0)
    torch.testing.assert_close(ecdf(x[:16], None), ecdf(x[:16].double(), None).float(), rtol=0, atol=0)
