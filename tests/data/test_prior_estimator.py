"""Elkan–Noto class-prior estimation on synthetic data with a known prior."""

from __future__ import annotations

import math

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
    for holdout in (0.0, 1.0):
        with pytest.raises(ConfigError, match="holdout_fraction"):
            elkan_noto(torch.randn(10, 2), torch.ones(10, dtype=torch.long), holdout_fraction=holdout)


class _ConstantLogit(torch.nn.Module):
    """A stand-in for the fitted classifier: ``g′(x) = σ(L)`` everywhere, so the estimate is known in closed form."""

    def __init__(self, logit: float) -> None:
        super().__init__()
        self.logit = logit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full((x.shape[0], 1), self.logit)


def _reference_estimate(logit: float, n_l: int, n_u_kept: int, n_u_total: int, holdout: float) -> dict:
    """Elkan & Noto e1 from the formulas: the subsample's odds scaled back by m/n_U, ĉ the mean of g over the
    held-out labeled (k = round(holdout · n_L), at least 1 and at most n_L − 1), α̂ = (n_L/(n_L + n_U))/ĉ and
    π̂ = α̂(1 − ĉ)/(1 − α̂ĉ), both kept inside [1e-4, 1 − 1e-4]."""
    odds = math.exp(logit) * n_u_kept / n_u_total
    c = odds / (1 + odds)
    alpha = min(max(n_l / (n_l + n_u_total) / c, 1e-4), 1 - 1e-4)
    pool = min(max(alpha * (1 - c) / (1 - alpha * c), 1e-4), 1 - 1e-4)
    k = min(n_l - 1, max(1, round(holdout * n_l)))
    return {"label_frequency": c, "population_prior": alpha, "unlabeled_pool_prior": pool, "n_holdout_labeled": k}


@pytest.mark.parametrize(
    ("logit", "n_l", "n_u", "n_u_total", "holdout"),
    [
        (0.4, 20, 60, None, 0.2),  # no subsample: ĉ = σ(0.4), α̂ = (20/80)/ĉ
        (1.5, 20, 60, 600, 0.2),  # 1 in 10 unlabeled kept: logit g = 1.5 + log(60/600)
        (-1.0, 3, 60, None, 0.5),  # k = round(1.5) = 2 held-out labeled
        (-3.0, 2, 20, None, 0.2),  # ĉ ≈ 0.05 < n_L/n = 1/11: α̂ > 1 is clipped to 1 − 1e-4
        (8.0, 10, 40, 10_000_000, 0.3),  # a tiny subsample: α̂ ≈ 8.5e-5 and π̂ are clipped to 1e-4
        (30.0, 10, 40, None, 0.2),  # g = 1 on the labeled: ĉ = 1, π̂ = 0 is clipped to 1e-4
        (0.0, 4, 30, None, 0.1),  # round(0.4) = 0: still one labeled example held out
        (0.0, 3, 30, None, 0.9),  # round(2.7) = 3: one labeled example is left for training
    ],
)
def test_the_estimate_follows_from_the_classifier_output(monkeypatch: pytest.MonkeyPatch, logit: float, n_l: int,
                                                         n_u: int, n_u_total: int | None, holdout: float) -> None:
    """With the classifier's output fixed, ĉ, α̂, π̂ and |V_L| are exactly the e1 formulas (Elkan & Noto 2008)."""
    import contrastlab.data.prior as prior_module

    fitted_on: list[torch.Tensor] = []
    monkeypatch.setattr(prior_module, "_classifier", lambda dim, hidden: _ConstantLogit(logit))
    monkeypatch.setattr(prior_module, "_fit", lambda model, x, s, **kwargs: fitted_on.append(s))
    observed = torch.cat([torch.ones(n_l), -torch.ones(n_u)]).long()
    est = elkan_noto(torch.randn(n_l + n_u, 3), observed, holdout_fraction=holdout, unlabeled_total=n_u_total)
    want = _reference_estimate(logit, n_l, n_u, n_u if n_u_total is None else n_u_total, holdout)
    got = est.as_dict()
    assert got.pop("method") == "elkan_noto_e1"
    assert got == pytest.approx(want, rel=1e-5)
    # g is fitted on the rest: the held-out labeled and the held-out share of the unlabeled are left out
    k_u = min(n_u - 1, max(1, round(holdout * n_u)))
    (s,) = fitted_on
    assert int(s.sum()) == n_l - want["n_holdout_labeled"] and int((s == 0).sum()) == n_u - k_u


def test_the_estimate_does_not_depend_on_the_units_of_the_features() -> None:
    """The inputs are standardised with the training part's statistics, so rescaling and shifting every feature
    leaves the estimate unchanged."""
    x, y = _gaussians(1200, 0.4, sep=3.0, seed=3)
    split = make_pu_split(y, [1], n_labeled=150, seed=3)
    est = elkan_noto(x, split.observed, seed=1, steps=150)
    moved = elkan_noto(x * 1000.0 + 5000.0, split.observed, seed=1, steps=150)
    assert moved.label_frequency == pytest.approx(est.label_frequency, abs=1e-3)
    assert moved.unlabeled_pool_prior == pytest.approx(est.unlabeled_pool_prior, abs=1e-3)


def test_the_logistic_classifier_reaches_the_l2_penalised_optimum() -> None:
    """``hidden=0`` is logistic regression fitted by L-BFGS to mean cross-entropy + (λ/2)‖w‖² (the bias is not
    penalised): at its optimum the gradient of that objective, written out here, vanishes."""
    from contrastlab.data.prior import _classifier, _fit

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(60, 3, generator=gen)
    s = (x[:, 0] + 0.5 * torch.randn(60, generator=gen) > 0.3).long()
    torch.manual_seed(0)
    model = _classifier(3, 0)
    assert isinstance(model, torch.nn.Linear)
    _fit(model, x, s, hidden=0, steps=200, lr=0.01, weight_decay=0.5)
    w, b = model.weight.detach()[0], model.bias.detach()[0]
    residual = torch.sigmoid(x @ w + b) - s.float()  # d(mean BCE)/d logit · n
    grad_w = x.T @ residual / 60 + 0.5 * w
    grad_b = residual.mean()
    assert float(grad_w.abs().max()) < 1e-4 and abs(float(grad_b)) < 1e-4
    assert float(w.norm()) > 0.1  # not a trivial optimum
    one_wide = _classifier(3, 1)  # hidden=1 is a (one-unit) MLP, only 0 means logistic regression
    assert not isinstance(one_wide, torch.nn.Linear) and one_wide[0].out_features == 1
