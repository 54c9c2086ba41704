"""Linear evaluation: a linear classifier trained on frozen representations (SimCLR §4 / DCL protocol).

DCL/HCL/BCL train ``Linear(d, C)`` with Adam (lr 1e-3, weight decay 1e-6) for 100 epochs on top of the
frozen encoder. Here the features are extracted once (no augmentation, which makes the probe cheap) and
standardised with the training statistics; the probe then runs mini-batch Adam with cross-entropy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class LinearProbeResult:
    """Accuracies of a linear probe (fractions in ``[0, 1]``)."""

    top1: float
    """Top-1 accuracy on the test features."""
    top5: float
    """Top-5 accuracy on the test features (1.0 when there are ≤ 5 classes)."""
    train_top1: float
    """Top-1 accuracy on the training features (for diagnosing under/over-fitting)."""


def _topk(logits: Tensor, labels: Tensor, k: int) -> float:
    k = min(k, logits.shape[1])
    hit = (logits.topk(k, dim=1).indices == labels[:, None]).any(1)
    return float(hit.float().mean())


def linear_probe(
    train_feats: Tensor,
    train_labels: Tensor,
    test_feats: Tensor,
    test_labels: Tensor,
    num_classes: int,
    epochs: int = 100,
    lr: float = 1e-3,
    weight_decay: float = 1e-6,
    batch_size: int = 256,
    standardize: bool = True,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> LinearProbeResult:
    """Train ``Linear(d, num_classes)`` on ``train_feats`` ``[N, d]`` and report accuracies on ``test_feats``.

    Samples with label ``< 0`` (unlabeled) are dropped from training (none left: ``ValueError``). Deterministic
    for a given ``seed``.
    """
    device = torch.device(device)
    keep = train_labels >= 0
    if not bool(keep.any()):
        raise ValueError("the linear probe has no labelled training feature (every label < 0)")
    xtr, ytr = train_feats[keep].float().to(device), train_labels[keep].long().to(device)
    xte, yte = test_feats.float().to(device), test_labels.long().to(device)
    if standardize:
        mean, std = xtr.mean(0, keepdim=True), xtr.std(0, keepdim=True).clamp_min(1e-6)
        xtr, xte = (xtr - mean) / std, (xte - mean) / std
    g = torch.Generator().manual_seed(seed)
    probe = nn.Linear(xtr.shape[1], num_classes).to(device)
    with torch.no_grad():
        bound = 1 / xtr.shape[1] ** 0.5
        probe.weight.copy_(torch.empty_like(probe.weight, device="cpu").uniform_(-bound, bound, generator=g))
        probe.bias.zero_()
    opt = torch.optim.Adam(probe.parameters(), lr=lr, weight_decay=weight_decay)
    n = xtr.shape[0]
    for _ in range(epochs):
        perm = torch.randperm(n, generator=g).to(device)
        for start in range(0, n, batch_size):
            idx = perm[start:start + batch_size]
            loss = F.cross_entropy(probe(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    with torch.no_grad():
        test_logits, train_logits = probe(xte), probe(xtr)
    return LinearProbeResult(_topk(test_logits, yte, 1), _topk(test_logits, yte, 5), _topk(train_logits, ytr, 1))
