"""Built-in encoders (registered through the `register_encoders` hook like any plugin package)."""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl


@hookimpl
def register_encoders(register) -> None:  # noqa: ANN001
    """Register the built-in encoders."""
