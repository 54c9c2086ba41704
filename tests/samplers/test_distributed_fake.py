"""``contrastlab.samplers.distributed`` against a scripted ``torch.distributed`` (one process, any rank): the gather
order, the gradient convention (all-reduce, keep this rank's slice) and the one-line errors on mismatched ranks,
which the gloo test (test_distributed.py, equal well-formed ranks only) does not reach."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl
from contrastlab.samplers import distributed as D


class ScriptedDist:
    """Rank ``rank`` of ``world``: every collective takes the other ranks' contributions from ``script`` in order."""

    def __init__(self, rank: int, world: int, script: list[list[torch.Tensor]], initialized: bool = True) -> None:
        self.rank, self.world, self.script, self.initialized = rank, world, list(script), initialized

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def get_rank(self) -> int:
        return self.rank

    def get_world_size(self) -> int:
        return self.world

    def all_gather(self, parts: list[torch.Tensor], x: torch.Tensor) -> None:
        others = iter(self.script.pop(0))
        for i, p in enumerate(parts):
            p.copy_(x if i == self.rank else next(others))

    def all_reduce(self, x: torch.Tensor) -> None:
        for other in self.script.pop(0):
            x.add_(other)


def _install(monkeypatch, dist: ScriptedDist) -> ScriptedDist:
    monkeypatch.setattr(D, "dist", dist)
    return dist


def test_world_is_rank_and_size_only_when_initialised(monkeypatch):
    _install(monkeypatch, ScriptedDist(2, 3, []))
    assert D.world() == (2, 3)
    _install(monkeypatch, ScriptedDist(2, 3, [], initialized=False))
    assert D.world() == (0, 1)
    x, y = torch.randn(2, 3), torch.tensor([0, 1])
    assert torch.equal(D.gather_with_grad(x), x[None]) and torch.equal(D.gather_labels(y, x), y[None])
    assert D.gather_labels(None, x) is None


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_gather_stacks_in_rank_order_and_backward_keeps_the_all_reduced_slice(monkeypatch, rank):
    x = torch.randn(2, 3, requires_grad=True)
    others = [torch.randn(2, 3), torch.randn(2, 3)]
    g_others = [torch.randn(3, 2, 3), torch.randn(3, 2, 3)]  # the other ranks' gradients w.r.t. the stack
    shape = torch.tensor([2, 3])
    dist = _install(monkeypatch, ScriptedDist(rank, 3, [[shape, shape], others, g_others]))
    y = D.gather_with_grad(x, "z")
    want = [*others[:rank], x.detach(), *others[rank:]]
    assert y.shape == (3, 2, 3) and torch.equal(y.detach(), torch.stack(want))
    w = torch.randn(3, 2, 3)
    (y * w).sum().backward()
    torch.testing.assert_close(x.grad, w[rank] + g_others[0][rank] + g_others[1][rank])
    assert not dist.script
    # without gradient: the same stack, no backward collective
    _install(monkeypatch, ScriptedDist(rank, 3, [[shape, shape], others]))
    assert torch.equal(D.gather_with_grad(x.detach(), "z"), torch.stack(want))


def test_ranks_with_another_shape_are_refused_in_one_line(monkeypatch):
    _install(monkeypatch, ScriptedDist(0, 2, [[torch.tensor([3, 4])]]))
    msg = r"every rank must pass views of the same shape; got \[\(2, 4\), \(3, 4\)\]"
    with pytest.raises(cl.ConfigError, match=msg):
        D.gather_with_grad(torch.randn(2, 4), "views")


def test_gather_labels_stacks_them_or_refuses_a_mix(monkeypatch):
    like = torch.randn(3, 4)
    mine, theirs = torch.tensor([-1, 0, 2]), torch.tensor([-1, -1, -1])
    _install(monkeypatch, ScriptedDist(1, 2, [[theirs]]))
    assert D.gather_labels(mine, like).tolist() == [[-1, -1, -1], [-1, 0, 2]]  # all-unlabeled is still labels
    _install(monkeypatch, ScriptedDist(1, 2, [[torch.full((3,), -2)]]))
    assert D.gather_labels(None, like) is None  # no rank has labels
    for rank_labels, other in ((mine, torch.full((3,), -2)), (None, theirs)):
        _install(monkeypatch, ScriptedDist(0, 2, [[other]]))
        with pytest.raises(cl.ConfigError, match="labels were passed on some ranks but not on others"):
            D.gather_labels(rank_labels, like)
