"""DebiasedPos: debiasing the *positive* distribution (Troeshestova & Isachenko, MIPT).

References:
- [0] Троешестова, Исаченко, *Анализ смещения распределений в контрастивном обучении* (Analysis of
  distribution shift in contrastive learning), eqs. 2–4 (losses-spec §5).

Type-I errors (false positives from noise/augmentations) are corrected by replacing the positive score by a
debiased estimate of the mean positive score, obtained from ``p = τ⁺p⁺ + τ⁻p⁻`` (spec §5.2, exact identity)::

    P_emp = (Σ_j e^{ℓ_j} + e^{ℓ_v} + e^{ℓ_self}) / (N + 2),   P⁻ = (1/N) Σ_j e^{ℓ_j}
    Ê⁺    = (P_emp − τ⁻ P⁻) / τ⁺
    L     = -log( (P_emp − τ⁻P⁻) / (P_emp + (Nτ⁺ − τ⁻)P⁻) ) = -log( Ê⁺ / (Ê⁺ + Σ_j e^{ℓ_j}) )

``e^{ℓ_self}`` is the anchor's self-similarity: ``1/t`` for cosine logits; for unbounded (bilinear) logits,
where it is not observed, the row's largest logit (detached) stands in for it. Aggregation over ``M``
positives (the paper compares two, reading of SupCon's L_out/L_in): ``outer`` averages the per-positive
losses outside the log; ``inner`` uses the mean positive score inside ``P_emp`` (cheaper).

**Guard (our addition, not in the paper):** ``Ê⁺`` is clamped at the floor ``e^{ℓ_min}`` (``e^{-1/t}``, the
theoretical minimum of a mean positive score) before the ratio is formed. It can only activate when
``N < 2τ⁻/τ⁺`` (spec §9.3). ``guard=False`` is the paper-faithful variant; where its numerator is ≤ 0 (the
paper's loss is undefined there) the value is bounded only by the dtype-resolution guard of
:func:`~contrastlab.losses.base.log_sub_clamped` (very large, but finite).
There is no ``τ⁺`` at which DebiasedPos equals InfoNCE.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from contrastlab.losses.base import (
    ContrastiveLoss,
    floor_logits,
    is_bool,
    log_sub_clamped,
    masked_lse,
    neg_count,
    safe_log,
)
from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.losses.floors import record_clamped
from contrastlab.platform.registry import HParam

AGGREGATIONS = ("outer", "inner")


def self_logits(batch: ContrastiveBatch) -> Tensor:
    """``[A]`` logit of the anchor with itself: ``1/t`` (cosine) or the detached row max (unbounded)."""
    if batch.bounded:
        return batch.neg_logits.new_full((batch.num_anchors,), 1.0 / float(batch.temperature))
    row_max = batch.pos_logits.detach().amax(dim=1)
    if batch.neg_logits.shape[1] > 0:
        ln = batch.neg_logits.detach()
        if batch.neg_mask is not None:
            ln = ln.masked_fill(~batch.neg_mask, -math.inf)
        row_max = torch.maximum(row_max, ln.amax(dim=1))
    return row_max


def _log_e_plus(log_v: Tensor, log_s: Tensor, l_self: Tensor, n: Tensor, tau_plus: float,
                log_floor: Tensor | None) -> Tensor:
    """``log Ê⁺`` for positive score(s) ``e^{log_v}`` (``[A]`` or ``[A, M]``; the other args broadcast).

    ``τ⁺Ê⁺ = (e^{v} + e^{self})/(N+2) + k·S`` with ``k = (τ⁺N − 2τ⁻)/(N(N+2))``; ``k < 0`` (small ``N``) is a
    difference and goes through :func:`log_sub_clamped`.
    """
    tm = 1.0 - tau_plus
    log_t1 = torch.logaddexp(log_v, l_self) - torch.log(n + 2.0)
    k = (tau_plus * n - 2.0 * tm) / (n.clamp_min(1.0) * (n + 2.0))
    log_ks = safe_log(k.abs()) + log_s
    added = torch.logaddexp(log_t1, log_ks)
    floor = log_floor + math.log(tau_plus) if log_floor is not None else torch.full_like(log_t1, -math.inf)
    subtracted = log_sub_clamped(log_t1, log_ks, floor)
    log_e = torch.where(k >= 0, added, subtracted) - math.log(tau_plus)
    return log_e if log_floor is None else torch.maximum(log_e, log_floor)


def _guard_active(log_e: Tensor, log_floor: Tensor | None) -> Tensor:
    """``[A]`` bool: the guard set ``Ê⁺`` (of any positive of the row) to the floor."""
    if log_floor is None:
        return torch.zeros(log_e.shape[0], dtype=torch.bool, device=log_e.device)
    hit = log_e <= log_floor
    return hit if hit.dim() == 1 else hit.any(dim=1)


def debiased_pos_terms(batch: ContrastiveBatch, tau_plus: float, aggregation: str = "outer",
                       guard: bool = True, stats: dict[str, Tensor] | None = None) -> Tensor:
    """``[A]`` per-anchor DebiasedPos (eq. 2) on a validated, compute-dtype batch."""
    lp = batch.pos_logits  # [A, M]
    log_s = masked_lse(batch.neg_logits, batch.neg_mask)  # [A]
    n = neg_count(batch)
    l_self = self_logits(batch)
    log_floor = floor_logits(batch) if guard else None
    if aggregation == "inner":
        log_v = torch.logsumexp(lp, dim=1) - math.log(lp.shape[1])
        log_e = _log_e_plus(log_v, log_s, l_self, n, tau_plus, log_floor)
        record_clamped(stats, _guard_active(log_e, log_floor))
        return F.softplus(log_s - log_e)
    floor_col = None if log_floor is None else log_floor[:, None]
    log_e = _log_e_plus(lp, log_s[:, None], l_self[:, None], n[:, None], tau_plus, floor_col)  # [A, M]
    record_clamped(stats, _guard_active(log_e, floor_col))
    return F.softplus(log_s[:, None] - log_e).mean(dim=1)


def debiased_pos(batch: ContrastiveBatch, tau_plus: float = 0.1, aggregation: str = "outer", guard: bool = True,
                 reduction: str = "mean") -> Tensor:
    """Functional DebiasedPos of ``batch``: :class:`DebiasedPosLoss` (hyperparameters checked, float32 under AMP)."""
    return DebiasedPosLoss(reduction=reduction, tau_plus=tau_plus, aggregation=aggregation, guard=guard)(batch)


class DebiasedPosLoss(ContrastiveLoss):
    """DebiasedPos (Troeshestova & Isachenko): debiased estimate of the positive score (type-I errors)."""

    name = "debiased_pos"
    description = "DebiasedPos (Troeshestova & Isachenko): corrects false positives via a debiased positive score"
    hyperparameters = (
        HParam("tau_plus", 0.1, "class prior τ⁺ used to invert p = τ⁺p⁺ + τ⁻p⁻", "(0, 1)",
               "DebiasedPos reference code default (intsystems/2023-Project-123 main.py)",
               lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < float(v) < 1),
        HParam("aggregation", "outer", "over M positives: outer = mean of losses; inner = mean score in P_emp",
               "outer | inner", "paper: outer gives more accurate representations", lambda v: v in AGGREGATIONS),
        HParam("guard", True, "clamp Ê⁺ at the floor e^{-1/t} (our addition; false = paper-faithful)",
               "true | false", "ours (spec §5.2); inactive whenever N ≥ 2τ⁻/τ⁺", is_bool),
    )
    tau_plus: float
    aggregation: str
    guard: bool

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        return debiased_pos_terms(batch, float(self.tau_plus), self.aggregation, bool(self.guard), self.stats_sink)
