"""Shared machinery of every contrastive loss: batch validation, compute dtype, label policy, reduction,
and the log-space helpers the losses are written with.

Numerics (losses-spec §1 "Numerical stability", §8.1):

* Every loss is computed in float32, or float64 when the logits are float64, with autocast disabled, so
  bf16/fp16 logits produced under AMP are upcast first.
* Everything is written in log-space: sums of exponentials are ``logsumexp`` (which shifts by the row max),
  the final ``-log(e^{ℓ⁺} / (e^{ℓ⁺} + X))`` is ``softplus(log X − ℓ⁺)``. No ``exp`` of a raw logit is ever
  taken, so logits of any magnitude (CURL's bilinear scores, ``|ℓ|`` up to 1e4) cannot overflow.
* Debiased masses of the form ``max(e^a − e^b, floor)`` are computed by :func:`log_sub_clamped` *before* any
  log of a difference is taken; when the floor is active the gradient through the difference is exactly 0.
* Masked columns are filled with the finite constant :data:`NEG` (not ``-inf``), so a row without any valid
  column gives a finite value and finite (zero) gradients instead of ``nan``.

Distributed: a sampler that gathered embeddings from several ranks stores ``world_size`` in ``batch.meta``.
:func:`reduce_anchors` then returns, on every rank, the *global* mean over all ranks' anchors as the value,
while its gradient is that of ``world_size × (local sum) / (global anchor count)``; with the sampler's
sum-reducing gather and DDP's gradient averaging this reproduces the single-process gradient exactly.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.platform.errors import ConfigError, IncompatibleError
from contrastlab.platform.registry import HParam, bind_hparams

NEG = -1.0e30
"""Finite stand-in for ``log 0`` used to mask columns (exp underflows to exactly 0 in float32/64)."""

REDUCTIONS = ("mean", "sum", "none")


# ----------------------------------------------------------------------------------------------- validation
def unit_interval_open(v: Any) -> bool:
    """``0 <= v < 1`` (τ⁺, PUCL's α)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= float(v) < 1.0


def unit_interval_closed(v: Any) -> bool:
    """``0 <= v <= 1`` (PUCL's c)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= float(v) <= 1.0


def half_to_one(v: Any) -> bool:
    """``0.5 <= v <= 1`` (BCL's α and β)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0.5 <= float(v) <= 1.0


def is_bool(v: Any) -> bool:
    """A real ``bool``."""
    return isinstance(v, bool)


def _is_float_tensor(x: Any) -> bool:
    return isinstance(x, Tensor) and x.is_floating_point()


def _is_int_tensor(x: Any) -> bool:
    return isinstance(x, Tensor) and not x.is_floating_point() and not x.is_complex() and x.dtype != torch.bool


def _bad(owner: str, param: str, expected: str, got: Any) -> ConfigError:
    shape = tuple(got.shape) if isinstance(got, Tensor) else None
    desc = f"{type(got).__name__}" if shape is None else f"tensor of shape {shape} and dtype {got.dtype}"
    return ConfigError(f"{owner}: batch.{param} must be {expected}; got {desc}")


def prepare_batch(batch: Any, owner: str) -> ContrastiveBatch:
    """Validate ``batch`` (types, shapes, dtypes, temperature) and return it in the compute dtype, with the
    masked-out negative columns set to 0 (their values are never meaningful and get no gradient).

    Raises :class:`ConfigError` naming the offending field and what it must be.
    """
    if not isinstance(batch, ContrastiveBatch):
        raise ConfigError(
            f"{owner}: expected a ContrastiveBatch (build one with a sampler); got {type(batch).__name__}"
        )
    pos, neg = batch.pos_logits, batch.neg_logits
    if not _is_float_tensor(pos) or pos.dim() != 2 or pos.shape[1] < 1:
        raise _bad(owner, "pos_logits", "a floating tensor [A, M] with M >= 1", pos)
    A = pos.shape[0]
    if not _is_float_tensor(neg) or neg.dim() != 2 or neg.shape[0] != A:
        raise _bad(owner, "neg_logits", f"a floating tensor [A={A}, N]", neg)
    shape = tuple(neg.shape)
    if batch.neg_mask is not None and (
        not isinstance(batch.neg_mask, Tensor) or batch.neg_mask.dtype != torch.bool
        or tuple(batch.neg_mask.shape) != shape
    ):
        raise _bad(owner, "neg_mask", f"a bool tensor of shape {shape}", batch.neg_mask)
    t = batch.temperature
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (float(t) > 0 and math.isfinite(float(t))):
        raise ConfigError(f"{owner}: batch.temperature={t!r} is out of range; valid range: (0, inf)")
    for name, want in (("anchor_labels", (A,)), ("neg_labels", shape), ("pos_labels", tuple(pos.shape))):
        lab = getattr(batch, name)
        if lab is not None and (not _is_int_tensor(lab) or tuple(lab.shape) != want):
            raise _bad(owner, name, f"an integer tensor of shape {want}", lab)
    fl = batch.floor_logit
    if isinstance(fl, Tensor) and tuple(fl.shape) not in ((A,), ()):
        raise _bad(owner, "floor_logit", f"a float, or a tensor of shape ({A},)", fl)
    batch = batch.to_compute_dtype()
    if batch.neg_mask is not None:  # padding may hold anything (−inf, nan): no loss may see it, not even as 0·x
        batch = replace(batch, neg_logits=batch.neg_logits.masked_fill(~batch.neg_mask, 0.0))
    return batch


# ------------------------------------------------------------------------------------------ log-space helpers
class _RowLSE(torch.autograd.Function):
    """Row ``logsumexp`` of ``x + shift`` (``shift``: constant ``[A, N]`` or ``None``), fused.

    Forward: one row max, one ``exp`` into a single buffer (``shift``'s own buffer when given), one sum; that
    buffer (the unnormalised softmax) is saved, so backward is one multiply (``torch.logsumexp`` recomputes
    the ``exp`` in backward). Not twice differentiable (raises under ``create_graph``).
    """

    @staticmethod
    def forward(ctx, x: Tensor, shift: Tensor | None) -> Tensor:
        p = x if shift is None else shift.add_(x)  # the caller hands over ``shift``'s buffer
        m = p.amax(dim=1, keepdim=True)  # [A, 1]
        m.masked_fill_(m.abs() == math.inf, 0.0)  # ±inf logits: same result as torch.logsumexp
        p = torch.sub(p, m) if shift is None else p.sub_(m)
        s = p.exp_().sum(dim=1, keepdim=True)  # [A, 1], ≥ 1 for finite rows
        ctx.save_for_backward(p, s)
        return (m + torch.log(s)).squeeze(1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        p, s = ctx.saved_tensors
        return p * (grad[:, None] / s), None  # softmax(x + shift) · grad


def masked_lse(x: Tensor, mask: Tensor | None, shift: Tensor | None = None) -> Tensor:
    """``log Σ_{j: mask} e^{x_j + shift_j}`` per row → ``[A]``; ``≈ NEG`` (finite) for rows without a valid column.

    ``shift`` (optional, ``[A, N]``, no gradient, e.g. BCL's ``log ω``) is overwritten. Every row is shifted by
    its own max, so logits of any magnitude are safe; no exponential of a raw logit is taken.
    """
    if x.shape[1] == 0:
        return x.new_full((x.shape[0],), NEG)
    if mask is not None:
        x = x.masked_fill(~mask, NEG)
    return _RowLSE.apply(x, None if shift is None else shift.detach())


def neg_count(batch: ContrastiveBatch) -> Tensor:
    """``[A]`` number ``N`` of valid negatives per row, read from the mask (compute dtype)."""
    if batch.neg_mask is None:
        return batch.neg_logits.new_full((batch.num_anchors,), float(batch.neg_logits.shape[1]))
    return batch.neg_mask.sum(dim=1).to(batch.neg_logits.dtype)


def safe_log(x: Tensor) -> Tensor:
    """``log x`` with ``log 0`` replaced by :data:`NEG` (for counts)."""
    return torch.log(x).clamp_min(NEG)


def floor_logits(batch: ContrastiveBatch) -> Tensor:
    """``[A]`` logit ``ℓ_min`` of the clamp floor ``e^{ℓ_min}`` (detached); see :meth:`ContrastiveBatch.floor`.

    ``floor_logit=None`` → ``-1/t`` (the cosine bound, DCL's ``e^{-1/t}``); a float → that value; a tensor
    ``[A]`` → a per-row floor (the query_key sampler's bilinear geometry uses the row's smallest negative
    logit, see ``contrastlab.samplers.query_key``).
    """
    return batch.floor()


def log_sub_clamped(log_a: Tensor, log_b: Tensor, log_floor: Tensor) -> Tensor:
    """``log max(e^a − e^b, e^floor)``, computed without ever taking the log of a non-positive number.

    A resolution guard is included: a *positive* difference is never trusted below ``eps · e^a`` (``eps`` = machine
    epsilon of the dtype), where it would be pure rounding noise; this keeps every gradient finite (bounded by
    ``1/eps``). It applies only while ``e^b < e^a``: a difference ≤ 0 gives exactly the floor. A finite result for
    ``e^b ≥ e^a`` without a floor (``log_floor = −inf``) is the guarded value ``a + log(eps)``.
    When the floor is active the gradient w.r.t. ``a`` and ``b`` is 0 (the floor is a constant).
    """
    eps = torch.finfo(log_a.dtype).eps
    gap = log_b - log_a
    diff = log_a + torch.log(-torch.expm1(gap.clamp(max=math.log1p(-eps))))  # log(e^a − e^b), ≥ a + log(eps)
    out = torch.maximum(diff, log_floor)
    # e^b ≥ e^a: the difference is ≤ 0 and the exact clamp is the floor itself (a constant: zero gradient). The
    # resolution guard above must not replace it: ``eps · e^a`` can exceed the floor and the numerator positive by
    # many orders of magnitude (M > 1 positives, small t, unbounded logits). Without a floor (−inf, DebiasedPos
    # with guard=False) the guarded value is kept, so the result stays finite.
    return torch.where((gap >= 0) & (log_floor > -math.inf), log_floor.expand_as(out), out)


def nll_from_mass(log_mass: Tensor, pos_logit: Tensor) -> Tensor:
    """``-log(e^{ℓ⁺} / (e^{ℓ⁺} + X)) = softplus(log X − ℓ⁺)`` per row."""
    return F.softplus(log_mass - pos_logit)


# ------------------------------------------------------------------------------------------------ reduction
def reduce_anchors(per_anchor: Tensor, batch: ContrastiveBatch, reduction: str) -> Tensor:
    """Reduce ``[A]`` per-anchor losses; distributed-aware (see the module docstring)."""
    if reduction == "none":
        return per_anchor
    world = int(batch.meta.get("world_size", 1)) if batch.meta else 1
    if world <= 1 or not (dist.is_available() and dist.is_initialized()):
        return per_anchor.mean() if reduction == "mean" else per_anchor.sum()
    local_sum = per_anchor.sum()
    stats = torch.stack([local_sum.detach(), local_sum.new_tensor(float(per_anchor.shape[0]))])
    dist.all_reduce(stats)
    global_sum, count = stats[0], stats[1]
    if reduction == "mean":
        grad_part = local_sum * world / count
        value = global_sum / count
    else:
        grad_part = local_sum * world
        value = global_sum
    return grad_part + (value - grad_part).detach()


# ---------------------------------------------------------------------------------------------- base module
class ContrastiveLoss(nn.Module):
    """Base class of the built-in losses: ``forward(batch) -> Tensor`` (mean over anchors by default).

    Subclasses set the class attributes and implement :meth:`per_anchor` on a validated batch in the compute
    dtype. Unsupervised losses (empty ``label_kinds``) never see labels: they are stripped before
    :meth:`per_anchor` runs and :attr:`labels_ignored` records that a call carried them.
    """

    name: ClassVar[str] = ""
    """Registry name."""
    description: ClassVar[str] = ""
    """One-line description."""
    hyperparameters: ClassVar[tuple[HParam, ...]] = ()
    """Documented hyperparameters (name, default, range, meaning, source)."""
    label_kinds: ClassVar[frozenset[str]] = frozenset()
    """Observed labels the loss needs (``{"class"}``, ``{"pu"}``); empty: labels are ignored."""
    oracle: ClassVar[bool] = False
    """True for losses that treat observed labels as ground truth (the ``unbiased`` oracle)."""

    def __init__(self, reduction: str = "mean", **hparams: Any) -> None:
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ConfigError(
                f"loss '{self.name}': reduction={reduction!r} is invalid; valid: {', '.join(REDUCTIONS)}"
            )
        self.reduction = reduction
        """``mean`` (default, over all anchors of all ranks), ``sum``, or ``none`` (``[A]`` local losses)."""
        self.labels_ignored = False
        """Set to True once a call passed labels to a loss that must not read them (they were stripped)."""
        self.stats_sink: dict[str, Tensor] = {}
        """Statistics the current call's :meth:`per_anchor` records (emptied at the start of every call)."""
        self.last_stats: dict[str, Tensor] = {}
        """Detached 0-d tensors from the last call, e.g. ``clamped_frac`` (fraction of anchors at the floor or
        guard) for DCL/HCL/PUCL/DebiasedPos; tensors, so reading them is the caller's only host sync."""
        for key, value in bind_hparams(self.hyperparameters, hparams, f"loss '{self.name}'").items():
            setattr(self, key, value)

    def per_anchor(self, batch: ContrastiveBatch) -> Tensor:
        """``[A]`` loss of each anchor (the batch is validated, in compute dtype, labels policy applied)."""
        raise NotImplementedError

    def forward(self, batch: ContrastiveBatch) -> Tensor:
        """Loss of ``batch`` reduced over anchors (see :attr:`reduction`)."""
        batch = prepare_batch(batch, f"loss '{self.name}'")
        has_labels = batch.anchor_labels is not None or batch.neg_labels is not None
        if not self.label_kinds:
            if has_labels:
                self.labels_ignored = True
                batch = batch.without_labels()
        elif batch.anchor_labels is None or batch.neg_labels is None:
            raise IncompatibleError(
                f"loss '{self.name}' needs observed labels ({'/'.join(sorted(self.label_kinds))}); "
                "pass labels=... to the sampler"
            )
        self.stats_sink = {}
        with torch.autocast(device_type=batch.neg_logits.device.type, enabled=False):
            per = self.per_anchor(batch)
        self.last_stats = self.stats_sink
        return reduce_anchors(per, batch, self.reduction)

    def extra_repr(self) -> str:
        """Hyperparameters in ``repr``."""
        return ", ".join(f"{hp.name}={getattr(self, hp.name)!r}" for hp in self.hyperparameters)
