"""Optimisers (Adam, SGD, LARS) and the warm-up + cosine learning-rate schedule of the ``simclr`` plugin."""

from __future__ import annotations

import math

import torch
from torch import nn

from contrastlab.plugins.simclr.config import TrainSection


class LARS(torch.optim.Optimizer):
    """Layer-wise adaptive rate scaling (You et al. 2017), as used by SimCLR for large batches.

    For every parameter tensor with ``ndim > 1``: ``g ← g + wd·w``, then the update is scaled by the trust ratio
    ``η·‖w‖/‖g‖`` (1 when either norm is 0); biases and norm parameters (``ndim ≤ 1``) skip weight decay and
    adaptation, as in SimCLR. Momentum is applied after scaling.
    """

    def __init__(self, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                 eta: float = 0.001) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay, "eta": eta})

    @torch.no_grad()
    def step(self, closure=None):
        """One LARS update."""
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if p.ndim > 1:
                    g = g.add(p, alpha=group["weight_decay"])
                    w_norm, g_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(g)
                    trust = torch.where((w_norm > 0) & (g_norm > 0), group["eta"] * w_norm / g_norm,
                                        torch.ones_like(w_norm))
                    g = g * trust
                buf = self.state[p].get("momentum_buffer")
                if buf is None:
                    buf = self.state[p]["momentum_buffer"] = g.clone()
                else:
                    buf.mul_(group["momentum"]).add_(g)
                p.add_(buf, alpha=-group["lr"])
        return loss


def make_optimizer(model: nn.Module, cfg: TrainSection) -> torch.optim.Optimizer:
    """The optimiser chosen by ``cfg.optimizer`` over ``model``'s trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return LARS(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def lr_factor(step: int, total: int, warmup: int, schedule: str) -> float:
    """Multiplier of the base learning rate at ``step``: linear warm-up, then constant or cosine to 0."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "cosine":
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return 1.0


def set_lr(optimizer: torch.optim.Optimizer, base_lr: float, factor: float) -> None:
    """Set every group's learning rate to ``base_lr × factor``."""
    for group in optimizer.param_groups:
        group["lr"] = base_lr * factor
