"""Built-in samplers (registered through the `register_samplers` hook like any plugin package)."""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl


@hookimpl
def register_samplers(register) -> None:  # noqa: ANN001
    """Register the built-in samplers."""
