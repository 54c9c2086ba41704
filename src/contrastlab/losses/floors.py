"""Floors of the debiased negative mass, and the clamp statistics every debiased loss reports.

DCL (Chuang et al. 2020, eq. 7), HCL (Robinson et al. 2021) and PUCL (Wang et al. 2024, eq. 11) estimate the
mass of the *true* negatives as a difference, ``N·ĝ = c_u·Σ_j e^{ℓ_j} − c_p·N·P̄``, which can fall below anything
attainable, so it is clamped at a floor. The papers work with cosine logits ``ℓ = cos/t`` and clamp at
``N e^{-1/t}``, the smallest attainable mass (rule ``"bound"``).

CURL's bilinear logits ``q W kᵀ`` are unbounded, so there is no attainable minimum, and the papers give no floor
for that setting (losses-spec §3.5(d)). Two rules exist for it here:

* ``"bound"`` with the row's smallest negative logit as ``ℓ_min`` (the ``query_key`` sampler's
  ``floor="row_min"``, contrastlab ≤ 0.1's behaviour): ``N e^{min_j ℓ_j}``, detached. With CURL's logit spread
  of 5–11 this floor is ``e^{-5}``–``e^{-11}`` of the largest negative, so a clamped anchor's loss and gradient
  are ≈ 0 even when InfoNCE still has signal for it.
* ``"trimmed"`` (the ``query_key`` default with bilinear scores; this project's extension, not a paper's rule):
  ``N`` times the mean of the ``k = ⌈(1−π)N⌉`` smallest ``e^{ℓ_j}`` of the row, ``π = c_p / c_u`` the loss's
  false-negative fraction (``τ⁺`` for DCL/HCL, ``α(1−c)/(1−αc)`` for PUCL). Reasoning: the correction assumes a
  fraction ``π`` of the ``N`` candidates are false negatives; whichever ``πN`` of them they are, the mean score
  of the remaining true negatives is at least the mean of the ``k`` smallest scores. The floor is therefore the
  smallest true-negative mass consistent with the loss's own prior, it moves with the row (shift-invariant), it
  carries gradient (through the kept negatives), and ``π → 0`` gives InfoNCE. The evidence for choosing it is in
  ``docs/losses.md`` ("Floors for unbounded logits").
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from contrastlab.losses.base import NEG, floor_logits, neg_count, safe_log
from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.platform.logwindow import LogWindow

FLOOR_RULES = ("bound", "trimmed")
"""Values of :attr:`ContrastiveBatch.negative_floor`."""

CLAMPED_FRAC = "clamped_frac"
"""Key of the clamp statistic in :attr:`ContrastiveLoss.last_stats` (logged as ``train/clamped_frac``)."""


def trimmed_log_mass(batch: ContrastiveBatch, false_fraction: float) -> Tensor:
    """``[A]`` ``log(N · mean of the ⌈(1−π)N⌉ smallest e^{ℓ_j})`` over each row's valid negatives (``π`` =
    ``false_fraction``); differentiable through the kept logits. A row without valid negatives gives a very
    negative finite value."""
    ln = batch.neg_logits
    n = neg_count(batch)  # [A]
    if ln.shape[1] == 0:
        return ln.new_full((ln.shape[0],), NEG)
    keep = torch.ceil((1.0 - float(false_fraction)) * n - 1e-9).clamp_min(1.0)  # [A]
    x = ln if batch.neg_mask is None else ln.masked_fill(~batch.neg_mask, math.inf)
    ordered = torch.sort(x, dim=1).values  # ascending; invalid columns (+inf) last
    rank = torch.arange(ln.shape[1], device=ln.device, dtype=ln.dtype)[None, :]
    kept = (rank < keep[:, None]) & (rank < n[:, None])
    ordered = ordered.masked_fill(~kept, NEG)
    log_kept = torch.logsumexp(ordered, dim=1)  # log Σ of the k smallest
    return (torch.log(n.clamp_min(1.0)) - torch.log(keep) + log_kept).masked_fill(n == 0, NEG)


def log_negative_floor(batch: ContrastiveBatch, false_fraction: float) -> Tensor:
    """``[A]`` log of the floor of the debiased negative mass ``N·ĝ`` under ``batch.negative_floor``."""
    rule = batch.negative_floor
    if rule == "trimmed":
        return trimmed_log_mass(batch, false_fraction)
    if rule == "bound":
        return safe_log(neg_count(batch)) + floor_logits(batch)
    raise ValueError(f"negative_floor={rule!r} is invalid; valid: {', '.join(FLOOR_RULES)}")


def record_clamped(stats: dict[str, Tensor] | None, clamped: Tensor) -> None:
    """Store the fraction of anchors whose floor (or guard) is active (``clamped``: ``[A]`` bool), detached.

    Kept as a tensor (no host synchronisation); callers convert when they log.
    """
    if stats is None:
        return
    stats[CLAMPED_FRAC] = clamped.detach().float().mean() if clamped.numel() else torch.zeros((), device=clamped.device)


def clamped_frac_of(loss: object) -> Tensor | None:
    """The ``clamped_frac`` a registered loss module reported for its last call (``last_stats``; DCL, HCL, PUCL,
    DebiasedPos), or ``None`` for a loss without that statistic."""
    return (getattr(loss, "last_stats", None) or {}).get(CLAMPED_FRAC)


class ClampMeter(LogWindow):
    """Running mean of a loss's ``clamped_frac`` between two logging points, kept as a tensor.

    ``update(loss)`` after every step reads ``loss.last_stats`` without a host sync; ``pop(tag)`` returns
    ``{tag: mean}`` (one sync) or ``{}`` when the loss reports no clamp statistic (InfoNCE, BCL, SupCon, ...).
    A :class:`~contrastlab.platform.logwindow.LogWindow`, so its ``state_dict`` can go into checkpoints.
    """

    def update(self, loss: object) -> None:
        """Add the last call's ``clamped_frac`` of ``loss`` (a registered loss module), if it has one."""
        self.add(CLAMPED_FRAC, clamped_frac_of(loss))

    def pop(self, tag: str = "train/clamped_frac") -> dict[str, float]:  # type: ignore[override]
        """``{tag: mean since the last pop}`` (empty if nothing was recorded), then reset."""
        means = super().pop()
        return {tag: means[CLAMPED_FRAC]} if CLAMPED_FRAC in means else {}
