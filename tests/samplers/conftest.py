"""A simulated ``torch.distributed`` world for the samplers' gathering paths, in one process.

``fake_world(module, rank, world, shards, label_shards)`` replaces ``world``/``gather_with_grad``/``gather_labels``
in a sampler module: this rank's tensor is passed through (so gradients reach it), the other ranks' tensors are the
given constants. The gloo test (test_distributed.py) checks the real collectives; this one lets a test build the
expected rank-``r`` batch by hand, quickly, for any rank.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest
import torch
from torch import Tensor


@pytest.fixture
def fake_world(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    def install(module: ModuleType, rank: int, world: int, shards: dict[str, list[Tensor]],
                label_shards: list[Tensor] | None) -> None:
        def gather_with_grad(x: Tensor, what: str = "embeddings") -> Tensor:
            parts = [x if i == rank else shards[what][i].to(x.dtype) for i in range(world)]
            assert all(p.shape == x.shape for p in parts), what
            return torch.stack(parts)

        def gather_labels(labels: Tensor | None, like: Tensor) -> Tensor | None:
            if labels is None:
                return None
            return torch.stack([labels if i == rank else label_shards[i] for i in range(world)])

        monkeypatch.setattr(module, "world", lambda: (rank, world))
        monkeypatch.setattr(module, "gather_with_grad", gather_with_grad)
        monkeypatch.setattr(module, "gather_labels", gather_labels)

    return install
