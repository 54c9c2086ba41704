"""Label-aware losses: supervised contrastive (SupCon) and the oracle "unbiased" loss.

References:
- [0] Khosla et al., *Supervised Contrastive Learning*, NeurIPS 2020 (L_out and L_in; losses-spec §2.3).
- [1] Chuang et al., *Debiased Contrastive Learning*, NeurIPS 2020, eq. 2 (L_Unbiased; spec §2.2), also
  PUCL's L_IdealCL, BCL's L_Sup and DebiasedPos's N-pair loss.

SupCon: for anchor ``i`` the candidates ``A(i)`` are all of its positive columns (other views of the same
sample) and all valid negative columns; ``P(i)`` is the positive columns plus every negative column that
carries the anchor's observed label (anchors labeled ``-1`` have only their own views as positives)::

    L_out = lse_{a∈A(i)} ℓ_a − (1/|P(i)|) Σ_{p∈P(i)} ℓ_p
    L_in  = lse_{a∈A(i)} ℓ_a − lse_{p∈P(i)} ℓ_p + log |P(i)|          (L_in ≤ L_out by Jensen)

With PU labels (1 = labeled positive, −1 = unlabeled) this is the "SCL adapted to PU" baseline of Acharya et
al. (eq. 11). With only its own view as positive it is InfoNCE.

Unbiased (**oracle**): the observed labels are treated as the *true* classes. Negatives with the anchor's
label (anchor label ≥ 0) are false negatives and removed; with ``fill_to_n`` the remaining true negatives'
mass is rescaled to ``N`` terms (``N · mean``: the in-batch emulation of drawing ``N`` negatives from
``p⁻``), otherwise they are dropped. A row without any true negative has zero negative mass (loss 0).
Runs using this loss use labels and are marked so.
"""

from __future__ import annotations

import torch
from torch import Tensor

from contrastlab.losses.base import (
    NEG,
    ContrastiveLoss,
    is_bool,
    masked_lse,
    neg_count,
    nll_from_mass,
    safe_log,
)
from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.platform.errors import IncompatibleError
from contrastlab.platform.registry import HParam

AGGREGATIONS = ("out", "in")


def _require_labels(batch: ContrastiveBatch, owner: str) -> tuple[Tensor, Tensor]:
    if batch.anchor_labels is None or batch.neg_labels is None:
        raise IncompatibleError(f"loss '{owner}' needs observed labels; pass labels=... to the sampler")
    return batch.anchor_labels, batch.neg_labels


def as_weights(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """``[A, N]`` 0/1 weights in ``dtype`` from a bool mask (through ``uint8``: CPU bool→float casts are slow)."""
    return mask.view(torch.uint8).to(dtype)


def known_positive_weights(batch: ContrastiveBatch) -> Tensor:
    """``[A, N]`` 0/1 weights (compute dtype) of :func:`known_positives`: one int compare, one cast, row factors."""
    a, n = _require_labels(batch, "supcon")
    w = as_weights(n == a[:, None], batch.neg_logits.dtype)
    w.mul_((a >= 0).to(w.dtype)[:, None])  # anchors labeled −1 have no known positive among the negatives
    if batch.neg_mask is not None:
        w.mul_(batch.neg_mask.view(torch.uint8))
    return w


def known_positives(batch: ContrastiveBatch) -> Tensor:
    """``[A, N]`` bool: valid negative columns carrying the anchor's observed label (anchor label ≥ 0)."""
    return known_positive_weights(batch) > 0


def all_view_lse(batch: ContrastiveBatch) -> Tensor:
    """``[A]`` ``log Σ_{a∈A(i)} e^{ℓ_a}`` over every positive column and every valid negative column."""
    return torch.logaddexp(torch.logsumexp(batch.pos_logits, dim=1), masked_lse(batch.neg_logits, batch.neg_mask))


def mean_logit(batch: ContrastiveBatch, extra: Tensor) -> Tensor:
    """``[A]`` mean logit over all positive columns plus the negative columns selected by ``extra``.

    ``extra``: ``[A, N]`` bool mask, or 0/1 weights in the compute dtype (cheaper: a row dot product, no
    ``[A, N]`` select in forward or backward).
    """
    ln = batch.neg_logits
    w = as_weights(extra, ln.dtype) if extra.dtype == torch.bool else extra
    total = batch.pos_logits.sum(dim=1) + torch.linalg.vecdot(ln, w)
    count = batch.pos_logits.shape[1] + w.sum(dim=1)
    return total / count


def _excluding_lse(x: Tensor, drop: Tensor) -> Tensor:
    """``[A]`` ``log Σ_{j: drop_j = 0} e^{x_j}`` for 0/1 weights ``drop`` (consumed), via the fused LSE's shift.

    Dropped columns get the shift ``NEG`` (``exp`` underflows to exactly 0, so they carry no mass and no
    gradient); a row with every column dropped gives ``≈ NEG``, like :func:`masked_lse`. Used where such rows
    reach the loss with a zero upstream gradient (their mass enters through ``logaddexp`` or ``softplus``).
    """
    return masked_lse(x, None, shift=drop.mul_(NEG))


def supcon_terms(batch: ContrastiveBatch, aggregation: str = "out") -> Tensor:
    """``[A]`` per-anchor SupCon (Khosla et al. 2020) on a validated, compute-dtype, labeled batch."""
    kp = known_positive_weights(batch)
    lse_all = all_view_lse(batch)
    if aggregation == "out":
        return lse_all - mean_logit(batch, kp)
    n_pos = batch.pos_logits.shape[1] + kp.sum(dim=1)
    lse_kp = _excluding_lse(batch.neg_logits, kp.sub_(1.0).neg_())  # over the known-positive columns only
    lse_pos = torch.logaddexp(torch.logsumexp(batch.pos_logits, dim=1), lse_kp)
    return lse_all - lse_pos + torch.log(n_pos)


def unbiased_terms(batch: ContrastiveBatch, fill_to_n: bool = True) -> Tensor:
    """``[A]`` per-anchor oracle unbiased loss (DCL eq. 2) on a validated, compute-dtype, labeled batch."""
    a, n_lab = _require_labels(batch, "unbiased")
    false_neg = as_weights(n_lab == a[:, None], batch.neg_logits.dtype)
    false_neg.mul_((a >= 0).to(false_neg.dtype)[:, None])  # [A, N] 1 = same observed label (anchor label ≥ 0)
    if batch.neg_mask is not None:  # invalid columns are dropped like false negatives
        false_neg.sub_(1.0).mul_(batch.neg_mask.view(torch.uint8)).add_(1.0)
    n_true = false_neg.shape[1] - false_neg.sum(dim=1) if fill_to_n else None
    log_mass = _excluding_lse(batch.neg_logits, false_neg)
    if n_true is not None:
        log_mass = log_mass + safe_log(neg_count(batch)) - safe_log(n_true.clamp_min(1.0))
    return nll_from_mass(log_mass, batch.pos_logits[:, 0])


def supcon(batch: ContrastiveBatch, aggregation: str = "out", reduction: str = "mean") -> Tensor:
    """Functional SupCon of a labeled ``batch``: :class:`SupConLoss` (checked, computed in float32 under AMP)."""
    return SupConLoss(reduction=reduction, aggregation=aggregation)(batch)


def unbiased(batch: ContrastiveBatch, fill_to_n: bool = True, reduction: str = "mean") -> Tensor:
    """Functional oracle unbiased loss of a labeled ``batch``: :class:`UnbiasedLoss` (checked, float32 under AMP)."""
    return UnbiasedLoss(reduction=reduction, fill_to_n=fill_to_n)(batch)


class SupConLoss(ContrastiveLoss):
    """Supervised contrastive loss (Khosla et al. 2020): every same-label view is a positive."""

    name = "supcon"
    description = "SupCon (Khosla et al. 2020): same-label views are positives (class or PU labels)"
    hyperparameters = (
        HParam("aggregation", "out", "average over positives outside (out) or inside (in) the log",
               "out | in", "Khosla et al. 2020: L_out trains better", lambda v: v in AGGREGATIONS),
    )
    label_kinds = frozenset({"class", "pu"})
    aggregation: str

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        return supcon_terms(batch, self.aggregation)


class UnbiasedLoss(ContrastiveLoss):
    """Oracle unbiased loss (Chuang et al. 2020, eq. 2): InfoNCE with the labels' false negatives removed."""

    name = "unbiased"
    description = "ORACLE unbiased loss (DCL eq. 2): treats observed labels as true classes; label-using"
    hyperparameters = (
        HParam("fill_to_n", True, "rescale the true negatives' mass to N terms (false: drop false negatives)",
               "true | false", "spec §2.2: closest in-batch emulation of N draws from p⁻", is_bool),
    )
    label_kinds = frozenset({"class"})
    oracle = True
    fill_to_n: bool

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        return unbiased_terms(batch, bool(self.fill_to_n))
