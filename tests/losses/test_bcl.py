"""BCL corner cases not covered by the shared reference tests: τ⁺ = 0, the α = 1 shortcut, one negative."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl
from contrastlab.losses.bcl import bcl_weights, ecdf


@pytest.mark.parametrize(("alpha", "beta"), [(0.9, 0.9), (0.7, 0.6)])
@pytest.mark.parametrize("masked", [False, True])
def test_tau_plus_zero_matches_eq20(alpha, beta, masked, ref):
    """``τ⁺ = 0`` with ``α < 1`` is an ordinary point of eq. 20 (ω is not ≡ 1 there: hard mining remains)."""
    b = ref.masked_batch(seed=51, labels=False) if masked else ref.two_view_batch(B=6, seed=51)
    got = cl.make_loss("bcl", tau_plus=0.0, alpha=alpha, beta=beta, reduction="none")(b)
    torch.testing.assert_close(got, ref.bcl(b, 0.0, alpha, beta), rtol=1e-10, atol=1e-10)
    assert not torch.allclose(got, ref.infonce(b))


def test_alpha_one_tau_plus_zero_gives_unit_weights_without_touching_the_input():
    phi = torch.tensor([[0.25, 0.5, 1.0]], dtype=torch.float64)
    w = bcl_weights(phi, 0.0, 1.0, 0.9)
    assert torch.equal(w, torch.ones_like(phi))
    assert torch.equal(phi, torch.tensor([[0.25, 0.5, 1.0]], dtype=torch.float64))


@pytest.mark.parametrize("mask", [None, torch.tensor([[True]])])
def test_ecdf_of_a_single_negative_is_one(mask):
    assert torch.equal(ecdf(torch.tensor([[0.3]], dtype=torch.float64), mask), torch.ones(1, 1, dtype=torch.float64))


@pytest.mark.parametrize("masked", [False, True])
def test_alpha_one_tau_plus_zero_is_infonce(masked, ref):
    """Module docstring: at ``α = 1, τ⁺ = 0`` every weight is 1, so BCL is InfoNCE (both weight paths)."""
    b = ref.masked_batch(seed=52, labels=False) if masked else ref.two_view_batch(B=6, seed=52)
    got = cl.make_loss("bcl", tau_plus=0.0, alpha=1.0, beta=0.8, reduction="none")(b)
    torch.testing.assert_close(got, ref.infonce(b), rtol=1e-12, atol=1e-12)


def test_ecdf_threaded_blocks_match_the_sort_path():
    """Several row blocks split over 2 threads (the suite runs with 1 thread, so this path is otherwise unused)."""
    g = torch.Generator().manual_seed(53)
    x = torch.randn(100, 4096, generator=g)  # 32 rows per block → 4 blocks
    x[70, 5] = x[70, 6]  # a tie in a later block
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        got = ecdf(x, None)
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(got, ecdf(x.double(), None).float(), rtol=0, atol=0)
