"""PU classification risks: uPU (du Plessis et al. 2014/2015), nnPU (Kiryo et al. 2017) and the biased PN risk.

Notation (losses-spec.md §2.5): a classifier ``g`` outputs a score ``z = g(x)``, a surrogate loss ``ℓ(z, y)``
with ``y ∈ {+1, −1}`` (sigmoid ``σ(−yz)`` as in Kiryo et al.; or logistic ``softplus(−yz)``), and

* ``R̂_p⁺ = mean_{x∈P} ℓ(g(x), +1)``, ``R̂_p⁻ = mean_{x∈P} ℓ(g(x), −1)``, ``R̂_u⁻ = mean_{x∈U} ℓ(g(x), −1)``.

Risks, with ``π`` the class prior of the unlabeled sample:

* **uPU**: ``R̂_uPU = π R̂_p⁺ + R̂_u⁻ − π R̂_p⁻`` (unbiased; the negative part can go below zero and overfit).
* **nnPU**: ``R̃_nnPU = π R̂_p⁺ + max{0, R̂_u⁻ − π R̂_p⁻}`` (Kiryo et al. 2017, eq. 7), trained with their
  Algorithm 1: when the negative part ``r⁻ = R̂_u⁻ − π R̂_p⁻`` falls below ``−β`` the step is *gradient
  ascent* on ``r⁻`` with weight ``γ`` (we minimise ``−γ r⁻``); otherwise the step is on ``R̃_nnPU``.
  With the default ``β = 0`` the second branch is exactly the uPU gradient; with ``β > 0`` and
  ``−β ≤ r⁻ < 0`` Algorithm 1 (followed here) steps on ``π R̂_p⁺`` only, whereas the authors' Chainer code
  steps on uPU. Kiryo et al. scale the *step size* by ``γ``; like the reference code we scale the objective,
  which is the same thing for SGD.
* **PN** (the naive baseline of puNCE Table 5): every unlabeled example is a negative,
  ``R̂_PN = w R̂_p⁺ + (1 − w) R̂_u⁻`` with ``w = n_P / (n_P + n_U)`` the labeled share of the training data,
  i.e. plain cross-entropy-style ERM over all examples when P and U are sampled separately.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from contrastlab.platform.errors import ConfigError

RISKS: tuple[str, ...] = ("nnpu", "upu", "pn")
"""Valid risk names."""
SURROGATES: tuple[str, ...] = ("sigmoid", "logistic")
"""Valid surrogate losses."""


def sigmoid_loss(z: Tensor, y: float) -> Tensor:
    """``ℓ(z, y) = σ(−y z)`` (bounded in [0, 1]; the surrogate of Kiryo et al. 2017)."""
    return torch.sigmoid(-y * z)


def logistic_loss(z: Tensor, y: float) -> Tensor:
    """``ℓ(z, y) = log(1 + e^{−y z})`` (softplus; the cross-entropy of a logistic model)."""
    return F.softplus(-y * z)


def surrogate(name: str) -> Callable[[Tensor, float], Tensor]:
    """The surrogate loss called ``name`` (``sigmoid`` or ``logistic``)."""
    if name == "sigmoid":
        return sigmoid_loss
    if name == "logistic":
        return logistic_loss
    raise ConfigError(f"classifier.surrogate={name!r} is not valid; valid: {', '.join(SURROGATES)}")


@dataclass(frozen=True)
class RiskOutput:
    """What one risk evaluation returns."""

    objective: Tensor
    """Scalar to call ``backward()`` on (for nnPU: the ascent objective ``−γ r⁻`` when the rule fires)."""
    value: Tensor
    """Scalar value of the risk estimator itself (detached), e.g. ``R̃_nnPU`` (always ≥ 0 for ``ℓ ≥ 0``)."""
    positive_risk: Tensor
    """``π R̂_p⁺`` (detached; ``w R̂_p⁺`` for PN)."""
    negative_risk: Tensor
    """``r⁻ = R̂_u⁻ − π R̂_p⁻`` (detached; ``(1 − w) R̂_u⁻`` for PN)."""
    ascent: bool
    """Whether the nnPU gradient-ascent rule fired (``r⁻ < −β``)."""


class PURisk:
    """A PU risk on the scores of a labeled-positive batch and an unlabeled batch.

    Args:
        kind: ``nnpu`` (default), ``upu`` or ``pn``.
        prior: ``π`` in (0, 1), the class prior of the unlabeled sample (unused by PN).
        surrogate_name: ``sigmoid`` (default) or ``logistic``.
        beta: nnPU threshold ``β ≥ 0`` (Kiryo et al. default 0).
        gamma: nnPU ascent weight ``γ ∈ (0, 1]`` (default 1).
        labeled_share: PN's ``w = n_P/(n_P + n_U)`` in (0, 1).
    """

    def __init__(
        self,
        kind: str = "nnpu",
        prior: float = 0.5,
        surrogate_name: str = "sigmoid",
        beta: float = 0.0,
        gamma: float = 1.0,
        labeled_share: float = 0.5,
    ) -> None:
        if kind not in RISKS:
            raise ConfigError(f"classifier.risk={kind!r} is not valid; valid: {', '.join(RISKS)}")
        if not 0.0 < prior < 1.0:
            raise ConfigError(f"PU risk prior={prior} is outside the valid range (0, 1)")
        if beta < 0:
            raise ConfigError(f"classifier.beta={beta} must be >= 0")
        if not 0.0 < gamma <= 1.0:
            raise ConfigError(f"classifier.gamma={gamma} is outside the valid range (0, 1]")
        if not 0.0 < labeled_share < 1.0:
            raise ConfigError(f"PN labeled_share={labeled_share} is outside the valid range (0, 1)")
        self.kind, self.prior, self.beta, self.gamma = kind, float(prior), float(beta), float(gamma)
        self.labeled_share = float(labeled_share)
        self.loss = surrogate(surrogate_name)

    def __call__(self, scores_p: Tensor, scores_u: Tensor) -> RiskOutput:
        """Risk of scores ``scores_p`` ``[n_p]`` (labeled positives) and ``scores_u`` ``[n_u]`` (unlabeled)."""
        z_p, z_u = scores_p.reshape(-1).float(), scores_u.reshape(-1).float()
        if z_p.numel() == 0 or z_u.numel() == 0:
            raise ConfigError("PU risk needs at least one labeled-positive and one unlabeled score per batch")
        r_p_pos = self.loss(z_p, 1.0).mean()  # R̂_p⁺
        r_u_neg = self.loss(z_u, -1.0).mean()  # R̂_u⁻
        if self.kind == "pn":
            w = self.labeled_share
            pos, neg = w * r_p_pos, (1.0 - w) * r_u_neg
            total = pos + neg
            return RiskOutput(total, total.detach(), pos.detach(), neg.detach(), False)
        r_p_neg = self.loss(z_p, -1.0).mean()  # R̂_p⁻
        pos = self.prior * r_p_pos
        neg = r_u_neg - self.prior * r_p_neg  # r⁻, estimates (1 − π) R_n⁻
        if self.kind == "upu":
            total = pos + neg
            return RiskOutput(total, total.detach(), pos.detach(), neg.detach(), False)
        value = (pos + neg.clamp_min(0.0)).detach()  # R̃_nnPU ≥ 0
        if bool(neg.detach() < -self.beta):  # Kiryo et al. 2017, Algorithm 1: gradient ascent on r⁻
            return RiskOutput(-self.gamma * neg, value, pos.detach(), neg.detach(), True)
        return RiskOutput(pos + neg.clamp_min(0.0), value, pos.detach(), neg.detach(), False)
