"""puNCE: positive-unlabeled noise contrastive estimation (Acharya et al.), paper reading.

References:
- [0] Acharya, Sanghavi, Jing, Bhushanam, Choudhary, Rabbat, Dhillon, *Positive Unlabeled Contrastive
  Learning*, arXiv:2206.01206v3, eqs. 7–9 (rebuilt from the prose; losses-spec §7.2).

PU labels: ``1`` = labeled positive, ``-1`` = unlabeled (any label other than 1 counts as unlabeled).
``P`` is the set of labeled views; ``A(i)`` all other views of anchor ``i`` (its positive columns and every
valid negative column), and ``ℓ_ij = -log(e^{z_i·z_j/t} / Σ_{k∈A(i)} e^{z_i·z_k/t})``::

    labeled anchor:    (1/(|P|−1)) Σ_{j∈P∖{i}} ℓ_ij                                          (eq. 7)
    unlabeled anchor:  π · (1/(|P|+1)) Σ_{j∈P∪{a(i)}} ℓ_ij  +  (1−π) · ℓ_{i,a(i)}              (eq. 8)
    L = mean over anchors                                                                 (eq. 9)

An unlabeled anchor is a positive with probability ``π`` (then every labeled view and its own augmentation
are its positives) and a negative with probability ``1−π`` (then only its augmentation is). With ``M > 1``
positive columns, ``a(i)`` stands for all of them (their losses are averaged). A batch without labeled
views is exactly InfoNCE (with the positive columns in the denominator); ``π = 0`` is SupCon ``L_out`` on PU
labels (Acharya's "SCL adapted to PU", eq. 11). Calling it without labels at all is an error: puNCE needs
the PU labels. Differs from the public code's "puNCE-I" weighting ``(π·mean_P ℓ + ℓ_a)/(1+π)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from contrastlab.losses.base import ContrastiveLoss
from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.losses.supcon import _require_labels, all_view_lse, as_weights, mean_logit
from contrastlab.platform.registry import HParam

LABELED_POSITIVE = 1
"""Observed PU label of a labeled positive (``-1`` = unlabeled)."""


def punce_terms(batch: ContrastiveBatch, prior: float) -> Tensor:
    """``[A]`` per-anchor puNCE (eqs. 7–9) on a validated, compute-dtype batch with PU labels."""
    a, n = _require_labels(batch, "punce")
    labeled_cols = as_weights(n == LABELED_POSITIVE, batch.neg_logits.dtype)  # [A, N] 0/1
    if batch.neg_mask is not None:
        labeled_cols.mul_(batch.neg_mask.view(torch.uint8))
    lse_all = all_view_lse(batch)  # [A]
    loss_set = lse_all - mean_logit(batch, labeled_cols)  # mean ℓ over own views ∪ labeled views
    loss_aug = lse_all - batch.pos_logits.mean(dim=1)  # mean ℓ over own views
    unlabeled = prior * loss_set + (1.0 - prior) * loss_aug
    return torch.where(a == LABELED_POSITIVE, loss_set, unlabeled)


def punce(batch: ContrastiveBatch, prior: float = 0.388, reduction: str = "mean") -> Tensor:
    """Functional puNCE of a PU-labeled ``batch``: :class:`PUNCELoss` (prior checked, float32 under AMP)."""
    return PUNCELoss(reduction=reduction, prior=prior)(batch)


class PUNCELoss(ContrastiveLoss):
    """puNCE (Acharya et al.): labeled positives attract each other; unlabeled anchors weighted by prior π."""

    name = "punce"
    description = "puNCE (Acharya et al.): PU contrastive loss with class prior π (paper reading, eqs. 7–9)"
    hyperparameters = (
        HParam("prior", 0.388, "class prior π: probability that an unlabeled sample is positive", "(0, 1)",
               "puNCE A.1.1: π = (n₊−n_L)/(n−n_L) = 19/49 for PU-CIFAR10 with 1k labeled",
               lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < float(v) < 1),
    )
    label_kinds = frozenset({"pu"})
    prior: float

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        return punce_terms(batch, float(self.prior))
