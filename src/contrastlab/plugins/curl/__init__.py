"""The `curl` task plugin."""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl


@hookimpl
def register_plugins(register) -> None:  # noqa: ANN001
    """Register the `curl` task plugin."""
