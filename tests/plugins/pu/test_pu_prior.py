"""The class prior of a ``pu`` run (plugins/pu/prior.py): exact or given π, the α and c derived from it, the
prior each scenario's risk takes, the loss hyperparameters filled from it and the ``prior/*`` metrics."""

from __future__ import annotations

import pytest
import torch

from contrastlab import ConfigError
from contrastlab.data.pu import make_pu_split
from contrastlab.plugins.pu.config import PUConfig
from contrastlab.plugins.pu.prior import (
    PUProblem,
    check_pool_prior,
    check_prior_settings,
    fill_loss_prior,
    prior_metrics,
    prior_tags,
    resolve_prior,
)

# 20 examples, classes 0 and 1 positive (n₊ = 10), n_L = 4: π = (10 − 4)/(20 − 4) = 3/8, α = 10/20, c = 4/10.
LABELS = torch.arange(20) % 4


def _split(scenario: str = "case_control", n_labeled: int = 4):
    return make_pu_split(LABELS, [0, 1], n_labeled=n_labeled, seed=0, scenario=scenario)


def _config(mode: str = "exact", value: float | None = None) -> PUConfig:
    config = PUConfig()
    config.prior.mode, config.prior.value = mode, value  # type: ignore[assignment]
    return config


@pytest.mark.parametrize("scenario", ["case_control", "single_training_set"])
@pytest.mark.parametrize(("mode", "value", "pool"), [("exact", None, 3 / 8), ("given", 0.3, 0.3)])
def test_the_prior_and_what_follows_from_it(scenario: str, mode: str, value: float | None, pool: float) -> None:
    """π as exact or given; ρ = n_L/n = 1/5, α = ρ + π(1 − ρ), c = ρ/α; the risk takes π under case-control and
    α under single-training-set (its unlabeled sample is the whole set); the metrics report the true π too."""
    config = _config(mode, value)
    check_prior_settings(config)
    problem = resolve_prior(config, None, None, _split(scenario))  # type: ignore[arg-type]
    alpha = 0.2 + pool * 0.8
    assert problem.pool_prior == pytest.approx(pool)
    assert problem.population_prior == pytest.approx(alpha)
    assert problem.label_frequency == pytest.approx(0.2 / alpha)
    risk = pool if scenario == "case_control" else alpha
    assert problem.risk_prior == pytest.approx(risk)
    assert problem.loss_prior_values() == pytest.approx({"prior": pool, "alpha": alpha, "c": 0.2 / alpha})
    assert prior_metrics(problem) == pytest.approx({"prior/true": 3 / 8, "prior/used": pool, "prior/risk": risk})
    assert prior_tags(config) == ["prior/true", "prior/used", "prior/risk"]


def test_an_estimated_prior_reports_its_error() -> None:
    problem = PUProblem(None, None, _split(), 0.25, 0.4, 0.5, {"method": "elkan_noto_e1"})  # type: ignore[arg-type]
    metrics = prior_metrics(problem)
    assert metrics["prior/estimated"] == 0.25 and metrics["prior/abs_error"] == pytest.approx(3 / 8 - 0.25)
    assert prior_tags(_config("estimate"))[-2:] == ["prior/estimated", "prior/abs_error"]


def test_the_alpha_given_to_pucl_stays_below_one() -> None:
    """PUCL divides by 1 − α (its range is [0, 1)): a given π within 1e-6 of 1 makes α round to 1, so the value
    filled into ``pucl.alpha`` is capped just below it (where exactly is immaterial)."""
    problem = PUProblem(None, None, _split(), 1 - 1e-9, 1.0, 0.2)  # type: ignore[arg-type]
    assert 1 - 1e-5 < problem.loss_prior_values()["alpha"] < 1


def test_only_the_auto_keys_are_filled_and_only_with_fill_loss() -> None:
    problem = resolve_prior(_config(), None, None, _split())  # type: ignore[arg-type]
    config = _config()
    config.prior.auto_loss_keys = ["prior", "tau_plus"]  # tau_plus is no prior value: left alone
    assert fill_loss_prior(config, problem) == pytest.approx({"prior": 3 / 8})
    assert config.loss.name == "punce" and config.loss.hparams() == pytest.approx({"prior": 3 / 8})
    off = _config()
    off.prior.fill_loss, off.prior.auto_loss_keys = False, ["prior"]
    assert fill_loss_prior(off, problem) == {} and off.loss.hparams() == {}


@pytest.mark.parametrize(("fraction", "key"), [(None, "data.n_labeled"), (1.0, "data.labeled_fraction")])
def test_a_pool_without_positives_names_the_setting_that_made_it(fraction: float | None, key: str) -> None:
    config = _config()
    config.data.labeled_fraction = fraction
    with pytest.raises(ConfigError, match=rf"^{key} labels all 10 positives.*\[1, 9\]"):
        check_pool_prior(config, _split(n_labeled=10))
    check_pool_prior(config, _split("single_training_set", n_labeled=10))  # U is the whole set: α = 1/2
    check_pool_prior(_config("given", 0.3), _split(n_labeled=10))
