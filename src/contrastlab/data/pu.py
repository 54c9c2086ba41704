"""Positive-unlabeled (PU) splits built from any labeled dataset.

A PU split answers three questions about a fully labeled training set:

1. **Which examples are positive**: the union of ``positive_classes`` (e.g. vehicles vs animals on CIFAR-10,
   upper-body garments on Fashion-MNIST: see :data:`DEFAULT_POSITIVE_CLASSES`).
2. **Which positives are labeled**: ``n_labeled`` of them (or a ``labeled_fraction`` of the positives), drawn
   uniformly at random under a seed. This is the SCAR assumption ("selected completely at random",
   Elkan & Noto 2008, Def. 1 of PUCL): the labeling does not depend on ``x`` given ``y = 1``.
3. **The scenario** (Bekker & Davis 2020 survey terminology), which fixes what the *unlabeled sample* of a
   PU risk is and which class prior goes with it:

   * ``case_control`` (puNCE, eq. 1; du Plessis et al. 2014): two samples, the labeled positives
     ``X_P ~ p(x | y=1)`` and an unlabeled sample ``X_U``. Built as in the puNCE paper (A.1.1): the labeled
     positives are removed from the pool, ``X_U`` is every other training example, and the prior of ``X_U``
     is exactly ``π = (n₊ − n_L) / (n − n_L)``.
   * ``single_training_set`` (PUCL, eq. 1; Elkan & Noto 2008): one sample ``X ~ p(x)`` in which a SCAR subset
     of the positives carries a label. The unlabeled sample of a PU risk is then the *whole* training set
     (labels ignored), whose prior is the population prior ``α = n₊ / n``; the label frequency is
     ``c = n_L / n₊`` (PUCL's ``c``), and ``π = α(1 − c)/(1 − αc)`` is still the prior of the unlabeled pool.

In both scenarios the observed label of every training example is ``1`` (labeled positive) or ``-1``
(unlabeled), the coding the contrastive samplers and the PU-aware losses (``punce``, ``supcon``) consume.
There are never labeled negatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from contrastlab.platform.errors import ConfigError

LABELED_POSITIVE = 1
"""Observed label of a labeled positive (the PU coding of DESIGN.md)."""
UNLABELED = -1
"""Observed label of an unlabeled example."""

Scenario = Literal["case_control", "single_training_set"]
SCENARIOS: tuple[str, ...] = ("case_control", "single_training_set")
"""Valid PU scenarios."""

DEFAULT_POSITIVE_CLASSES: dict[str, tuple[int, ...]] = {
    "cifar10": (0, 1, 8, 9),  # airplane, automobile, ship, truck: vehicles vs animals (puNCE §4, PU-CIFAR10)
    # Upper-body garments: T-shirt/top, Pullover, Coat, Shirt vs trousers, dress, footwear and bags.
    # Prior 0.4 like PU-CIFAR10, and hard: Dress (a negative) looks like the tops, and Shirt vs T-shirt/top/
    # Pullover/Coat are the classes Fashion-MNIST classifiers confuse most.
    "fashion_mnist": (0, 2, 4, 6),
    "synthetic": (0,),
}
"""Documented default positive classes per dataset (other datasets must name theirs)."""


@dataclass(frozen=True)
class PUSplit:
    """A PU split of a training set of ``n`` examples (all tensors live on the CPU)."""

    y_true: Tensor
    """``[n]`` long, the latent binary class: 1 positive, 0 negative (never shown to PU learners)."""
    observed: Tensor
    """``[n]`` long, the observed label: 1 labeled positive, -1 unlabeled."""
    labeled_idx: Tensor
    """``[n_L]`` long, sorted indices of the labeled positives."""
    unlabeled_idx: Tensor
    """Long indices of the unlabeled sample of the PU risk: the other ``n − n_L`` examples (case-control)
    or all ``n`` examples (single-training-set)."""
    scenario: str
    """``case_control`` or ``single_training_set``."""
    positive_classes: tuple[int, ...]
    """Original class ids mapped to the positive class."""

    @property
    def n(self) -> int:
        """Number of training examples."""
        return int(self.y_true.numel())

    @property
    def n_positive(self) -> int:
        """``n₊``, the number of (latent) positives."""
        return int(self.y_true.sum())

    @property
    def n_labeled(self) -> int:
        """``n_L``, the number of labeled positives."""
        return int(self.labeled_idx.numel())

    @property
    def population_prior(self) -> float:
        """``α = n₊ / n`` (PUCL's ``α``), the positive fraction of the whole training set."""
        return self.n_positive / self.n

    @property
    def label_frequency(self) -> float:
        """``c = n_L / n₊`` (PUCL's ``c`` = Pr(s=1 | y=1))."""
        return self.n_labeled / self.n_positive

    @property
    def unlabeled_pool_prior(self) -> float:
        """``π = (n₊ − n_L)/(n − n_L)``: the positive fraction among unlabeled examples (puNCE A.1.1)."""
        return exact_prior(self.n_positive, self.n, self.n_labeled)

    @property
    def risk_prior(self) -> float:
        """The prior of the unlabeled sample of a PU risk: ``π`` (case-control) or ``α`` (single-training-set)."""
        if self.scenario == "single_training_set":
            return self.population_prior
        return self.unlabeled_pool_prior

    def summary(self) -> dict[str, float | int | str]:
        """Counts and priors, for logs and ``summary.json``."""
        return {
            "scenario": self.scenario,
            "n": self.n,
            "n_positive": self.n_positive,
            "n_labeled": self.n_labeled,
            "n_unlabeled_sample": int(self.unlabeled_idx.numel()),
            "population_prior": self.population_prior,
            "label_frequency": self.label_frequency,
            "unlabeled_pool_prior": self.unlabeled_pool_prior,
            "risk_prior": self.risk_prior,
        }


def exact_prior(n_positive: int, n: int, n_labeled: int) -> float:
    """Class prior of the unlabeled pool, ``π = (n₊ − n_L) / (n − n_L)`` (puNCE, A.1.1).

    Example: PU-CIFAR10 (20k positives of 50k) with ``n_L = 1000`` gives ``19/49 ≈ 0.388``.
    """
    if not 0 <= n_labeled <= n_positive <= n:
        raise ConfigError(f"exact_prior: need 0 <= n_labeled <= n_positive <= n, got {n_labeled}, {n_positive}, {n}")
    if n == n_labeled:
        raise ConfigError("exact_prior: every example is labeled, so the unlabeled pool is empty")
    return (n_positive - n_labeled) / (n - n_labeled)


def priors_from_pool(pool_prior: float, n_labeled: int, n: int) -> tuple[float, float]:
    """Population prior ``α`` and label frequency ``c`` from the unlabeled-pool prior ``π`` and observed counts.

    With ``ρ = n_L / n = αc`` (the labeled share, always observed) and ``π = (α − ρ)/(1 − ρ)`` (the positive
    share of the unlabeled pool), ``α = ρ + π(1 − ρ)`` and ``c = ρ / α``. Exact when ``π`` is the exact prior.
    """
    rho = n_labeled / n
    alpha = rho + pool_prior * (1.0 - rho)
    return alpha, rho / alpha


def check_prior(prior: float, name: str = "pu.prior") -> float:
    """Return ``prior`` if it lies in the open interval (0, 1), else raise :class:`ConfigError`."""
    try:
        value = float(prior)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={prior!r} is not a number; valid range: (0, 1)") from None
    if not 0.0 < value < 1.0:
        raise ConfigError(f"{name}={value} is outside the valid range (0, 1)")
    return value


def binarize(labels: Tensor, positive_classes: Sequence[int], num_classes: int | None = None) -> Tensor:
    """Map class ids to the binary PU target: 1 if the class is in ``positive_classes``, else 0.

    ``num_classes`` (default: ``labels.max() + 1``) bounds the valid class ids. Raises :class:`ConfigError` when
    the positive classes are empty, contain an unknown id, or cover every class present in ``labels``.
    """
    labels = torch.as_tensor(labels).long().reshape(-1)
    if labels.numel() == 0:
        raise ConfigError("pu split: the dataset is empty")
    k = int(num_classes) if num_classes is not None else int(labels.max()) + 1
    pos = [int(c) for c in positive_classes]
    if not pos:
        raise ConfigError(f"data.positive_classes is empty; give at least one class id in [0, {k})")
    unknown = sorted({c for c in pos if not 0 <= c < k})
    if unknown:
        raise ConfigError(f"data.positive_classes has unknown class id(s) {unknown}; valid ids: 0..{k - 1}")
    present = set(torch.unique(labels).tolist())
    if present <= set(pos):
        if set(range(k)) <= set(pos):
            raise ConfigError(
                f"data.positive_classes={sorted(set(pos))} cover every class in the data; leave at least one negative"
            )
        n = labels.numel()  # the negative classes exist, but this (sub)set holds none of them
        raise ConfigError(
            f"the {n} training example{'s hold' if n != 1 else ' holds'} only class{'es' * (len(present) != 1)} "
            f"{sorted(present)}, all positive (data.positive_classes={sorted(set(pos))}); use a larger "
            "data.train_size so that negatives are present"
        )
    y = torch.isin(labels, torch.tensor(sorted(set(pos)), dtype=torch.long)).long()
    if int(y.sum()) == 0:
        raise ConfigError(f"data.positive_classes={sorted(set(pos))} match no example of the data")
    return y


def check_test_set(labels: Tensor, positive_classes: Sequence[int], test_size: int | None) -> None:
    """Refuse a test set without a positive or without a negative example (``data.test_size`` too small): its
    AUC is undefined and precision, recall and F1 read 0. One-line :class:`ConfigError`."""
    y = torch.isin(torch.as_tensor(labels).long().reshape(-1), torch.tensor(sorted(set(positive_classes))))
    n, n_pos = int(y.numel()), int(y.sum())
    if 0 < n_pos < n:
        return
    size = f"data.test_size={test_size}: " if test_size is not None else ""
    remedy = "use a larger data.test_size" if test_size is not None else "choose data.positive_classes that leave " \
        "both positives and negatives in it"
    raise ConfigError(f"{size}the test set ({n} example{'s' * (n != 1)}) has no "
                      f"{'positive' if n_pos == 0 else 'negative'} example, so AUC is undefined and F1 reads 0; "
                      f"{remedy}")


def resolve_n_labeled(n_positive: int, n_labeled: int | None, labeled_fraction: float | None) -> int:
    """Number of labeled positives from exactly one of ``n_labeled`` or ``labeled_fraction`` (of the positives)."""
    if (n_labeled is None) == (labeled_fraction is None):
        raise ConfigError("give exactly one of data.n_labeled or data.labeled_fraction")
    if n_labeled is not None:
        if int(n_labeled) < 1:
            raise ConfigError(f"data.n_labeled={n_labeled} must be >= 1")
        if int(n_labeled) > n_positive:
            raise ConfigError(
                f"data.n_labeled={n_labeled} is larger than the number of positives ({n_positive}); "
                f"valid range: [1, {n_positive}]"
            )
        return int(n_labeled)
    frac = float(labeled_fraction)  # type: ignore[arg-type]
    if not 0.0 < frac <= 1.0:
        raise ConfigError(f"data.labeled_fraction={frac} is outside the valid range (0, 1]")
    return max(1, round(frac * n_positive))


def make_pu_split(
    labels: Tensor,
    positive_classes: Sequence[int],
    *,
    n_labeled: int | None = None,
    labeled_fraction: float | None = None,
    seed: int = 0,
    scenario: str = "case_control",
    num_classes: int | None = None,
) -> PUSplit:
    """Build a PU split of a labeled training set (SCAR labeling of positives under ``seed``).

    Args:
        labels: ``[n]`` class ids of the training set.
        positive_classes: class ids that form the positive class.
        n_labeled: number of positives to label (``n_L``); or
        labeled_fraction: fraction of the positives to label (``c``); exactly one of the two.
        seed: seed of the SCAR draw (a private generator; the global RNG is untouched).
        scenario: ``case_control`` (puNCE) or ``single_training_set`` (PUCL); see the module docstring.
        num_classes: number of classes of the dataset (to reject unknown class ids).
    """
    if scenario not in SCENARIOS:
        raise ConfigError(f"data.scenario={scenario!r} is not valid; valid: {', '.join(SCENARIOS)}")
    y = binarize(labels, positive_classes, num_classes)
    n = int(y.numel())
    pos_idx = torch.nonzero(y == 1).flatten()  # [n₊]
    n_l = resolve_n_labeled(int(pos_idx.numel()), n_labeled, labeled_fraction)
    if n_l == n:
        raise ConfigError("data.n_labeled labels every example; the unlabeled set would be empty")
    gen = torch.Generator().manual_seed(int(seed))
    # SCAR: a uniformly random subset of the positives, independent of x.
    chosen = pos_idx[torch.randperm(pos_idx.numel(), generator=gen)[:n_l]]
    labeled_idx = torch.sort(chosen).values
    observed = torch.full((n,), UNLABELED, dtype=torch.long)
    observed[labeled_idx] = LABELED_POSITIVE
    # case-control: U = the unlabeled pool; single-training-set: U = the whole set (labels ignored)
    unlabeled_idx = torch.nonzero(observed == UNLABELED).flatten() if scenario == "case_control" else torch.arange(n)
    return PUSplit(
        y_true=y,
        observed=observed,
        labeled_idx=labeled_idx,
        unlabeled_idx=unlabeled_idx,
        scenario=scenario,
        positive_classes=tuple(sorted({int(c) for c in positive_classes})),
    )
