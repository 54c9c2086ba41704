"""The `graph` task plugin: graph contrastive learning (GraphCL / InfoGraph, GIN) with any unsupervised loss."""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl


@hookimpl
def register_plugins(register) -> None:
    """Register the `graph` task plugin."""
    from contrastlab.plugins.graph.task import GraphTask

    register(GraphTask)
