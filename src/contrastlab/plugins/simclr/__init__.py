"""The `simclr` task plugin."""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl


@hookimpl
def register_plugins(register) -> None:  # noqa: ANN001
    """Register the `simclr` task plugin."""
