"""Exact reductions between losses (losses-spec §9.1), float64, atol 1e-10."""

from __future__ import annotations

import math

import pytest
import torch

import contrastlab as cl
from contrastlab.losses.punce import punce_terms
from contrastlab.losses.supcon import supcon_terms

ATOL = dict(rtol=1e-10, atol=1e-10)


def _loss(name, batch, **hp):
    return cl.make_loss(name, reduction="none", **hp)(batch)


@pytest.fixture(params=["two_view", "multi_view", "masked"])
def batch(request, ref):
    if request.param == "two_view":
        return ref.two_view_batch(B=10, seed=7)
    if request.param == "multi_view":
        return ref.multi_view_batch(B=6, V=3, seed=8)
    return ref.masked_batch(seed=9, labels=False)


def test_dcl_tau0_is_infonce(batch):
    torch.testing.assert_close(_loss("dcl", batch, tau_plus=0.0), _loss("infonce", batch), **ATOL)


@pytest.mark.parametrize("tau", [0.0, 0.05, 0.3])
def test_hcl_beta0_is_dcl(batch, tau):
    torch.testing.assert_close(_loss("hcl", batch, tau_plus=tau, beta=0.0), _loss("dcl", batch, tau_plus=tau), **ATOL)
    torch.testing.assert_close(
        _loss("hcl", batch, tau_plus=tau, beta=0.0, detach_weights=True), _loss("dcl", batch, tau_plus=tau), **ATOL
    )


@pytest.mark.parametrize("alpha", [0.05, 0.12, 0.6])
def test_pucl_c0_is_dcl_with_tau_alpha(batch, alpha):
    torch.testing.assert_close(_loss("pucl", batch, alpha=alpha, c=0.0), _loss("dcl", batch, tau_plus=alpha), **ATOL)


@pytest.mark.parametrize(("alpha", "c"), [(0.0, 0.1), (0.0, 0.7), (0.3, 1.0), (0.9, 1.0)])
def test_pucl_alpha0_or_c1_is_infonce(batch, alpha, c):
    torch.testing.assert_close(_loss("pucl", batch, alpha=alpha, c=c), _loss("infonce", batch), **ATOL)


@pytest.mark.parametrize(
    ("tau", "alpha", "beta"),
    [(0.1, 0.5, 0.5), (0.4, 0.5, 0.5), (0.0, 0.9, 0.5), (0.0, 0.6, 0.5), (0.5, 0.8, 0.8), (0.5, 1.0, 1.0)],
)
def test_bcl_identity_settings_are_infonce(batch, tau, alpha, beta):
    torch.testing.assert_close(_loss("bcl", batch, tau_plus=tau, alpha=alpha, beta=beta), _loss("infonce", batch),
                               **ATOL)


def test_bcl_non_identity_differs(batch):
    assert not torch.allclose(_loss("bcl", batch, tau_plus=0.1, alpha=0.9, beta=0.9), _loss("infonce", batch))


def test_punce_without_labeled_views_is_infonce(ref):
    b = ref.two_view_batch(B=10, seed=3, labels=torch.full((10,), -1))
    for prior in (0.1, 0.5, 0.9):
        torch.testing.assert_close(_loss("punce", b, prior=prior), _loss("infonce", b), **ATOL)


def test_punce_prior0_is_supcon_out_on_pu_labels(ref):
    b = ref.two_view_batch(B=10, seed=4, labels=ref.pu_labels(10, n_labeled=4))
    torch.testing.assert_close(punce_terms(b, 0.0), supcon_terms(b, "out"), **ATOL)


def test_punce_all_labeled_is_supcon_out(ref):
    b = ref.two_view_batch(B=10, seed=5, labels=torch.ones(10, dtype=torch.long))
    torch.testing.assert_close(_loss("punce", b, prior=0.3), _loss("supcon", b, aggregation="out"), **ATOL)


@pytest.mark.parametrize("agg", ["out", "in"])
def test_supcon_single_positive_is_infonce(ref, agg):
    b = ref.two_view_batch(B=10, seed=6, labels=torch.arange(10))  # every sample its own class
    torch.testing.assert_close(_loss("supcon", b, aggregation=agg), _loss("infonce", b), **ATOL)
    b = ref.two_view_batch(B=10, seed=6, labels=torch.full((10,), -1))  # unlabeled: own view only
    torch.testing.assert_close(_loss("supcon", b, aggregation=agg), _loss("infonce", b), **ATOL)


def test_supcon_in_below_out(ref):
    b = ref.multi_view_batch(B=8, V=3, seed=7, labels=ref.class_labels(8, seed=7, classes=2))
    assert bool((_loss("supcon", b, aggregation="in") <= _loss("supcon", b, aggregation="out") + 1e-12).all())


def test_debiased_pos_outer_equals_inner_at_m1(ref):
    b = ref.two_view_batch(B=10, seed=8)
    torch.testing.assert_close(
        _loss("debiased_pos", b, aggregation="outer"), _loss("debiased_pos", b, aggregation="inner"), **ATOL
    )


def test_debiased_pos_ratio_identity(ref):
    """(P − τ⁻P⁻)/(P + (Nτ⁺−τ⁻)P⁻) == Ê⁺/(Ê⁺ + Σh) with Ê⁺ = (P − τ⁻P⁻)/τ⁺ (spec §9.1.7)."""
    b = ref.two_view_batch(B=10, seed=9)
    tau = 0.2
    h = torch.exp(b.neg_logits)
    N = h.shape[1]
    P = (h.sum(1) + torch.exp(b.pos_logits[:, 0]) + math.exp(1 / b.temperature)) / (N + 2)
    e_plus = (P - (1 - tau) * h.mean(1)) / tau
    torch.testing.assert_close(_loss("debiased_pos", b, tau_plus=tau), -torch.log(e_plus / (e_plus + h.sum(1))), **ATOL)


@pytest.mark.parametrize("fill", [True, False])
def test_unbiased_without_false_negatives_is_infonce(ref, fill):
    b = ref.two_view_batch(B=10, seed=10, labels=torch.arange(10))
    torch.testing.assert_close(_loss("unbiased", b, fill_to_n=fill), _loss("infonce", b), **ATOL)


def test_infonce_equal_logits_is_log_n_plus_1():
    b = cl.ContrastiveBatch(torch.zeros(4, 1, dtype=torch.float64), torch.zeros(4, 9, dtype=torch.float64))
    torch.testing.assert_close(_loss("infonce", b), torch.full((4,), torch.log(torch.tensor(10.0)).item(),
                                                               dtype=torch.float64))
