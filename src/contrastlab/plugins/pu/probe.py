"""The PU classifier: a linear head trained with a PU risk, its training step, scoring and binary metrics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from contrastlab.plugins.pu.risks import PURisk, RiskOutput

Preprocess = Callable[[Tensor], Tensor]


class Standardize(nn.Module):
    """``(x − mean) / std`` with fixed statistics (buffers, saved in checkpoints). ``[B, d] → [B, d]``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    def fit(self, x: Tensor) -> Standardize:
        """Set the statistics from ``x`` ``[n, dim]``."""
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0).clamp_min(1e-6))
        return self

    def forward(self, x: Tensor) -> Tensor:
        """Standardised ``x``."""
        return (x - self.mean) / self.std


def linear_head(dim: int, standardize: bool = True) -> nn.Sequential:
    """``[B, dim] → [B]`` score head: (optional) standardisation, then ``Linear(dim, 1)``; ``g(x) > 0`` = positive."""
    return nn.Sequential(Standardize(dim) if standardize else nn.Identity(), nn.Linear(dim, 1), nn.Flatten(0))


@dataclass
class PUData:
    """What a PU classifier step samples from."""

    inputs: Tensor
    """``[n, ...]`` training inputs: frozen features (float) or images (uint8), on the training device."""
    labeled_idx: Tensor
    """Long indices of the labeled positives (on the same device)."""
    unlabeled_idx: Tensor
    """Long indices of the unlabeled sample of the risk (on the same device)."""
    preprocess: Preprocess | None = None
    """Maps a batch of ``inputs`` to the model's input (e.g. uint8 images → normalised floats)."""


def classifier_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    risk: PURisk,
    data: PUData,
    batch_labeled: int,
    batch_unlabeled: int,
) -> RiskOutput:
    """One optimizer step of ``model`` on the PU risk of a labeled-positive batch and an unlabeled batch.

    Both batches are drawn uniformly with replacement (global torch RNG, so runs are reproducible) and go
    through the model in one forward pass (shared BatchNorm statistics, as with a mixed P/U minibatch).
    """
    dev = data.inputs.device
    ip = data.labeled_idx[torch.randint(data.labeled_idx.numel(), (batch_labeled,), device=dev)]
    iu = data.unlabeled_idx[torch.randint(data.unlabeled_idx.numel(), (batch_unlabeled,), device=dev)]
    x = data.inputs[torch.cat([ip, iu])]
    if data.preprocess is not None:
        x = data.preprocess(x)
    scores = model(x)  # [batch_labeled + batch_unlabeled]
    out = risk(scores[:batch_labeled], scores[batch_labeled:])
    optimizer.zero_grad(set_to_none=True)
    out.objective.backward()
    optimizer.step()
    return out


@torch.no_grad()
def predict_scores(
    model: nn.Module, inputs: Tensor, preprocess: Preprocess | None, batch_size: int, device: torch.device
) -> Tensor:
    """Scores ``g(x)`` ``[n]`` (float32, CPU) of ``inputs`` in eval mode (training mode restored afterwards)."""
    was_training = model.training
    model.eval()
    out = []
    try:
        for start in range(0, inputs.shape[0], batch_size):
            x = inputs[start : start + batch_size].to(device)
            if preprocess is not None:
                x = preprocess(x)
            out.append(model(x).float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(out) if out else torch.zeros(0)


def roc_auc(scores: Tensor, y: Tensor) -> float:
    """ROC-AUC as the Mann–Whitney statistic with average ranks for ties; ``nan`` if one class is absent."""
    s, t = scores.double().reshape(-1), y.reshape(-1).bool()
    n_pos, n_neg = int(t.sum()), int((~t).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = torch.argsort(s)
    sorted_s = s[order]
    ranks = torch.empty_like(s)
    # average ranks within runs of equal scores
    _, inverse, counts = torch.unique_consecutive(sorted_s, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).to(s.dtype)
    avg = ends - (counts.to(s.dtype) - 1) / 2  # mean rank of each tie group
    ranks[order] = avg[inverse]
    u = ranks[t].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def binary_metrics(scores: Tensor, y: Tensor) -> dict[str, float]:
    """Accuracy, F1 (positive class), precision, recall and ROC-AUC of ``scores > 0`` against ``y`` ∈ {0, 1}."""
    pred = scores.reshape(-1) > 0
    t = y.reshape(-1).bool()
    tp = int((pred & t).sum())
    fp = int((pred & ~t).sum())
    fn = int((~pred & t).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "accuracy": float((pred == t).float().mean()),
        "f1": f1,
        "precision": precision,
        "recall": recall,
        "auc": roc_auc(scores, y),
    }
