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

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import Tensor

from contrastlab.losses.base import (
    NEG,
    ContrastiveLoss,
    half_to_one,
    masked_lse,
    nll_from_mass,
    unit_interval_open,
)
from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.platform.registry import HParam

_IDX_BITS_MAX = 12
"""Widest column index packed into the low bits of an int32 sort key (``N ≤ 4096``); wider rows use int64 keys."""
_BLOCK = 1 << 17
"""Elements per row block of the CPU eCDF (≈ 2.3 MiB of reused buffers per thread, cache-resident)."""


def _float_keys(src: np.ndarray) -> np.ndarray:
    """Order-preserving int32 keys of float32 values: ``x < y ⇔ key(x) < key(y)``, ``key(−0.0) = key(+0.0)``."""
    bits = (src + np.float32(0.0)).view(np.int32)  # + 0.0 maps −0.0 to +0.0: equal values get equal keys
    return bits ^ ((bits >> 31) & np.int32(0x7FFFFFFF))  # sign-magnitude → two's complement


def _counts_le_exact64(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted column ids and ``≤``-counts of one block from one sort of int64 ``(key << 32) | column`` per row."""
    R, N = key.shape
    packed = key.astype(np.int64)
    packed <<= 32
    packed |= np.arange(N, dtype=np.int64)[None, :]
    packed.sort(axis=1)
    col = (packed & np.int64(0xFFFFFFFF)).astype(np.intp)
    hi = packed >> 32
    counts = _run_ends(hi[:, 1:] != hi[:, :-1], R, N)
    return col, counts


def _run_ends(boundary: np.ndarray, R: int, N: int) -> np.ndarray:
    """``[R, N]`` int32 one-past-the-end of each position's run of equal sorted keys (= its ``≤``-count).

    ``boundary[:, p]`` (``[R, N−1]``) is True where sorted positions ``p`` and ``p + 1`` hold different keys.
    """
    ends = np.empty((R, N), dtype=np.int32)
    ends[:, :-1] = np.where(boundary, np.arange(1, N, dtype=np.int32)[None, :], N)
    ends[:, -1] = N
    return np.ascontiguousarray(np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1])  # reverse cummin


class _Workspace:
    """One thread's reusable buffers for blocks of up to ``R`` rows (fresh large temporaries cost page faults)."""

    def __init__(self, R: int, N: int) -> None:
        self.keys = np.empty((R, N), dtype=np.int32)
        self.tmp = np.empty((R, N), dtype=np.int32)
        self.col = np.empty((R, N), dtype=np.int64)  # int64: torch's scatter index dtype
        self.same = np.zeros((R, N), dtype=bool)  # the last column is never written: stays False
        self.member = np.zeros(R * N, dtype=bool)  # kept all-False between blocks
        self.cols = np.arange(N, dtype=np.int32)


def _counts_le_chunk(src: np.ndarray, ws: _Workspace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``≤``-counts of a float32 block ``[R, N]`` from one int32 sort per row (``N ≤ 2**_IDX_BITS_MAX``).

    Each value's order-preserving int32 key keeps its top ``32 − b`` bits and gets its column id in the low
    ``b = ⌈log2 N⌉`` bits; one SIMD sort per row then orders the values by that prefix. A value whose prefix is
    unique in its row has ``≤``-count = its sorted position + 1. The few values whose prefix is shared (equal
    values, or values within ``2^b`` key units) are re-ranked exactly within their group by one small sort on
    ``(group, full key)``. Returns ``(col, fix_rows, fix_cols, fix_counts)``: sorted position ``p`` of row ``r``
    holds column ``col[r, p]`` (a view of ``ws``), whose count is ``p + 1`` unless ``(r, col[r, p])`` is in the
    fix-ups. Returns ``None`` when too many prefixes collide (heavy ties): the caller then uses the int64 sort.
    """
    R, N = src.shape
    b = max(1, (N - 1).bit_length())
    low = np.int32((1 << b) - 1)
    k, tmp, col, same = ws.keys[:R], ws.tmp[:R], ws.col[:R], ws.same[:R]
    np.add(src, np.float32(0.0), out=k.view(np.float32))  # + 0.0 maps −0.0 to +0.0
    np.right_shift(k, 31, out=tmp)
    np.bitwise_and(tmp, np.int32(0x7FFFFFFF), out=tmp)
    np.bitwise_xor(k, tmp, out=k)  # order-preserving int32 key (sign-magnitude → two's complement)
    np.bitwise_and(k, ~low, out=k)
    np.bitwise_or(k, ws.cols, out=k)  # (value prefix, column)
    k.sort(axis=1)
    np.bitwise_and(k, low, out=col)  # [R, N] column at each sorted position
    np.right_shift(k, b, out=k)  # value prefix at each sorted position
    np.equal(k[:, 1:], k[:, :-1], out=same[:, :-1])  # sorted positions p and p + 1 share a prefix
    flat = same.reshape(-1)
    pair = np.flatnonzero(flat)
    if len(pair) == 0:
        return col, pair, pair, pair
    if len(pair) > (R * N) // 8:
        return None
    m = ws.member[: R * N]
    m[pair] = True
    m[pair + 1] = True
    q = np.flatnonzero(m)  # flat sorted positions in shared-prefix groups; each group is a consecutive run
    m[q] = False
    L = len(q)
    starts = ~flat[q - 1]  # q = 0 reads the block's last entry, which is False
    gs = np.maximum.accumulate(np.where(starts, np.arange(L), 0))  # list index of each member's group start
    rr = q // N
    pp = q - rr * N
    cc = col.reshape(-1)[q]
    kk = _float_keys(src[rr, cc]).astype(np.int64)
    order = np.argsort((gs.astype(np.int64) << 32) | (kk + (1 << 31)))  # by (group, full value)
    sg, sk = gs[order], kk[order]
    last = np.ones(L, dtype=bool)  # last member of a run of equal (group, value)
    last[:-1] = (sg[1:] != sg[:-1]) | (sk[1:] != sk[:-1])
    run_end = np.minimum.accumulate(np.where(last, np.arange(L), L)[::-1])[::-1]
    counts = pp[sg] + (run_end - sg) + 1  # group's first position + rank within the group
    return col, rr[order], cc[order], counts


def _counts_le_block(src: np.ndarray, dst: Tensor, table: np.ndarray | None, ws: _Workspace) -> None:
    """Write the ``≤``-counts (or ``table[count]``) of the float32 block ``src`` into ``dst`` (same shape)."""
    R, N = src.shape
    res = _counts_le_chunk(src, ws) if N <= 1 << _IDX_BITS_MAX else None
    if res is None:  # wide rows or heavy ties: exact int64 keys
        col, counts = _counts_le_exact64(_float_keys(src))
        vals = counts.astype(np.float32) if table is None else table[counts]
        dst.scatter_(1, torch.from_numpy(col).long(), torch.from_numpy(vals))
        return
    col, fr, fc, fcnt = res
    base = torch.arange(1, N + 1, dtype=dst.dtype) if table is None else torch.from_numpy(table[1:])
    dst.scatter_(1, torch.from_numpy(col), base.expand(R, N))
    if len(fr):
        dst.numpy()[fr, fc] = fcnt if table is None else table[fcnt]


def _counts_le_numpy(x: Tensor, table: Tensor | None = None) -> Tensor:
    """``[A, N]`` ``#{k : x_k ≤ x_j}`` per row (or ``table[count]``) for a float32 CPU tensor; exact, ties included.

    One SIMD sort (numpy) per row of int32 keys (see :func:`_counts_le_chunk`), int64 keys for very wide rows
    or heavily tied blocks. Rows are processed in cache-sized blocks with reused buffers, split over up to
    ``torch.get_num_threads()`` threads (numpy's sort releases the GIL).
    """
    A, N = x.shape
    out = torch.empty(A, N, dtype=torch.float32)
    src = x.contiguous().numpy()
    tab = None if table is None else table.float().numpy()
    rows = max(1, _BLOCK // max(N, 1))
    blocks = [(r, min(A, r + rows)) for r in range(0, A, rows)]
    workers = min(len(blocks), torch.get_num_threads())

    def work(part: list[tuple[int, int]]) -> None:
        ws = _Workspace(rows, N)
        for r0, r1 in part:
            _counts_le_block(src[r0:r1], out[r0:r1], tab, ws)

    if workers > 1:
        step = -(-len(blocks) // workers)
        parts = [blocks[i:i + step] for i in range(0, len(blocks), step)]
        futures = [_pool(len(parts) - 1).submit(work, part) for part in parts[1:]]
        work(parts[0])  # the calling thread takes the first share
        for f in futures:
            f.result()
    else:
        work(blocks)
    return out


_POOL: dict[tuple[int, int], ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    """A persistent pool of ``workers`` helper threads (no thread start-up per call; a new one after ``fork``)."""
    key = (os.getpid(), workers)
    if key not in _POOL:
        _POOL[key] = ThreadPoolExecutor(workers, thread_name_prefix="contrastlab-ecdf")
    return _POOL[key]


def _counts_le(x: Tensor, table: Tensor | None = None) -> Tensor:
    """``[A, N]`` ``#{k : x_k ≤ x_j}`` per row (or ``table[count]``, ``table``: ``[N + 1]``); exact, no gradient.

    CPU float32: :func:`_counts_le_numpy`; elsewhere one ``torch.sort`` + ``searchsorted(right=True)`` per row.
    """
    if x.device.type == "cpu" and x.dtype == torch.float32 and x.shape[1] < 2**31:
        return _counts_le_numpy(x, None if table is None else table.float())
    srt = torch.sort(x, dim=1).values
    counts = torch.searchsorted(srt, x.contiguous(), right=True)
    return counts.to(x.dtype) if table is None else table[counts]


@torch.no_grad()
def ecdf(neg_logits: Tensor, mask: Tensor | None) -> Tensor:
    """``[A, N]`` per-row empirical CDF ``Φ̂_j = #{valid k : ℓ_k ≤ ℓ_j} / N_valid`` (eq. 18; ties count).

    One sort per row (see :func:`_counts_le`); exact. Masked columns are sorted last (``+inf``) and their
    own values are unused.
    """
    x = neg_logits.detach()
    if mask is not None:
        x = x.masked_fill(~mask, float("inf"))
        n = mask.sum(dim=1, keepdim=True).clamp_min(1).to(x.dtype)
    else:
        n = x.new_full((x.shape[0], 1), float(max(x.shape[1], 1)))
    if x.numel() == 0:
        return torch.zeros_like(x)
    return _counts_le(x).div_(n).clamp_(max=1.0)


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


@torch.no_grad()
def log_bcl_weights(neg_logits: Tensor, mask: Tensor | None, tau_plus: float, alpha: float, beta: float) -> Tensor:
    """``[A, N]`` ``log ω`` (eq. 20 with the eCDF of eq. 18), ``NEG`` where ``ω = 0`` or the column is masked.

    Without a mask every row has the same ``N``, so ``ω`` takes one of ``N + 1`` values: they are computed once
    (a table indexed by the ``≤``-count) and written straight through the sort's permutation. With a mask the
    eCDF is divided by each row's own ``N`` and ``ω`` is evaluated elementwise. No gradient (``ω`` is piecewise
    constant in the scores, spec §9.5).
    """
    x = neg_logits.detach()
    N = x.shape[1]
    if mask is None and x.numel():
        phi_table = torch.arange(N + 1, dtype=x.dtype, device=x.device).div_(N)
        table = bcl_weights(phi_table, tau_plus, alpha, beta, inplace=True).log_().clamp_(min=NEG)  # [N + 1]
        return _counts_le(x, table)
    w = bcl_weights(ecdf(x, mask), tau_plus, alpha, beta, inplace=True)
    w = w.log_().clamp_(min=NEG)
    return w if mask is None else w.masked_fill_(~mask, NEG)


def bcl_terms(batch: ContrastiveBatch, tau_plus: float, alpha: float, beta: float) -> Tensor:
    """``[A]`` per-anchor BCL (eq. 10) on a validated, compute-dtype batch.

    ``log Σ_j ω_j e^{ℓ_j} = logsumexp_j(ℓ_j + log ω_j)`` with ``log ω`` a constant (added in place into its own
    buffer), so forward and backward cost one InfoNCE ``logsumexp`` plus one add, and the gradient is eq. 11
    (``∂/∂ℓ_j = ω_j e^{ℓ_j} / Σ_k ω_k e^{ℓ_k}``).
    """
    ln = batch.neg_logits
    log_w = log_bcl_weights(ln, batch.neg_mask, tau_plus, alpha, beta)  # [A, N], no gradient
    log_mass = masked_lse(ln, None, shift=log_w)  # log Σ_j ω_j e^{ℓ_j}; masked columns carry log ω = NEG
    return nll_from_mass(log_mass.clamp_min(NEG), batch.pos_logits[:, 0])


def bcl(
    batch: ContrastiveBatch, tau_plus: float = 0.1, alpha: float = 0.9, beta: float = 0.9, reduction: str = "mean"
) -> Tensor:
    """Functional BCL of ``batch``: :class:`BCLLoss` (hyperparameters checked, computed in float32 under AMP)."""
    return BCLLoss(reduction=reduction, tau_plus=tau_plus, alpha=alpha, beta=beta)(batch)


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
