"""PUCL: contrastive learning with negative sampling correction (Wang et al. 2024).

References:
- [0] Wang, Du, Zhao, Luo, Zhu, Qiao, Zhang, Lin, Rajmohan, Zhang, Zhang, *Contrastive Learning with Negative
  Sampling Correction*, arXiv:2401.08690 (2024), eqs. 11–12 (losses-spec §4).

**Not** Acharya et al.'s "puCL" (a SupCon-style PU loss; see ``punce`` for that line of work). PUCL treats
the in-batch "negatives" as *unlabeled* samples of a PU problem (single-training-set scenario, SCAR) with
positive prior ``α = Pr(y=1)`` and label frequency ``c = Pr(s=1 | y=1)``::

    μ̂ = max( (1−αc)/(1−α) · (1/N) Σ_j e^{ℓ(u_j)}  −  α(1−c)/(1−α) · (1/M) Σ_m e^{ℓ(v_m)} ,  e^{ℓ_min} )
    L  = -log( e^{ℓ⁺} / (e^{ℓ⁺} + N μ̂) )

with ``M^u = N`` (all valid negatives, as in every main experiment of [0]) and ``v_1 = x⁺`` (``M⁺ = 1``
unless the sampler provides more positives). The paper has no temperature and clamps at ``e^{-1}``; with
logits ``cos/t`` we use ``e^{-1/t}`` (identical at ``t = 1``; spec §4.2 [R]). ``c = 0`` gives DCL with
``τ⁺ = α``; ``α = 0`` or ``c = 1`` gives InfoNCE.
"""

from __future__ import annotations

from torch import Tensor

from contrastlab.losses.base import (
    ContrastiveLoss,
    masked_lse,
    nll_from_mass,
    unit_interval_closed,
    unit_interval_open,
)
from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.losses.dcl import corrected_log_mass
from contrastlab.platform.registry import HParam


def pucl_terms(batch: ContrastiveBatch, alpha: float, c: float, stats: dict[str, Tensor] | None = None) -> Tensor:
    """``[A]`` per-anchor PUCL (Wang et al. 2024, eqs. 11–12) on a validated, compute-dtype batch."""
    log_s = masked_lse(batch.neg_logits, batch.neg_mask)  # log Σ_j e^{ℓ(u_j)} = log N + log mean
    coef_u = (1.0 - alpha * c) / (1.0 - alpha)
    coef_p = alpha * (1.0 - c) / (1.0 - alpha)
    log_nmu = corrected_log_mass(batch, log_s, coef_u, coef_p, stats)  # log(N μ̂)
    return nll_from_mass(log_nmu, batch.pos_logits[:, 0])


def pucl(batch: ContrastiveBatch, alpha: float = 0.12, c: float = 0.1, reduction: str = "mean") -> Tensor:
    """Functional PUCL of ``batch``: :class:`PUCLLoss` (hyperparameters checked, computed in float32 under AMP)."""
    return PUCLLoss(reduction=reduction, alpha=alpha, c=c)(batch)


class PUCLLoss(ContrastiveLoss):
    """PUCL (Wang et al. 2024): negatives as unlabeled data of a PU problem. Not Acharya et al.'s puCL."""

    name = "pucl"
    description = "PUCL (Wang et al. 2024): PU-corrected negatives with prior α and label frequency c"
    hyperparameters = (
        HParam("alpha", 0.12, "positive prior α = Pr(y=1) of the population", "[0, 1)",
               "PUCL ablation: best α on CIFAR10 (0.15 on STL10; 'best between 0.1 and 0.15')",
               unit_interval_open),
        HParam("c", 0.1, "label frequency c = Pr(s=1 | y=1)", "[0, 1]",
               "PUCL ablation: best c (grid {0.01, 0.02, 0.1}; 'not very sensitive')", unit_interval_closed),
    )
    alpha: float
    c: float

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        return pucl_terms(batch, float(self.alpha), float(self.c), self.stats_sink)
