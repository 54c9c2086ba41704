"""Shared CLI plumbing: one-line errors without tracebacks, consoles, copyable commands, comma lists."""

from __future__ import annotations

import functools
import inspect
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from contrastlab.platform.errors import ContrastlabError

F = TypeVar("F", bound=Callable[..., Any])

console = Console()
PRESET_DEFAULT = (
    "default: the plugin's default preset, smoke for every built-in plugin; `platform list plugins` lists each "
    "plugin's presets, default first"
)
"""The default of ``--preset``, as the help of ``train`` and ``config`` says it."""
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """Print ``error: message`` on stderr and exit with ``code`` (no traceback)."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)  # `[x]` is text
    raise typer.Exit(code)


def print_usage_error(exc: Any) -> None:
    """A click usage error (missing argument, unknown option, value out of range) as the platform's other errors
    are: ``error: <message>; see `<command> --help``` on one line (Typer's default is a usage line and a box)."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # the help text was printed instead
        return
    ctx = getattr(exc, "ctx", None)
    message = " ".join(str(exc.format_message()).split()).rstrip(".")
    see = "? See" if message.endswith("?") else "; see"  # "Did you mean 'train'? See ...", not "'train'?; see"
    message = message.removesuffix("?")
    hint = f"{see} `{ctx.command_path} --help`" if ctx is not None else ("?" if see.startswith("?") else "")
    err_console.print(f"[bold red]error:[/] {escape(message)}{escape(hint)}", highlight=False, soft_wrap=True)


def os_error_message(exc: OSError) -> str:
    """``cannot write /x/y: Permission denied`` style one-liner for an ``OSError``."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{exc.filename}: {reason}" if exc.filename else reason


def user_errors(func: F) -> F:
    """Turn :class:`ContrastlabError` (and file-system errors) into a one-line message and a non-zero exit."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ContrastlabError as exc:
            fail(str(exc), getattr(exc, "exit_code", 2))
        except BrokenPipeError:  # `platform config ... | head`: the reader left, nothing to report
            sys.stderr.close()
            sys.exit(0)
        except OSError as exc:  # a file that cannot be read or written that no earlier check caught
            fail(os_error_message(exc), 1)
        except KeyboardInterrupt:
            err_console.print("interrupted")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def shell_command(*args: str | Path) -> str:
    """A command line with every argument shell-quoted where needed: ``platform eval '/my runs/x'``."""
    return shlex.join(str(arg) for arg in args)


def say(text: str, *, stderr: bool = False) -> None:
    """Print ``text`` as is: no markup, no highlighting, never wrapped (long paths stay on one line)."""
    (err_console if stderr else console).print(text, markup=False, highlight=False, soft_wrap=True)


def print_commands(title: str, *commands: str, stderr: bool = False) -> None:
    """``title``, then each command on its own indented line, ready to copy (see :func:`shell_command`)."""
    say(title, stderr=stderr)
    for command in commands:
        say(f"  {command}", stderr=stderr)


def not_empty(value: str | None) -> str | None:
    """Refuse an option given as an empty string (``--device ""``, often an unset shell variable) as a usage error,
    as an empty ``--plugin`` or ``--preset`` is refused, instead of quietly reading it as "left out"."""
    if value is not None and not value.strip():
        raise typer.BadParameter("empty; leave the option out for its default")
    return value


def reflow_help(text: str) -> str:
    """A command's docstring as help: each prose paragraph on one line (rich wraps it to the terminal), while a
    paragraph with an indented line (examples, a command continued with ``\\``) keeps its line breaks. Typer keeps
    every line break of a docstring, so help was broken at the source's wrap points as well as the terminal's."""
    paragraphs = [p if any(line[:1].isspace() for line in p.splitlines()) else " ".join(p.split("\n"))
                  for p in inspect.cleandoc(text).split("\n\n")]
    # Typer renders the text after the first paragraph through ``inspect.cleandoc`` again, which strips from every
    # line after that text's first the smallest indentation among them: with nothing but an "Examples:" heading
    # and indented examples there, the examples lost their indentation. An empty paragraph ahead of that text
    # makes the heading one of those lines (indentation 0); cleandoc then drops the leading blank lines.
    return "\n\n".join(paragraphs[:1] + [""] * (len(paragraphs) > 1) + paragraphs[1:])


def reflow_command_help(app: typer.Typer) -> None:
    """Give every command of ``app`` registered without an explicit help its :func:`reflow_help`'d docstring (an
    ``app`` without commands, such as a test's stand-in, is left alone)."""
    for info in getattr(app, "registered_commands", ()):
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = reflow_help(info.callback.__doc__)
