"""Shared CLI plumbing: one-line errors without tracebacks, consoles, comma lists."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from contrastlab.platform.errors import ContrastlabError

F = TypeVar("F", bound=Callable[..., Any])

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """Print ``error: message`` on stderr and exit with ``code`` (no traceback)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def user_errors(func: F) -> F:
    """Turn :class:`ContrastlabError` (and config/YAML errors) into a one-line message and a non-zero exit."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ContrastlabError as exc:
            fail(str(exc), getattr(exc, "exit_code", 2))
        except KeyboardInterrupt:
            err_console.print("interrupted")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def split_csv(value: str | None) -> list[str]:
    """``"a, b,c"`` → ``["a", "b", "c"]``."""
    return [part.strip() for part in (value or "").split(",") if part.strip()]
