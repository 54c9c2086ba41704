"""``reduce_anchors`` across ranks (losses/base.py, "Distributed"), against a scripted two-rank ``all_reduce``.

On every rank the value is the global mean (or sum) over all ranks' anchors, and the gradient is ``world`` times
the single-process one on this rank's anchors, so DDP's averaging over ranks gives exactly the single-process
gradient of the global loss. The gloo test (tests/samplers/test_distributed.py) checks the mean on real
processes; this one checks both reductions, and that a batch from a sampler that did not gather stays local.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from contrastlab.losses import base
from contrastlab.losses.batch import ContrastiveBatch

OTHER_RANK = torch.tensor([0.7, -1.3, 2.2], dtype=torch.float64)  # the other rank's per-anchor losses


@pytest.fixture
def two_ranks(monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    """``base.dist`` as rank 0 of 2; ``all_reduce`` adds the other rank's ``[sum, count]``; returns its calls."""
    calls: list[torch.Tensor] = []

    def all_reduce(stats: torch.Tensor) -> None:
        calls.append(stats.clone())
        stats += torch.stack([OTHER_RANK.sum(), stats.new_tensor(float(OTHER_RANK.numel()))]).to(stats.dtype)

    monkeypatch.setattr(base, "dist", SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                                      all_reduce=all_reduce))
    return calls


def _batch(meta: dict) -> ContrastiveBatch:
    logits = torch.zeros(4, 1, dtype=torch.float64)
    return ContrastiveBatch(pos_logits=logits, neg_logits=torch.zeros(4, 2, dtype=torch.float64), meta=meta)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_gathered_batch_gives_the_global_value_and_world_times_the_local_gradient(two_ranks, reduction):
    local = torch.tensor([0.1, 0.4, -0.2, 1.5], dtype=torch.float64, requires_grad=True)
    value = base.reduce_anchors(local, _batch({"world_size": 2}), reduction)
    everything = torch.cat([local.detach(), OTHER_RANK])
    expected = everything.mean() if reduction == "mean" else everything.sum()
    torch.testing.assert_close(value.detach(), expected, rtol=0, atol=1e-12)
    value.backward()
    # single-process gradient of the global loss on this rank's anchors: 1/7 (mean) or 1 (sum); times world = 2
    single = 1.0 / everything.numel() if reduction == "mean" else 1.0
    torch.testing.assert_close(local.grad, torch.full_like(local, 2 * single), rtol=0, atol=1e-12)
    assert len(two_ranks) == 1


@pytest.mark.parametrize("meta", [{}, {"sampler": "queue"}, {"world_size": 1}])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_batch_without_gathering_reduces_locally_inside_a_process_group(two_ranks, meta, reduction):
    local = torch.tensor([0.1, 0.4, -0.2, 1.5], dtype=torch.float64, requires_grad=True)
    value = base.reduce_anchors(local, _batch(meta), reduction)
    expected = local.mean() if reduction == "mean" else local.sum()
    torch.testing.assert_close(value, expected, rtol=0, atol=0)
    assert two_ranks == []  # no collective: a rank-local batch must not wait for the other ranks


def test_no_reduction_returns_the_per_anchor_losses(two_ranks):
    local = torch.tensor([0.1, 0.4], dtype=torch.float64)
    assert base.reduce_anchors(local, replace(_batch({"world_size": 2})), "none") is local
    assert two_ranks == []
