"""Contrastive pre-training on a PU training set (puNCE §3: SimCLR-style two views, any registered loss).

PU-aware losses (those with non-empty ``label_kinds``: ``punce``, ``supcon``, ``unbiased``) receive the observed
labels of the batch, 1 for a labeled positive and −1 for unlabeled; every other loss never sees a label
(DESIGN.md's label-leak guard), and the run records which happened in ``labels_used``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

import contrastlab as cl
from contrastlab.data.augment import SimCLRAugment
from contrastlab.losses.floors import ClampMeter
from contrastlab.platform.run import Run
from contrastlab.pretraining import contrastive_step


def pretrain_loop(
    *,
    run: Run,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: nn.Module,
    sampler: nn.Module,
    input_kind: str = "two_views",
    augment: SimCLRAugment,
    images: Tensor,
    observed: Tensor,
    label_aware: bool,
    steps: int,
    batch_size: int,
    start_step: int,
    log_every: int,
    save: Callable[[int, dict[str, Any]], None],
    log_window: Mapping[str, Any] | None = None,
    share: float = 1.0,
) -> None:
    """Run pre-training steps ``start_step+1 .. steps`` (steps are also the logging axis).

    Args:
        model: encoder + projection head, ``forward(x) -> (h, z)``.
        input_kind: how ``sampler`` is called (its contract): ``two_views`` ``(z1, z2)`` or ``multi_views``
            ``(z [2, B, d])``.
        images: ``uint8 [n, C, H, W]`` training images on the training device.
        observed: ``[n]`` long observed labels (1 / −1) on the same device; only used when ``label_aware``.
        save: ``save(step, log_window)`` writes a checkpoint with ``log_window``, the state of the statistics
            not logged yet (called when due and at the last step).
        log_window: that state from the checkpoint resumed from (``None``: nothing pending).
        share: the part of the whole run these steps are (their progress bar's part of ``run.json``'s ``progress``).
    """
    if start_step >= steps:
        return
    n = images.shape[0]
    bsz = min(batch_size, n)
    model.train()
    clamp = ClampMeter()  # fraction of anchors at a debiased loss's floor, logged as train/clamped_frac
    clamp.load_state_dict(log_window, images.device)
    with run.progress(steps, description="pretrain", initial=start_step, part=(0.0, share)) as bar:
        for step in range(start_step + 1, steps + 1):
            # [B] distinct images, as in SimCLR: a duplicate's views would be each other's negatives
            idx = torch.randperm(n, device=images.device)[:bsz]
            x = images[idx]
            views = torch.stack([augment(x), augment(x)])  # [2, B, C, H, W], two independent views
            loss = contrastive_step(lambda v: model(v)[1], views, sampler, input_kind, loss_fn, optimizer,
                                    labels=observed[idx] if label_aware else None, clamp=clamp)
            value = float(loss)
            if step % log_every == 0 or step == steps:
                metrics = {"pretrain/loss": value, **clamp.pop()}
                if label_aware:
                    metrics["pretrain/labeled_per_batch"] = float((observed[idx] == 1).sum())
                run.log(metrics, step)
            if run.checkpoint_due(step) or step == steps:
                save(step, clamp.state_dict())
            bar.update(1, loss=f"{value:.3f}")


def is_label_aware(loss_name: str) -> bool:
    """Whether the loss reads observed labels (non-empty ``label_kinds``)."""
    return bool(cl.loss_label_kinds(loss_name))
