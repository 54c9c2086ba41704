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


def test_linear_and_knn_use_frozen_pre_head_features_in_eval_mode() -> None:
    """An independent reference: features of the encoder (not the projection head) under BatchNorm running
    statistics on unaugmented test-time inputs; the probe and kNN then see exactly those, and the encoder's
    training mode and statistics are left as they were."""
    bank, test = _dataset(64, 0), _dataset(20, 1)
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Flatten(), nn.Linear(64, 6), nn.BatchNorm1d(6))
    with torch.no_grad():  # non-trivial running statistics, so train-mode features would differ
        encoder[2].running_mean.uniform_(-1, 1)
        encoder[2].running_var.uniform_(0.5, 2)
    encoder.train()
    state = {k: v.clone() for k, v in encoder.state_dict().items()}
    spec = augment_spec_for("synthetic", 8, channels=1)
    cfg = EvalSection(linear_epochs=3, knn_k=5)
    got = evaluate.evaluate_encoder(encoder, bank, test, spec, cfg, torch.device("cpu"), linear=True, seed=2)

    assert encoder.training
    assert all(torch.equal(v, state[k]) for k, v in encoder.state_dict().items())
    w, b = encoder[1].weight.detach(), encoder[1].bias.detach()
    bn = encoder[2]

    def ref(images: torch.Tensor) -> torch.Tensor:
        x = (images.float() / 255 - spec.mean[0]) / spec.std[0]
        h = x.flatten(1) @ w.T + b
        return (h - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps) * bn.weight.detach() + bn.bias.detach()

    f_train, f_test = ref(bank.images), ref(test.images)
    knn = evaluate.knn_accuracy(f_train, bank.labels, f_test, test.labels, 4, 5, cfg.knn_temperature)
    probe = evaluate.linear_probe(f_train, bank.labels, f_test, test.labels, 4, epochs=3, lr=cfg.linear_lr,
                                  weight_decay=cfg.linear_weight_decay, seed=2)
    assert got["eval/knn_top1"] == pytest.approx(knn)
    assert got["eval/linear_top1"] == pytest.approx(probe.top1)
    assert got["eval/linear_train_top1"] == pytest.approx(probe.train_top1)
