"""kNN monitor, linear probe and feature extraction on separable synthetic data."""

from __future__ import annotations

import pytest
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


def _reference_knn_scores(train, labels, test, num_classes, k, t):
    """Wu et al. (2018): the k labelled training points most cosine-similar to a query vote e^{s/t} for their class."""
    keep = labels >= 0
    bank, bank_labels = train[keep].double(), labels[keep]
    scores = torch.zeros(test.shape[0], num_classes, dtype=torch.float64)
    for q, query in enumerate(test.double()):
        sims = [float(query @ b / (query.norm() * b.norm())) for b in bank]
        for i in sorted(range(len(sims)), key=lambda j: -sims[j])[:k]:
            scores[q, bank_labels[i]] += torch.exp(torch.tensor(sims[i] / t, dtype=torch.float64))
    return scores


def _random_bank(seed=0, n=300, queries=40, dim=64, classes=3):
    g = torch.Generator().manual_seed(seed)
    xtr, xte = torch.randn(n, dim, generator=g), torch.randn(queries, dim, generator=g)
    ytr, yte = torch.randint(0, classes, (n,), generator=g), torch.randint(0, classes, (queries,), generator=g)
    ytr[::7] = -1                                                  # unlabeled bank entries take no part
    return xtr, ytr, xte, yte


@pytest.mark.parametrize(("k", "t", "chunk"), [(5, 0.1, 1024), (50, 0.5, 7), (400, 0.05, 3)])
def test_knn_scores_are_the_weighted_vote_of_the_k_nearest(k, t, chunk):
    """Each query's class scores are proportional (the documented per-query scaling) to the e^{s/t} votes of its
    k nearest labelled neighbours; chunking the queries changes nothing."""
    xtr, ytr, xte, _ = _random_bank(dim=4)                         # dim < queries: chunks follow the queries
    got = knn_predict(xtr, ytr, xte, 3, k=k, temperature=t, chunk=chunk).double()
    ref = _reference_knn_scores(xtr, ytr, xte, 3, k, t)
    assert got.shape == ref.shape
    torch.testing.assert_close(got / got.sum(1, keepdim=True), ref / ref.sum(1, keepdim=True), rtol=1e-5, atol=1e-6)
    assert got.amax(1).ge(1.0 - 1e-6).all()                        # the nearest neighbour's own vote is e^0 = 1


def test_knn_defaults_are_k200_and_t01():
    """The DCL/HCL monitor's k = 200, t = 0.1 (docs/simclr.md), for scores and top-1 accuracy alike."""
    xtr, ytr, xte, yte = _random_bank(n=300, queries=300)
    ref = _reference_knn_scores(xtr, ytr, xte, 3, 200, 0.1)
    got = knn_predict(xtr, ytr, xte, 3).double()
    torch.testing.assert_close(got / got.sum(1, keepdim=True), ref / ref.sum(1, keepdim=True), rtol=1e-5, atol=1e-6)
    assert knn_accuracy(xtr, ytr, xte, yte, 3) == pytest.approx(float((ref.argmax(1) == yte).double().mean()))


def _topk_reference(logits, labels, k):
    """Top-k accuracy: the label is among the k largest logits of its row."""
    hits = [int(y) in logits[i].argsort(descending=True)[:k].tolist() for i, y in enumerate(labels)]
    return sum(hits) / len(hits)


@pytest.mark.parametrize("k", [1, 3, 5, 10, 12])
def test_topk_accuracy_matches_its_definition(k):
    from contrastlab.evaluation.linear import _topk

    g = torch.Generator().manual_seed(k)
    logits, labels = torch.randn(50, 10, generator=g), torch.randint(0, 10, (50,), generator=g)
    assert _topk(logits, labels, k) == pytest.approx(_topk_reference(logits, labels, k))


def test_linear_probe_runs_the_documented_protocol(monkeypatch):
    """Defaults (module docstring): Adam with lr 1e-3 and weight decay 1e-6, 100 epochs of mini-batches of 256 that
    cover every labelled training row once per epoch, features standardised with the training statistics; the
    result is the top-1/top-5 accuracy of the trained probe's logits on the test rows and top-1 on the training rows."""
    import contrastlab.evaluation.linear as linear_mod

    optimisers, inputs, topk_calls = [], [], []

    class RecordingAdam(torch.optim.Adam):
        def __init__(self, params, **kwargs):
            optimisers.append(kwargs)
            super().__init__(params, **kwargs)

    class RecordingLinear(nn.Linear):
        def forward(self, x):
            inputs.append(x.detach().clone())
            return super().forward(x)

    topk = linear_mod._topk

    def recording_topk(logits, labels, k):
        topk_calls.append((logits.clone(), labels.clone(), k))
        return topk(logits, labels, k)

    monkeypatch.setattr(torch.optim, "Adam", RecordingAdam)
    monkeypatch.setattr(nn, "Linear", RecordingLinear)
    monkeypatch.setattr(linear_mod, "_topk", recording_topk)
    g = torch.Generator().manual_seed(0)
    scale = torch.tensor([1.0, 10.0, 0.1, 100.0, 3.0, 0.5])
    xtr, xte = torch.randn(270, 6, generator=g) * scale + 5, torch.randn(90, 6, generator=g) * scale + 5
    ytr, yte = torch.randint(0, 10, (270,), generator=g), torch.randint(0, 10, (90,), generator=g)
    ytr[:13] = -1                                                 # 257 labelled rows: one full batch and one of 1
    result = linear_mod.linear_probe(xtr, ytr, xte, yte, 10)

    assert optimisers == [{"lr": 1e-3, "weight_decay": 1e-6}]
    labelled = xtr[13:]
    mean, std = labelled.mean(0), labelled.std(0)
    train_std, test_std = (labelled - mean) / std, (xte - mean) / std
    assert len(inputs) == 100 * 2 + 2 and [len(x) for x in inputs[:2]] == [256, 1]

    def rows(x):
        return x[x[:, 0].argsort()]

    for epoch in range(100):
        torch.testing.assert_close(rows(torch.cat(inputs[2 * epoch:2 * epoch + 2])), rows(train_std))
    torch.testing.assert_close(inputs[-2], test_std)
    torch.testing.assert_close(inputs[-1], train_std)
    assert [(len(labels), k) for _, labels, k in topk_calls] == [(90, 1), (90, 5), (257, 1)]
    assert torch.equal(topk_calls[0][1], yte) and torch.equal(topk_calls[2][1], ytr[13:])
    expected = [_topk_reference(logits, labels, k) for logits, labels, k in topk_calls]
    assert (result.top1, result.top5, result.train_top1) == pytest.approx(expected)


def test_extract_features_autocast_is_for_cuda_only_and_no_images_give_no_rows():
    """``autocast`` asks for bf16 on CUDA only: on the CPU the float32 features are exact. No images, no rows."""
    net = nn.Sequential(nn.Flatten(), nn.Linear(12, 5))
    imgs = torch.randn(7, 3, 2, 2)
    with torch.no_grad():
        ref = net(imgs)
    feats = extract_features(net, imgs, batch_size=3, device="cpu", autocast=True)
    assert feats.dtype == torch.float32
    torch.testing.assert_close(feats, ref, rtol=1e-6, atol=1e-6)   # bf16 would be off by ~1e-2
    assert len(extract_features(net, imgs[:0])) == 0


@pytest.mark.parametrize("readout", ["knn", "linear"])
def test_a_bank_without_a_labelled_feature_is_refused(readout):
    """With every bank label < 0 there is nothing to vote or fit: the kNN scores were all zero (every query read as
    class 0) and the accuracy a meaningless number; both readouts refuse it instead."""
    from contrastlab.evaluation.linear import linear_probe

    xtr, _, xte, yte = _random_bank(n=20, queries=5, dim=4)
    unlabelled = torch.full((20,), -1)
    with pytest.raises(ValueError, match="no labelled"):
        if readout == "knn":
            knn_accuracy(xtr, unlabelled, xte, yte, 3)
        else:
            linear_probe(xtr, unlabelled, xte, yte, 3, epochs=1)
