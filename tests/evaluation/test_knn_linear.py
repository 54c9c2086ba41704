"""kNN monitor, linear probe and feature extraction on separable synthetic data."""

from __future__ import annotations

import torch
from torch import nn

from contrastlab.evaluation import extract_features, knn_accuracy, knn_predict, linear_probe


def _blobs(n_per=60, classes=4, dim=16, spread=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, dim, generator=g) * 3
    y = torch.arange(classes).repeat_interleave(n_per)
    x = centers[y] + spread * torch.randn(len(y), dim, generator=g)
    return x, y


def test_knn_on_separable_clusters():
    xtr, ytr = _blobs(seed=0)
    xte, yte = _blobs(seed=0, n_per=20)
    xte = xte + 0.05 * torch.randn_like(xte)
    assert knn_accuracy(xtr, ytr, xte, yte, 4, k=200, temperature=0.1) > 0.95
    scores = knn_predict(xtr, ytr, xte, 4, k=5)
    assert scores.shape == (80, 4) and (scores >= 0).all()


def test_knn_small_temperature_does_not_overflow():
    """e^{s/t} overflows float32 for t below ≈ 0.0113; the vote must still pick the right class."""
    xtr, ytr = _blobs(seed=0)
    xte, yte = _blobs(seed=0, n_per=20)
    xte = xte + 0.05 * torch.randn_like(xte)
    for t in (0.1, 0.005, 1e-4):
        scores = knn_predict(xtr, ytr, xte, 4, k=50, temperature=t)
        assert torch.isfinite(scores).all() and knn_accuracy(xtr, ytr, xte, yte, 4, k=50, temperature=t) > 0.95


def test_knn_ignores_unlabeled_and_handles_small_bank():
    xtr, ytr = _blobs(n_per=3)
    ytr[:3] = -1
    acc = knn_accuracy(xtr, ytr, xtr[3:], ytr[3:], 4, k=200)
    assert acc > 0.9


def test_knn_random_labels_near_chance():
    xtr, _ = _blobs(n_per=100)
    y = torch.randint(0, 4, (400,), generator=torch.Generator().manual_seed(1))
    xte, _ = _blobs(n_per=100, seed=3)
    yte = torch.randint(0, 4, (400,), generator=torch.Generator().manual_seed(2))
    assert knn_accuracy(xtr, y, xte, yte, 4) < 0.4


def test_linear_probe_separable_and_deterministic():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1200, 8, generator=g)
    w = torch.randn(8, 3, generator=g)
    top2 = (x @ w).topk(2, dim=1)
    keep = (top2.values[:, 0] - top2.values[:, 1]) > 1.0     # linearly separable with a margin
    x, y = x[keep][:400], top2.indices[keep, 0][:400]
    r1 = linear_probe(x[:300], y[:300], x[300:], y[300:], 3, epochs=60, lr=1e-2)
    r2 = linear_probe(x[:300], y[:300], x[300:], y[300:], 3, epochs=60, lr=1e-2)
    assert r1.top1 > 0.9 and r1 == r2 and r1.top5 == 1.0 and r1.train_top1 > 0.9


def test_extract_features_restores_mode_and_preprocesses():
    net = nn.Sequential(nn.Flatten(), nn.Linear(12, 5), nn.BatchNorm1d(5))
    net.train()
    imgs = torch.randint(0, 256, (10, 3, 2, 2), dtype=torch.uint8)
    feats = extract_features(net, imgs, lambda x: x.float() / 255, batch_size=4)
    assert feats.shape == (10, 5) and net.training
    with torch.no_grad():
        net.eval()
        ref = net(imgs.float() / 255)
    assert torch.allclose(feats, ref, atol=1e-6)
