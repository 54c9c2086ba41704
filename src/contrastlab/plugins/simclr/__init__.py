"""The `simclr` task plugin: vision SimCLR with linear evaluation, any registered loss (see docs/simclr.md)."""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl
from contrastlab.plugins.simclr.task import SimCLRTask

__all__ = ["SimCLRTask"]


@hookimpl
def register_plugins(register) -> None:
    """Register the `simclr` task plugin."""
    register(SimCLRTask)
