"""Debiased contrastive learning (DCL) and its hard-negative extension (HCL).

References:
- [0] Chuang, Robinson, Lin, Torralba, Jegelka, *Debiased Contrastive Learning*, NeurIPS 2020
  (losses-spec §3; reference code github.com/chingyaoc/DCL).
- [1] Robinson, Chuang, Sra, Jegelka, *Contrastive Learning with Hard Negative Samples*, ICLR 2021
  (losses-spec §2.4; reference code github.com/joshr17/HCL, ``image/main.py``).

Not to be confused with lightly's ``DCLLoss``, which is *Decoupled* contrastive learning (Yeh et al. 2021).

DCL (eq. 7 and Fig. 3 of [0]), per anchor with ``N`` valid negatives ``u_j`` and ``M`` positives ``v_m``
(column 0, the numerator ``x⁺``, included in the correction)::

    Ng = max( (Σ_j e^{ℓ(u_j)} − N τ⁺ · (1/M) Σ_m e^{ℓ(v_m)}) / τ⁻ ,  N e^{ℓ_min} )
    L  = -log( e^{ℓ⁺} / (e^{ℓ⁺} + Ng) )

``ℓ_min = -1/t`` for cosine logits (DCL's "theoretical minimum" ``e^{-1/t}``), or the batch's
``floor_logit``. For unbounded (bilinear) logits the ``query_key`` sampler selects the ``"trimmed"`` floor
instead (``N`` × mean of the ``⌈τ⁻N⌉`` smallest ``e^{ℓ_j}``; :mod:`contrastlab.losses.floors`).
HCL replaces ``Σ_j e^{ℓ_j}`` by the importance-weighted ``Σ_j w_j e^{ℓ_j}`` with
``w_j = N e^{βℓ_j} / Σ_k e^{βℓ_k}`` (rows sum to ``N``); ``β = 0`` is DCL. In log-space
``log Σ_j w_j e^{ℓ_j} = log N + lse((1+β)ℓ) − lse(βℓ)``. The reference code does not detach ``w``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from contrastlab.losses.base import (
    NEG,
    ContrastiveLoss,
    is_bool,
    log_sub_clamped,
    masked_lse,
    neg_count,
    nll_from_mass,
    safe_log,
    unit_interval_open,
)
from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.losses.floors import log_negative_floor, record_clamped
from contrastlab.losses.kernels import tilted_log_ratio, weighted_lse
from contrastlab.platform.registry import HParam


def corrected_log_mass(
    batch: ContrastiveBatch, log_unlabeled: Tensor, coef_unlabeled: float, coef_positive: float,
    stats: dict[str, Tensor] | None = None,
) -> Tensor:
    """``[A]`` ``log max(c_u · U − c_p · N · P̄, floor)``, the debiased negative mass shared by DCL,
    HCL and PUCL.

    ``U = e^{log_unlabeled}`` is the (possibly reweighted) sum over the ``N`` negatives, ``P̄`` the mean
    score of the ``M`` positives; ``floor`` follows ``batch.negative_floor`` with false-negative fraction
    ``π = c_p / c_u`` (:func:`~contrastlab.losses.floors.log_negative_floor`). The fraction of anchors at the
    floor goes to ``stats["clamped_frac"]`` when ``stats`` is given.
    """
    log_n = safe_log(neg_count(batch))
    log_a = log_unlabeled + math.log(coef_unlabeled)
    if coef_positive > 0:
        M = batch.pos_logits.shape[1]
        log_pbar = torch.logsumexp(batch.pos_logits, dim=1) - math.log(M)
        log_b = log_n + log_pbar + math.log(coef_positive)
    else:
        log_b = torch.full_like(log_a, NEG)
    log_floor = log_negative_floor(batch, coef_positive / coef_unlabeled)
    out = log_sub_clamped(log_a, log_b, log_floor)
    if stats is not None:
        record_clamped(stats, out <= log_floor)
    return out


def dcl_terms(batch: ContrastiveBatch, tau_plus: float, stats: dict[str, Tensor] | None = None) -> Tensor:
    """``[A]`` per-anchor DCL (Chuang et al. 2020, eq. 7) on a validated, compute-dtype batch."""
    log_s = masked_lse(batch.neg_logits, batch.neg_mask)
    tm = 1.0 - tau_plus
    log_ng = corrected_log_mass(batch, log_s, 1.0 / tm, tau_plus / tm, stats)
    return nll_from_mass(log_ng, batch.pos_logits[:, 0])


def hcl_terms(batch: ContrastiveBatch, tau_plus: float, beta: float, detach_weights: bool = False,
              stats: dict[str, Tensor] | None = None) -> Tensor:
    """``[A]`` per-anchor HCL (Robinson et al. 2021, official estimator) on a validated batch."""
    ln, mask = batch.neg_logits, batch.neg_mask
    n = neg_count(batch)
    if detach_weights:
        with torch.no_grad():  # w_j = N softmax_valid(βℓ)_j, frozen
            scaled = beta * ln if mask is None else (beta * ln).masked_fill(~mask, NEG)
            w = torch.softmax(scaled, dim=1).mul_(n[:, None])
            if mask is not None:
                w.masked_fill_(~mask, 0.0)
        log_sw = weighted_lse(ln, w)
    else:  # log Σ_j w_j e^{ℓ_j} = log N + lse((1+β)ℓ) − lse(βℓ), fused
        log_sw = safe_log(n) + tilted_log_ratio(ln, mask, beta)
    tm = 1.0 - tau_plus
    log_ng = corrected_log_mass(batch, log_sw, 1.0 / tm, tau_plus / tm, stats)
    return nll_from_mass(log_ng, batch.pos_logits[:, 0])


def dcl(batch: ContrastiveBatch, tau_plus: float = 0.1, reduction: str = "mean") -> Tensor:
    """Functional DCL of ``batch``: :class:`DCLLoss` (hyperparameters checked, computed in float32 under AMP)."""
    return DCLLoss(reduction=reduction, tau_plus=tau_plus)(batch)


def hcl(
    batch: ContrastiveBatch, tau_plus: float = 0.1, beta: float = 1.0, detach_weights: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """Functional HCL of ``batch``: :class:`HCLLoss` (hyperparameters checked, computed in float32 under AMP)."""
    return HCLLoss(reduction=reduction, tau_plus=tau_plus, beta=beta, detach_weights=detach_weights)(batch)


TAU_PLUS_DCL = HParam(
    "tau_plus", 0.1, "class prior τ⁺: probability that a random negative shares the anchor's class",
    "[0, 1)", "DCL reference code default (chingyaoc/DCL main.py) and the paper's M-study (§5.1)",
    unit_interval_open,
)


class DCLLoss(ContrastiveLoss):
    """Debiased contrastive loss (Chuang et al., NeurIPS 2020). Not lightly's Decoupled CL."""

    name = "dcl"
    description = "Debiased Contrastive Learning (Chuang et al. 2020): corrects false negatives with prior τ⁺"
    hyperparameters = (TAU_PLUS_DCL,)
    tau_plus: float

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        return dcl_terms(batch, float(self.tau_plus), self.stats_sink)


class HCLLoss(ContrastiveLoss):
    """Hard-negative contrastive loss (Robinson et al., ICLR 2021) on top of DCL's debiasing."""

    name = "hcl"
    description = "Hard negatives (Robinson et al. 2021): DCL with importance weights e^{βℓ} on negatives"
    hyperparameters = (
        HParam("tau_plus", 0.1, "class prior τ⁺ (as in DCL)", "[0, 1)",
               "HCL reference code default (joshr17/HCL image/main.py)", unit_interval_open),
        HParam("beta", 1.0, "concentration β ≥ 0 of the hardness weights (0 = no mining = DCL)", "[0, inf)",
               "HCL reference code default; best STL10 value in its README (87.44%)",
               lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= float(v) < math.inf),
        HParam("detach_weights", False, "stop gradients through the importance weights (reference: not detached)",
               "true | false", "HCL reference code (weights not detached); switch per lightly PR #793", is_bool),
    )
    tau_plus: float
    beta: float
    detach_weights: bool

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        return hcl_terms(batch, float(self.tau_plus), float(self.beta), bool(self.detach_weights), self.stats_sink)
