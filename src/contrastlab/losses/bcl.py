"""BCL: Bayesian self-supervised contrastive learning (Liu, Wang, Li 2024).

References:
- [0] Liu, Wang, Li, *Bayesian Self-Supervised Contrastive Learning*, arXiv:2301.11673v4, eqs. 10, 18–21
  (losses-spec §6; reference code github.com/liubin06/BCL).

Each negative gets a Monte-Carlo importance weight ``ω_j`` that depends only on its rank among the anchor's
``N`` negative scores (per-anchor eCDF ``Φ̂_j = #{k : ℓ_k ≤ ℓ_j} / N``, ties counted as ``≤``, eq. 18)::

    Φ_j = 2Φ̂_j / (b + sqrt(b² + 4aΦ̂_j))                  (eq. 21, rationalised: safe at a = 0, i.e. τ⁺ = ½)
    a = (1−2α)(τ⁻−τ⁺),  b = 2[ατ⁻ + (1−α)τ⁺]
    ω_j = [(1−β)α + (β−α)Φ_j] / (Z · [ατ⁻ + (1−α)τ⁺ + (1−2α)Φ_j(τ⁻−τ⁺)]),  Z = (1−β)α + β(1−α)   (eq. 20)
    L = -log( e^{ℓ⁺} / (e^{ℓ⁺} + Σ_j ω_j e^{ℓ_j}) )       (eq. 10; no factor N, no clamp)

``α ∈ [0.5, 1]`` is the encoder's AUC (not a prior), ``β ∈ [0.5, 1]`` the hardness. The ranks come from one
sort per row (O(N log N) per anchor, O(A·N) memory; the reference code builds an ``[A, N, N]`` comparison
tensor). ``ω`` is piecewise constant in the scores, so it carries no gradient.
Limits: at ``α = β = 1`` (``Z = 0``; the target density is ``0/0`` and its limit depends on the path) we use
the limit along the diagonal ``β = α``, where ``num/Z ≡ ½`` — this keeps the exact reduction
``(τ⁺ = ½, β = α) ⇒ ω ≡ 1`` for every ``α``. At ``α = 1, τ⁺ = 0``, ``ω ≡ 1`` (the ``0/0`` at ``Φ = 1`` is its
continuous limit).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import Tensor

from contrastlab.losses.base import (
    ContrastiveLoss,
    half_to_one,
    nll_from_mass,
    prepare_batch,
    reduce_anchors,
    unit_interval_open,
)
from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.losses.kernels import weighted_lse
from contrastlab.platform.registry import HParam


def _counts_le_chunk(src: np.ndarray, dst: Tensor) -> None:
    """``dst[i, j] = #{k : src[i, k] ≤ src[i, j]}`` for a float32 block (see :func:`_counts_le_numpy`)."""
    R, N = src.shape
    bits = (src + np.float32(0.0)).view(np.int32)  # + 0.0 maps -0.0 to +0.0: equal values get equal keys
    key = ~(bits ^ ((bits >> 31) & 0x7FFFFFFF))  # order-preserving int32, negated: ascending = descending value
    packed = key.astype(np.int64)
    packed <<= 32
    packed |= np.arange(N, dtype=np.int64)[None, :]
    packed.sort(axis=1)
    halves = packed.view(np.int32)  # [R, 2N]: (low, high) int32 halves of each packed key
    lo, hi = (halves[:, 0::2], halves[:, 1::2]) if sys.byteorder == "little" else (halves[:, 1::2], halves[:, 0::2])
    ties = hi[:, 1:] == hi[:, :-1]
    if ties.any():  # start of each run of equal values = number of strictly larger values
        start = np.zeros((R, N), dtype=np.int32)
        np.copyto(start[:, 1:], np.arange(1, N, dtype=np.int32)[None, :], where=~ties)
        np.maximum.accumulate(start, axis=1, out=start)
        counts = torch.from_numpy((N - start).astype(np.float32))
    else:  # no ties: the sorted position is the number of strictly larger values
        counts = torch.arange(N, 0, -1, dtype=torch.float32).expand(R, N)
    dst.scatter_(1, torch.from_numpy(lo).long(), counts)


def _counts_le_numpy(x: Tensor) -> Tensor:
    """``[A, N]`` ``#{k : x_k ≤ x_j}`` per row for a float32 CPU tensor, via SIMD sorts of packed int64 keys.

    Each value becomes an order-preserving int32 key (sign-magnitude → two's complement), negated with ``~`` so
    that an ascending sort is descending in value, and packed with its column index into an int64. After the
    sort, the start of each run of equal keys is the number of strictly larger values, so
    ``count(≤) = N − start``; the counts are scattered back through the packed indices. Exact, ties included.
    Rows are processed in blocks (bounded temporary memory) on up to ``torch.get_num_threads()`` threads.
    """
    A, N = x.shape
    out = torch.empty(A, N, dtype=torch.float32)
    src = x.contiguous().numpy()
    rows = max(1, (1 << 16) // max(N, 1))
    blocks = [(r, min(A, r + rows)) for r in range(0, A, rows)]
    workers = min(len(blocks), torch.get_num_threads())
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda b: _counts_le_chunk(src[b[0]:b[1]], out[b[0]:b[1]]), blocks))
    else:
        for r0, r1 in blocks:
            _counts_le_chunk(src[r0:r1], out[r0:r1])
    return out


@torch.no_grad()
def ecdf(neg_logits: Tensor, mask: Tensor | None) -> Tensor:
    """``[A, N]`` per-row empirical CDF ``Φ̂_j = #{valid k : ℓ_k ≤ ℓ_j} / N_valid`` (eq. 18; ties count).

    One sort per row: on CPU float32 a packed-key SIMD sort (numpy), elsewhere ``torch.sort`` +
    ``searchsorted``; both exact. Masked columns are sorted last (``+inf``) and their own values are unused.
    """
    x = neg_logits.detach()
    if mask is not None:
        x = x.masked_fill(~mask, float("inf"))
        n = mask.sum(dim=1, keepdim=True).clamp_min(1).to(x.dtype)
    else:
        n = x.new_full((x.shape[0], 1), float(max(x.shape[1], 1)))
    if x.numel() == 0:
        return torch.zeros_like(x)
    if x.device.type == "cpu" and x.dtype == torch.float32 and x.shape[1] < 2**31:
        counts = _counts_le_numpy(x)
    else:
        srt = torch.sort(x, dim=1).values
        counts = torch.searchsorted(srt, x.contiguous(), right=True).to(x.dtype)
    return counts.div_(n).clamp_(max=1.0)


@torch.no_grad()
def bcl_weights(phi_un: Tensor, tau_plus: float, alpha: float, beta: float, inplace: bool = False) -> Tensor:
    """Importance weights ``ω`` (eq. 20) from the eCDF ``Φ̂`` (same shape), for ``α, β ∈ [0.5, 1]``.

    With ``inplace=True`` the result overwrites ``phi_un`` (one extra buffer of the same size is used).
    """
    tm = 1.0 - tau_plus
    if alpha == 1.0 and tau_plus == 0.0:
        return phi_un.fill_(1.0) if inplace else torch.ones_like(phi_un)
    buf = phi_un if inplace else phi_un.clone()
    a = (1.0 - 2.0 * alpha) * (tm - tau_plus)
    b = 2.0 * (alpha * tm + (1.0 - alpha) * tau_plus)
    tmp = torch.mul(buf, 4.0 * a).add_(b * b).clamp_(min=0.0).sqrt_().add_(b)
    phi = buf.mul_(2.0).div_(tmp)  # eq. 21, rationalised: 2Φ̂ / (b + sqrt(b² + 4aΦ̂))
    den = torch.mul(phi, (1.0 - 2.0 * alpha) * (tm - tau_plus), out=tmp)
    den.add_(alpha * tm + (1.0 - alpha) * tau_plus).clamp_(min=torch.finfo(phi.dtype).tiny)
    z = (1.0 - beta) * alpha + beta * (1.0 - alpha)
    if z == 0.0:  # α = β = 1 (Z = 0, target density 0/0): the limit along the diagonal β = α, num/Z ≡ ½
        phi.fill_(0.5)
    else:
        phi.mul_((beta - alpha) / z).add_((1.0 - beta) * alpha / z)
    return phi.div_(den).clamp_(min=0.0)


def bcl_terms(batch: ContrastiveBatch, tau_plus: float, alpha: float, beta: float) -> Tensor:
    """``[A]`` per-anchor BCL (eq. 10) on a validated, compute-dtype batch."""
    ln, mask = batch.neg_logits, batch.neg_mask
    w = bcl_weights(ecdf(ln, mask), tau_plus, alpha, beta, inplace=True)  # [A, N], no gradient
    if mask is not None:
        w.masked_fill_(~mask, 0.0)
    log_mass = weighted_lse(ln, w)  # log Σ_j ω_j e^{ℓ_j}
    return nll_from_mass(log_mass, batch.pos_logits[:, 0])


def bcl(
    batch: ContrastiveBatch, tau_plus: float = 0.1, alpha: float = 0.9, beta: float = 0.9, reduction: str = "mean"
) -> Tensor:
    """Functional BCL of ``batch``."""
    b = prepare_batch(batch, "bcl")
    return reduce_anchors(bcl_terms(b, tau_plus, alpha, beta), b, reduction)


class BCLLoss(ContrastiveLoss):
    """Bayesian contrastive loss (Liu et al. 2024): rank-based importance weights on the negatives."""

    name = "bcl"
    description = "Bayesian CL (Liu et al. 2024): eCDF-rank importance weights (debiasing + hard mining)"
    hyperparameters = (
        HParam("tau_plus", 0.1, "class prior τ⁺ (paper: 1/C; 0.5 for binary tasks)", "[0, 1)",
               "BCL §4 (τ⁺ = 1/C, C = 10) and reference code default", unit_interval_open),
        HParam("alpha", 0.9, "encoder AUC α = P(x̂⁻ < x̂⁺) — not a prior (0.5 = random encoder)", "[0.5, 1]",
               "BCL simulation default (§4.1) and README CIFAR10 setting (α = .9)", half_to_one),
        HParam("beta", 0.9, "hardness level β (0.5 = no hard mining)", "[0.5, 1]",
               "BCL: recommended β = 1 − 1/C; Table 5 best on CIFAR10", half_to_one),
    )
    tau_plus: float
    alpha: float
    beta: float

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        return bcl_terms(batch, float(self.tau_plus), float(self.alpha), float(self.beta))
