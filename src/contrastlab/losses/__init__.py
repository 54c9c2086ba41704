"""Built-in losses (registered through the `register_losses` hook like any plugin package)."""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl


@hookimpl
def register_losses(register) -> None:  # noqa: ANN001
    """Register the built-in losses."""
