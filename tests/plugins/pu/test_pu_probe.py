"""The PU classifier: binary metrics, the linear head, its training step and scoring."""

from __future__ import annotations

import math

import pytest
import torch

from contrastlab.plugins.pu.probe import (
    PUData,
    Standardize,
    binary_metrics,
    classifier_step,
    linear_head,
    predict_scores,
    roc_auc,
)
from contrastlab.plugins.pu.risks import PURisk


def _auc_bruteforce(s: torch.Tensor, y: torch.Tensor) -> float:
    pos, neg = s[y == 1], s[y == 0]
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).double() + 0.5 * (diff == 0).double()).mean())


def test_roc_auc_matches_pairwise_definition_with_ties() -> None:
    gen = torch.Generator().manual_seed(0)
    s = torch.randint(0, 6, (300,), generator=gen).float()  # many ties
    y = (torch.rand(300, generator=gen) < 0.4).long()
    assert roc_auc(s, y) == pytest.approx(_auc_bruteforce(s, y), abs=1e-12)
    assert roc_auc(torch.tensor([0.1, 0.9]), torch.tensor([0, 1])) == 1.0
    assert roc_auc(torch.tensor([0.9, 0.1]), torch.tensor([0, 1])) == 0.0


def test_binary_metrics_on_known_counts() -> None:
    scores = torch.tensor([2.0, 1.0, -1.0, 0.5, -2.0, -0.5])
    y = torch.tensor([1, 1, 1, 0, 0, 0])  # tp=2, fn=1, fp=1, tn=2
    m = binary_metrics(scores, y)
    assert m["accuracy"] == pytest.approx(4 / 6)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3)
    assert m["auc"] == pytest.approx(7 / 9)  # pairs: 3 + 3 + 1 of 9


def test_linear_head_standardizes_and_scores() -> None:
    x = torch.randn(50, 3) * 5 + 2
    head = linear_head(3)
    assert isinstance(head[0], Standardize)
    head[0].fit(x)
    z = head[0](x)
    assert torch.allclose(z.mean(0), torch.zeros(3), atol=1e-5)
    assert torch.allclose(z.std(0), torch.ones(3), atol=1e-5)
    assert head(x).shape == (50,)


def test_metrics_without_predicted_or_true_positives_read_zero_and_auc_needs_both_classes() -> None:
    """A score of exactly 0 is a negative prediction (``g(x) > 0`` = positive); with no positive prediction
    precision, recall and F1 are 0 (not 1 or a division by zero); AUC is undefined (nan) with one class only."""
    y = torch.tensor([1, 1, 0, 0])
    m = binary_metrics(torch.tensor([0.0, -1.0, -2.0, 0.0]), y)  # AUC: pairs 1 + 1/2 + 1 + 0 of 4
    assert m == pytest.approx({"accuracy": 0.5, "f1": 0.0, "precision": 0.0, "recall": 0.0, "auc": 0.625})
    no_positive = binary_metrics(torch.tensor([1.0, -1.0]), torch.tensor([0, 0]))
    assert no_positive["recall"] == 0.0 and no_positive["f1"] == 0.0 and no_positive["precision"] == 0.0
    assert math.isnan(no_positive["auc"])
    assert math.isnan(roc_auc(torch.tensor([0.3, 0.1]), torch.tensor([1, 1])))
    # tp = fp = fn = 1: every ratio is 1/2
    even = binary_metrics(torch.tensor([1.0, 1.0, -1.0, -1.0]), torch.tensor([1, 0, 1, 0]))
    assert even == pytest.approx({"accuracy": 0.5, "f1": 0.5, "precision": 0.5, "recall": 0.5, "auc": 0.5})


def test_classifier_step_is_one_sgd_step_on_the_risk_of_both_batches() -> None:
    """One labeled input x_P and one unlabeled input x_U, so every draw is known: the step is θ − η ∇R(g(x_P),
    g(x_U)) with the uPU risk written out, on the preprocessed inputs."""
    inputs = torch.tensor([[1.0, 2.0], [-1.0, 0.5]])
    head = linear_head(2, standardize=False)
    with torch.no_grad():
        head[1].weight.copy_(torch.tensor([[0.3, -0.2]]))
        head[1].bias.fill_(0.1)
    w, b = head[1].weight.detach().clone().requires_grad_(), head[1].bias.detach().clone().requires_grad_()
    data = PUData(inputs, torch.tensor([0]), torch.tensor([1]), preprocess=lambda x: 2 * x)
    out = classifier_step(head, torch.optim.SGD(head.parameters(), lr=0.5), PURisk("upu", prior=0.3), data, 3, 5)
    z_p, z_u = (2 * inputs[0]) @ w[0] + b, (2 * inputs[1]) @ w[0] + b
    risk = 0.3 / (1 + torch.exp(z_p)) + 1 / (1 + torch.exp(-z_u)) - 0.3 / (1 + torch.exp(-z_p))
    assert float(out.value) == pytest.approx(float(risk.detach()), rel=1e-5)
    g_w, g_b = torch.autograd.grad(risk.sum(), [w, b])
    assert torch.allclose(head[1].weight, w - 0.5 * g_w, atol=1e-6)
    assert torch.allclose(head[1].bias, b - 0.5 * g_b, atol=1e-6)


def test_predict_scores_in_batches_in_eval_mode() -> None:
    """Scores of every input, in order, through the preprocessing, whatever the batch size; dropout is off while
    scoring and the model's training mode is restored; no input gives no score."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 1),
                                torch.nn.Flatten(0))
    x = torch.randn(7, 3)
    model.eval()
    want = model(x / 10)
    model.train()
    for batch in (1, 3, 7, 50):
        got = predict_scores(model, x, lambda t: t / 10, batch, torch.device("cpu"))
        assert torch.allclose(got, want) and model.training
    assert predict_scores(model, x[:0], None, 4, torch.device("cpu")).shape == (0,)
