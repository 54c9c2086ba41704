"""The `pu` task plugin: positive-unlabeled classifiers with contrastive pre-training (puNCE, PUCL, any loss)."""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl


@hookimpl
def register_plugins(register) -> None:
    """Register the `pu` task plugin."""
    from contrastlab.plugins.pu.task import PUTask

    register(PUTask)
