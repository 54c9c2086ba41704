"""How much learning signal a floor leaves each anchor: the measurements behind the ``query_key`` default.

Used by ``tests/losses/test_floors.py`` and ``benchmarks/floors.py`` (whose results are in docs/losses.md,
"Floors for unbounded logits").

* :func:`curl_like_rows`: synthetic bilinear rows with CURL's measured logit spread (the range of a row's
  negative logits is 5–11 after a few hundred updates): ``N`` Gaussian negative logits whose expected range is
  ``spread``, and a positive logit near the row maximum.
* :func:`anchor_signal`: per anchor, the loss and ``|∂L_i/∂ℓ⁺_i|``, the gradient that pulls the positive up.
* :func:`signal_report`: for one loss on one batch, the fraction of anchors at the floor and the fraction that
  *lost their signal*: InfoNCE's loss on the row is > ``min_infonce_loss`` but the loss's positive gradient is
  below ``min_ratio`` of InfoNCE's.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.losses.floors import CLAMPED_FRAC

EXPECTED_RANGE_PER_SIGMA = {127: 5.1, 255: 5.6, 511: 6.1, 1023: 6.5}
"""Expected range (max − min) of ``N`` standard normal samples, in units of σ (for choosing σ from a spread)."""


def curl_like_rows(anchors: int = 512, negatives: int = 511, spread: float = 8.0,
                   margin: tuple[float, float] = (-2.0, 4.0), seed: int = 0,
                   dtype: torch.dtype = torch.float64) -> ContrastiveBatch:
    """A bilinear-like batch (``bounded=False``, ``t = 1``) whose rows have negative logits ``N(0, σ²)`` with an
    expected range of ``spread`` and a positive logit ``max_j ℓ_j + U(margin)``; the floor logit is the row min,
    the negative floor ``"trimmed"`` (the ``query_key`` default; use :func:`dataclasses.replace` for others)."""
    g = torch.Generator().manual_seed(seed)
    per_sigma = EXPECTED_RANGE_PER_SIGMA.get(negatives) or 2 * math.sqrt(2 * math.log(max(negatives, 2)))
    sigma = spread / per_sigma
    neg = torch.randn(anchors, negatives, generator=g, dtype=dtype) * sigma
    lo, hi = margin
    pos = neg.amax(dim=1, keepdim=True) + lo + (hi - lo) * torch.rand(anchors, 1, generator=g, dtype=dtype)
    return ContrastiveBatch(pos_logits=pos, neg_logits=neg, temperature=1.0, bounded=False,
                            floor_logit=neg.amin(dim=1), negative_floor="trimmed",
                            meta={"sampler": "curl_like_rows", "spread": spread})


def with_floor(batch: ContrastiveBatch, rule: str) -> ContrastiveBatch:
    """``batch`` with the ``query_key`` floor ``rule``: ``trimmed`` or ``row_min`` (the row's smallest logit)."""
    if rule == "trimmed":
        return replace(batch, negative_floor="trimmed")
    if rule == "row_min":
        return replace(batch, negative_floor="bound", floor_logit=batch.neg_logits.detach().amin(dim=1))
    raise ValueError(f"rule must be trimmed or row_min, got {rule!r}")


def anchor_signal(loss: Any, batch: ContrastiveBatch) -> tuple[Tensor, Tensor, Tensor | None]:
    """``(per-anchor loss [A], |∂L_i/∂ℓ⁺_i| [A], clamped_frac or None)`` of ``loss`` (a registered loss module)
    on ``batch``; the logits are detached copies, so ``batch`` is untouched."""
    pos = batch.pos_logits.detach().clone().requires_grad_(True)
    b = replace(batch, pos_logits=pos, neg_logits=batch.neg_logits.detach())
    reduction = loss.reduction
    loss.reduction = "none"
    try:
        per = loss(b)
    finally:
        loss.reduction = reduction
    (grad,) = torch.autograd.grad(per.sum(), pos)
    stat = loss.last_stats.get(CLAMPED_FRAC)
    return per.detach(), grad[:, 0].abs(), None if stat is None else stat.detach()


def signal_report(loss: Any, batch: ContrastiveBatch, infonce: Any, min_infonce_loss: float = 0.1,
                  min_ratio: float = 0.05) -> dict[str, float]:
    """Fractions of anchors clamped and of anchors that lost their signal (see the module docstring), the mean
    loss, and the median ratio of the positive gradient to InfoNCE's on rows where InfoNCE's loss is high."""
    per, grad, clamped = anchor_signal(loss, batch)
    ref_per, ref_grad, _ = anchor_signal(infonce, batch)
    active = ref_per > min_infonce_loss
    ratio = grad / ref_grad.clamp_min(torch.finfo(grad.dtype).tiny)
    lost = active & (ratio < min_ratio)
    return {
        "clamped_frac": float("nan") if clamped is None else float(clamped),
        "lost_signal_frac": float(lost.double().mean()),
        "lost_among_active": float(lost.sum() / active.sum().clamp_min(1)),
        "active_frac": float(active.double().mean()),
        "mean_loss": float(per.mean()),
        "median_grad_ratio_active": float(ratio[active].median()) if bool(active.any()) else float("nan"),
    }
