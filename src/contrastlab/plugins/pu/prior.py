"""The class prior of a ``pu`` run: exact from the split, given, or estimated (Elkan–Noto), and what is logged of it.

The PU risks (nnPU/uPU, Kiryo et al. 2017) need the prior of their unlabeled sample: π of the unlabeled pool
(case-control) or α = n₊/n of the whole training set (single-training-set); puNCE takes π, PUCL α and c
(losses-spec.md §2.5, §7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import contrastlab as cl
from contrastlab.data import ImageDataset
from contrastlab.data.augment import augment_for, prepare
from contrastlab.data.prior import elkan_noto, estimator_sample
from contrastlab.data.pu import PUSplit, check_prior, priors_from_pool
from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.pu.config import PUConfig


@dataclass
class PUProblem:
    """The data side of a run: train/test sets, the PU split and the priors."""

    train: ImageDataset
    test: ImageDataset
    split: PUSplit
    pool_prior: float
    """π used (prior of the unlabeled pool): exact, given or estimated."""
    population_prior: float
    """α derived from π and the observed labeled share."""
    label_frequency: float
    """c derived from π and the observed labeled share."""
    estimate: dict[str, Any] | None = None
    """The Elkan–Noto result (``mode=estimate``)."""

    @property
    def risk_prior(self) -> float:
        """Prior of the risk's unlabeled sample: π (case-control) or α (single-training-set)."""
        return self.population_prior if self.split.scenario == "single_training_set" else self.pool_prior

    def loss_prior_values(self) -> dict[str, float]:
        """Values for the prior hyperparameters of ``punce`` (π) and ``pucl`` (α, c)."""
        alpha = min(self.population_prior, 1.0 - 1e-6)
        return {"prior": self.pool_prior, "alpha": alpha, "c": self.label_frequency}


def check_prior_settings(config: PUConfig) -> None:
    """Refuse ``prior.value`` without ``prior.mode=given`` and a given prior outside (0, 1)."""
    p = config.prior
    if p.mode == "given":
        if p.value is None:
            raise ConfigError("prior.mode=given needs prior.value in (0, 1)")
        check_prior(p.value, "prior.value")
    elif p.value is not None:
        raise ConfigError(f"prior.value is only used with prior.mode=given (prior.mode={p.mode})")


def check_pool_prior(config: PUConfig, split: PUSplit) -> None:
    """Refuse a case-control split whose exact prior is 0: labeling every positive leaves the unlabeled pool
    without positives, so its prior π = (n₊ − n_L)/(n − n_L) is 0 and the PU risk (prior in (0, 1)) is undefined."""
    if config.prior.mode != "exact" or split.scenario != "case_control" or split.n_labeled < split.n_positive:
        return
    key = "data.labeled_fraction" if config.data.labeled_fraction is not None else "data.n_labeled"
    raise ConfigError(
        f"{key} labels all {split.n_positive} positives, so the unlabeled pool has none (prior π = 0); label at "
        f"most {split.n_positive - 1} (data.n_labeled in [1, {split.n_positive - 1}]) or set "
        "data.scenario=single_training_set"
    )


def resolve_prior(config: PUConfig, train: ImageDataset, test: ImageDataset, split: PUSplit) -> PUProblem:
    """The prior of the run: exact from the split, given, or estimated with Elkan–Noto on the inputs."""
    check_prior_settings(config)
    estimate = None
    if config.prior.mode == "exact":
        pool = split.unlabeled_pool_prior
    elif config.prior.mode == "given":
        pool = float(config.prior.value)  # type: ignore[arg-type]
    else:
        keep, n_unlabeled = estimator_sample(split.observed, config.prior.estimator_max_examples, config.seed)
        spec = augment_for(config.data.dataset, image_size=train.image_size, channels=train.channels).spec
        x = prepare(train.images[keep], spec).flatten(1)  # [m, C·H·W]
        est = elkan_noto(
            x, split.observed[keep], hidden=config.prior.estimator_hidden, steps=config.prior.estimator_steps,
            seed=config.seed, unlabeled_total=n_unlabeled,
        )
        pool = est.unlabeled_pool_prior
        estimate = est.as_dict()
    alpha, c = priors_from_pool(pool, split.n_labeled, split.n)
    return PUProblem(train, test, split, pool, alpha, c, estimate)


def fill_loss_prior(config: PUConfig, problem: PUProblem) -> dict[str, float]:
    """Set ``config.loss``'s auto prior hyperparameters from the problem's prior; returns what was set."""
    if not config.prior.fill_loss or not config.prior.auto_loss_keys:
        return {}
    values = problem.loss_prior_values()
    filled = {k: values[k] for k in config.prior.auto_loss_keys if k in values}
    hp = dict(config.loss.hparams())
    hp.update(filled)
    config.loss = cl.ComponentSpec(name=config.loss.name, **hp)
    return filled


def prior_tags(config: PUConfig) -> list[str]:
    """The ``prior/*`` tags a run logs at its end (``prior/estimated`` and ``prior/abs_error`` with
    ``prior.mode=estimate``)."""
    tags = ["prior/true", "prior/used", "prior/risk"]
    return tags + (["prior/estimated", "prior/abs_error"] if config.prior.mode == "estimate" else [])


def prior_metrics(problem: PUProblem) -> dict[str, float]:
    """The true pool prior, the one used, the risk's, and the estimate's error (``mode=estimate``)."""
    true = problem.split.unlabeled_pool_prior
    out = {"prior/true": true, "prior/used": problem.pool_prior, "prior/risk": problem.risk_prior}
    if problem.estimate is not None:
        out["prior/estimated"] = problem.pool_prior
        out["prior/abs_error"] = abs(problem.pool_prior - true)
    return out
