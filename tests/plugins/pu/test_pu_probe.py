"""Binary metrics of the PU classifier and the linear head."""

from __future__ import annotations

import pytest
import torch

from contrastlab.plugins.pu.probe import Standardize, binary_metrics, linear_head, roc_auc


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
