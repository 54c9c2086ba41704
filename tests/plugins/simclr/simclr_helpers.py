"""Tiny configs of the simclr plugin for fast tests (synthetic data, a 4-channel-wide CNN)."""

from __future__ import annotations

from contrastlab.platform.config import resolve_config
from contrastlab.plugins.simclr import SimCLRTask

TINY = [
    "data.dataset=synthetic", "data.train_subset=128", "data.test_subset=64",
    "encoder.width=4", "encoder.feature_dim=16", "model.head_hidden=16", "model.proj_dim=16",
    "train.batch_size=16", "train.epochs=1", "eval.knn_every=0", "eval.linear_epochs=5",
    "augment.size=16",
]


def tiny_config(loss: str = "infonce", *extra: str, sampler: str | None = None, task: SimCLRTask | None = None):
    """A validated tiny config (CPU, synthetic data) with ``extra`` --set overrides."""
    return resolve_config(task or SimCLRTask(), preset="smoke", loss=loss, sampler=sampler,
                          sets=[*TINY, *extra])
