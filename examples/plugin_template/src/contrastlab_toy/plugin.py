"""Hook implementations: the module named by the ``contrastlab`` entry point in pyproject.toml."""

from __future__ import annotations

import contrastlab as cl
from contrastlab_toy.loss import MarginLoss
from contrastlab_toy.task import ToyTask


@cl.hookimpl
def register_losses(register) -> None:
    """Add the ``toy_margin`` loss."""
    register(MarginLoss)


@cl.hookimpl
def register_plugins(register) -> None:
    """Add the ``toy_clusters`` task plugin."""
    register(ToyTask)
