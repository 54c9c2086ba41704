"""kNN monitor and linear evaluation of the frozen encoder (the projection head is discarded)."""

from __future__ import annotations

import torch
from torch import nn

from contrastlab.data.augment import AugmentSpec, prepare
from contrastlab.data.datasets import ImageDataset
from contrastlab.evaluation import extract_features, knn_accuracy, linear_probe
from contrastlab.plugins.simclr.config import EvalSection


def evaluate_encoder(encoder: nn.Module, bank: ImageDataset, test: ImageDataset, spec: AugmentSpec,
                     cfg: EvalSection, device: torch.device, linear: bool, seed: int = 0,
                     autocast: bool = False) -> dict[str, float]:
    """``eval/knn_top1`` (and with ``linear`` ``eval/linear_top1``/``top5``) as fractions in [0, 1].

    ``bank`` is the linear probe's training set (labels < 0 are ignored) and, or its ``cfg.knn_bank_subset``
    random subset, the kNN memory bank; ``test`` is scored. Features come from ``encoder`` in eval mode on
    unaugmented, normalised images.
    """
    keep = bank.subset_indices(cfg.knn_bank_subset, seed=seed)  # the kNN bank (None: all of it)

    def pre(x: torch.Tensor) -> torch.Tensor:
        return prepare(x, spec)

    images = bank.images if linear or keep is None else bank.images[keep]
    ftr = extract_features(encoder, images, pre, cfg.batch_size, device, autocast)
    fte = extract_features(encoder, test.images, pre, cfg.batch_size, device, autocast)
    knn_bank = ftr[keep.to(ftr.device)] if linear and keep is not None else ftr
    knn_labels = bank.labels if keep is None else bank.labels[keep]
    metrics = {"eval/knn_top1": knn_accuracy(knn_bank, knn_labels, fte, test.labels, bank.num_classes, cfg.knn_k,
                                             cfg.knn_temperature)}
    if linear:
        probe_device = device if device.type == "cuda" else torch.device("cpu")
        result = linear_probe(ftr, bank.labels, fte, test.labels, bank.num_classes, epochs=cfg.linear_epochs,
                              lr=cfg.linear_lr, weight_decay=cfg.linear_weight_decay, seed=seed,
                              device=probe_device)
        metrics.update({"eval/linear_top1": result.top1, "eval/linear_top5": result.top5,
                        "eval/linear_train_top1": result.train_top1})
    return metrics
