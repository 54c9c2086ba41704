"""Autograd-aware all-gather for samplers under ``torch.distributed`` (torchrun, DDP).

Convention (the same as SimCLR/solo-learn/lightly's ``GatherLayer``): the forward stacks every rank's tensor;
the backward **sums** the incoming gradients over ranks (``all_reduce``) and returns this rank's slice. Each
rank computes the loss of its *local* anchors against the *global* candidates; the losses' reduction
(:func:`contrastlab.losses.base.reduce_anchors`) scales the local sum by ``world_size / global anchors``. The
gradient that reaches rank ``r``'s embeddings is then ``world_size × ∂L/∂z_r`` of the single-process loss on the
concatenated batch, so DDP's gradient *averaging* gives exactly the single-process parameter gradient, and the
reported loss value equals the single-process value on every rank.

Every rank must call the sampler with the same local batch size (the collective requires equal shapes).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from contrastlab.platform.errors import ConfigError


def world() -> tuple[int, int]:
    """``(rank, world_size)``; ``(0, 1)`` when ``torch.distributed`` is not initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class _GatherWithGrad(torch.autograd.Function):
    """``[*S] → [W, *S]``; backward: all-reduce (sum) the gradient, keep this rank's slice."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.stack(parts)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        return grad[dist.get_rank()]


def _check_same_shape(x: Tensor, what: str) -> None:
    shape = torch.tensor(list(x.shape), dtype=torch.long, device=x.device)
    shapes = [torch.empty_like(shape) for _ in range(dist.get_world_size())]
    dist.all_gather(shapes, shape)
    if any(not torch.equal(s, shape) for s in shapes):
        found = sorted({tuple(s.tolist()) for s in shapes})
        raise ConfigError(f"distributed sampler: every rank must pass {what} of the same shape; got {found}")


def gather_with_grad(x: Tensor, what: str = "embeddings") -> Tensor:
    """All ranks' ``x`` stacked along a new dim 0 (``[W, *x.shape]``), differentiable (see module doc).

    Without an initialised process group this is ``x[None]``.
    """
    _, size = world()
    if size == 1:
        return x[None]
    _check_same_shape(x, what)
    if x.requires_grad:
        return _GatherWithGrad.apply(x)
    parts = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(parts, x.contiguous())
    return torch.stack(parts)


def gather_labels(labels: Tensor | None, like: Tensor) -> Tensor | None:
    """All ranks' labels stacked (``[W, B]``), or ``None``; every rank must pass labels or none.

    ``like`` is this rank's embedding tensor (for the device). A rank without labels sends ``-2`` so that a
    mismatch is detected and reported instead of hanging.
    """
    _, size = world()
    if size == 1:
        return None if labels is None else labels[None]
    B = like.shape[-2]
    send = labels if labels is not None else torch.full((B,), -2, dtype=torch.long, device=like.device)
    parts = [torch.empty_like(send) for _ in range(size)]
    dist.all_gather(parts, send.contiguous())
    out = torch.stack(parts)
    missing = [(p == -2).all().item() for p in parts]
    if any(missing) and not all(missing):
        raise ConfigError("distributed sampler: labels were passed on some ranks but not on others")
    return None if all(missing) else out
