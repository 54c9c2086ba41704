"""The `recsys` task plugin: contrastive collaborative filtering (MF, LightGCN) with any unsupervised loss.

It registers the task plugin ``recsys`` and its two user/item encoders ``mf`` and ``lightgcn`` (see docs/recsys.md).
"""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl


@hookimpl
def register_plugins(register) -> None:
    """Register the `recsys` task plugin."""
    from contrastlab.plugins.recsys.task import RecsysTask

    register(RecsysTask)


@hookimpl
def register_encoders(register) -> None:
    """Register the recommendation encoders `mf` and `lightgcn`."""
    from contrastlab.plugins.recsys.model import ENCODERS

    for encoder in ENCODERS:
        register(encoder)
