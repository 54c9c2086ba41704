"""Elkan–Noto class-prior estimation on synthetic data with a known prior."""

from __future__ import annotations

import pytest
import torch

from contrastlab import ConfigError
from contrastlab.data.prior import elkan_noto, estimator_sample
from contrastlab.data.pu import make_pu_split


def _gaussians(n: int, prior: float, sep: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    n_pos = round(prior * n)
    y = torch.zeros(n, dtype=torch.long)
    y[:n_pos] = 1
    mean = torch.where(y[:, None] == 1, sep / 2, -sep / 2) * torch.ones(n, 4)
    x = mean + torch.randn(n, 4, generator=gen)  # [n, 4]
    return x, y


@pytest.mark.parametrize(("prior", "n_labeled"), [(0.3, 300), (0.6, 600)])
def test_elkan_noto_recovers_known_prior(prior: float, n_labeled: int) -> None:
    x, y = _gaussians(4000, prior, sep=3.0, seed=0)  # well separated: e1's assumption holds
    split = make_pu_split(y, [1], n_labeled=n_labeled, seed=1)
    est = elkan_noto(x, split.observed, seed=2)
    assert est.label_frequency == pytest.approx(split.label_frequency, abs=0.03)
    assert est.population_prior == pytest.approx(split.population_prior, abs=0.05)
    assert est.unlabeled_pool_prior == pytest.approx(split.unlabeled_pool_prior, abs=0.05)


def test_subsampled_unlabeled_examples_are_corrected_for() -> None:
    """Every labeled example plus 1/8 of the unlabeled ones: the correction recovers the prior; without it the
    classifier sees 8x the labeled share and ĉ, α̂ come out far off."""
    x, y = _gaussians(16000, 0.3, sep=3.0, seed=0)
    split = make_pu_split(y, [1], n_labeled=300, seed=1)
    keep, n_u = estimator_sample(split.observed, 1960, seed=4)
    assert n_u == 16000 - 300 and keep.numel() == 300 + 1960 and (split.observed[keep] == 1).sum() == 300
    assert keep.unique().numel() == keep.numel()
    est = elkan_noto(x[keep], split.observed[keep], seed=2, unlabeled_total=n_u)
    assert est.label_frequency == pytest.approx(split.label_frequency, abs=0.03)
    assert est.unlabeled_pool_prior == pytest.approx(split.unlabeled_pool_prior, abs=0.05)
    naive = elkan_noto(x[keep], split.observed[keep], seed=2)
    assert abs(naive.label_frequency - split.label_frequency) > 0.1
    with pytest.raises(ConfigError, match="unlabeled_total"):
        elkan_noto(x[keep], split.observed[keep], unlabeled_total=100)


def test_elkan_noto_logistic_classifier() -> None:
    x, y = _gaussians(3000, 0.6, sep=3.0, seed=5)
    split = make_pu_split(y, [1], n_labeled=600, seed=5)
    est = elkan_noto(x, split.observed, hidden=0, steps=100, seed=0)
    assert est.population_prior == pytest.approx(0.6, abs=0.07)


def test_overlap_biases_the_estimate_upward() -> None:
    # Documented limitation: overlapping classes make ĉ too small, α̂ too large.
    x, y = _gaussians(4000, 0.3, sep=0.8, seed=0)
    split = make_pu_split(y, [1], n_labeled=300, seed=1)
    est = elkan_noto(x, split.observed, seed=2)
    assert est.population_prior > split.population_prior + 0.05


def test_elkan_noto_rejects_degenerate_input() -> None:
    with pytest.raises(ConfigError, match="labeled"):
        elkan_noto(torch.randn(10, 2), -torch.ones(10, dtype=torch.long))
    with pytest.raises(ConfigError, match="holdout_fraction"):
        elkan_noto(torch.randn(10, 2), torch.ones(10, dtype=torch.long), holdout_fraction=1.0)
