"""simclr evaluation: the kNN bank subset shrinks only the kNN bank, never the linear probe's training set."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from contrastlab.data.augment import augment_spec_for
from contrastlab.data.base import ImageDataset
from contrastlab.plugins.simclr import evaluate
from contrastlab.plugins.simclr.config import EvalSection


def _dataset(n: int, seed: int) -> ImageDataset:
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 1, 8, 8), dtype=torch.uint8, generator=g)
    return ImageDataset(images, torch.arange(n) % 4, 4, ["a", "b", "c", "d"])


@pytest.mark.parametrize("linear", [True, False])
def test_knn_bank_subset_leaves_the_linear_probe_all_training_images(monkeypatch, linear: bool) -> None:
    bank, test = _dataset(64, 0), _dataset(20, 1)
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def fake_knn(ftr, labels, fte, test_labels, *args):
        seen["knn"] = (ftr, labels)
        return 0.5

    class Result:
        top1 = top5 = train_top1 = 0.5

    def fake_probe(ftr, labels, *args, **kwargs):
        seen["linear"] = (ftr, labels)
        return Result()

    monkeypatch.setattr(evaluate, "knn_accuracy", fake_knn)
    monkeypatch.setattr(evaluate, "linear_probe", fake_probe)
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Flatten(), nn.Linear(64, 5))
    cfg = EvalSection(knn_bank_subset=16, linear_epochs=1)
    spec = augment_spec_for("synthetic", 8, channels=1)
    evaluate.evaluate_encoder(encoder, bank, test, spec, cfg, torch.device("cpu"), linear=linear, seed=3)

    keep = bank.subset_indices(16, seed=3)
    assert keep is not None and len(keep) == 16
    knn_features, knn_labels = seen["knn"]
    with torch.no_grad():
        expected = encoder(evaluate.prepare(bank.images[keep], spec))
    torch.testing.assert_close(knn_features, expected)  # exactly the subset's rows, in the same order
    assert torch.equal(knn_labels, bank.labels[keep])
    if linear:
        probe_features, probe_labels = seen["linear"]
        assert probe_features.shape[0] == 64 and torch.equal(probe_labels, bank.labels)
    else:
        assert "linear" not in seen
