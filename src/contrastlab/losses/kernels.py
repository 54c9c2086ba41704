"""Fused log-space reductions with hand-written backward passes (time and memory of one ``logsumexp``-like pass).

* :func:`weighted_lse`: ``log Σ_j w_j e^{ℓ_j}`` with constant weights ``w ≥ 0`` (BCL's ω, HCL's detached
  weights). Saves only the normalised terms ``p_j = w_j e^{ℓ_j} / Σ`` for backward (``∂/∂ℓ_j = p_j``).
* :func:`tilted_log_ratio`: ``lse((1+β)ℓ) − lse(βℓ)`` over the valid columns (HCL's reweighted mass without
  detaching its weights). ``∂/∂ℓ_j = (1+β) p1_j − β p0_j`` with ``p1 = softmax((1+β)ℓ)``, ``p0 = softmax(βℓ)``;
  that combination is formed in forward and is the only ``[A, N]`` tensor saved.

Both shift by the detached row max of the valid columns, so they accept logits of any magnitude, and give a
finite value (≈ ``NEG``) with zero gradient for rows without any valid column (or with all-zero weights).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from contrastlab.losses.base import NEG


def _row_max(x: Tensor, valid: Tensor | None) -> Tensor:
    """``[A, 1]`` max over the valid columns (``NEG`` for rows without one); no gradient."""
    with torch.no_grad():
        xm = x if valid is None else x.masked_fill(~valid, NEG)
        return xm.amax(dim=1, keepdim=True) if x.shape[1] else x.new_full((x.shape[0], 1), NEG)


class _WeightedLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, w: Tensor) -> Tensor:
        m = _row_max(x, w > 0)  # [A, 1]
        p = torch.sub(x, m).clamp_(max=0.0).exp_().mul_(w)  # w e^{ℓ−m}; masked (w = 0) → 0
        s = p.sum(dim=1, keepdim=True)  # [A, 1]
        tiny = torch.finfo(x.dtype).tiny
        p.div_(s.clamp_min(tiny))
        ctx.save_for_backward(p)
        return (m + torch.log(s.clamp_min(tiny))).squeeze(1).clamp_min(NEG)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        (p,) = ctx.saved_tensors
        return p * grad[:, None], None


def weighted_lse(x: Tensor, w: Tensor) -> Tensor:
    """``[A]`` ``log Σ_j w_j e^{x_j}`` for constant ``w ≥ 0`` (``[A, N]``, no gradient; 0 marks unused columns)."""
    return _WeightedLSE.apply(x, w.detach())


class _TiltedLogRatio(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, valid: Tensor | None, beta: float) -> Tensor:
        m = _row_max(x, valid)
        d = torch.sub(x, m).clamp_(max=0.0)  # ℓ − m ≤ 0 on valid columns
        if valid is not None:
            d.masked_fill_(~valid, NEG)
        p0 = torch.mul(d, beta).exp_()  # e^{β(ℓ−m)}
        if valid is not None:  # β·NEG does not underflow for β = 0 (or any β ≲ 1e-28): zero masked columns explicitly
            p0.masked_fill_(~valid, 0.0)
        p1 = d.exp_().mul_(p0)  # e^{(1+β)(ℓ−m)} (reuses d's buffer)
        # A row with a valid column has its max there (p0 = p1 = 1), so s0, s1 >= 1 and the clamp changes nothing;
        # a row without one (all p = 0) gets s = 1 and q = 0: (1+β)/s cannot overflow to inf and make 0·inf = nan.
        s0 = p0.sum(dim=1, keepdim=True).clamp_min(1.0)
        s1 = p1.sum(dim=1, keepdim=True).clamp_min(1.0)
        out = (m + torch.log(s1) - torch.log(s0)).squeeze(1).clamp_min(NEG)
        q = p1.mul_((1.0 + beta) / s1).sub_(p0.mul_(beta / s0))  # (1+β) p1 − β p0: the row's gradient, one buffer
        ctx.save_for_backward(q)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (q,) = ctx.saved_tensors
        return q * grad[:, None], None, None


def tilted_log_ratio(x: Tensor, valid: Tensor | None, beta: float) -> Tensor:
    """``[A]`` ``lse_valid((1+β)x) − lse_valid(βx)``, fused (HCL's ``log Σ w_j e^{ℓ_j} − log N``)."""
    return _TiltedLogRatio.apply(x, valid, float(beta))
