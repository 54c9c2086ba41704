"""InfoNCE / NT-Xent, the standard ("biased") contrastive loss.

References:
- [0] Oord, Li, Vinyals, *Representation Learning with Contrastive Predictive Coding*, 2018 (InfoNCE).
- [1] Chen, Kornblith, Norouzi, Hinton, *A Simple Framework for Contrastive Learning*, ICML 2020 (NT-Xent).
- losses-spec §2.1; called L_Biased (DCL), staCL (PUCL), L_Bias (BCL), "Contrastive" (DebiasedPos).

Per anchor ``i`` with numerator positive ``ℓ⁺ = pos_logits[i, 0]`` and valid negatives ``ℓ_j``::

    L_i = -log( e^{ℓ⁺} / (e^{ℓ⁺} + Σ_j e^{ℓ_j}) ) = softplus( logsumexp_j ℓ_j − ℓ⁺ )

Extra positive columns (``M > 1``) are not used (spec §8.1: only ``ℓ⁺`` and the negatives are in the
denominator). Equal logits give ``log(N + 1)``.
"""

from __future__ import annotations

from torch import Tensor

from contrastlab.losses.base import ContrastiveLoss, masked_lse, nll_from_mass
from contrastlab.losses.batch import ContrastiveBatch


def infonce_terms(batch: ContrastiveBatch) -> Tensor:
    """``[A]`` per-anchor InfoNCE on a validated, compute-dtype batch."""
    log_neg = masked_lse(batch.neg_logits, batch.neg_mask)  # [A]
    return nll_from_mass(log_neg, batch.pos_logits[:, 0])


def infonce(batch: ContrastiveBatch, reduction: str = "mean") -> Tensor:
    """Functional InfoNCE / NT-Xent of ``batch`` (``reduction``: mean | sum | none); same as :class:`InfoNCELoss`."""
    return InfoNCELoss(reduction=reduction)(batch)


class InfoNCELoss(ContrastiveLoss):
    """InfoNCE / NT-Xent (Oord et al. 2018; Chen et al. 2020): the standard, biased contrastive loss."""

    name = "infonce"
    description = "InfoNCE / NT-Xent (SimCLR's loss; the biased baseline every debiased loss reduces to)"
    hyperparameters = ()

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        return infonce_terms(batch)
