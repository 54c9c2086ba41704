"""The ``platform`` / ``contrastlab`` console scripts.

Importing contrastlab (and torch with it) takes a second or two; a Ctrl-C in that time would print a
``KeyboardInterrupt`` traceback, because the command line's own interrupt handling is not set up yet. This module
lives outside the ``contrastlab`` package, so nothing slow is imported before the ``try`` below.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Import the command line and run it; a Ctrl-C while importing exits 130 with one line."""
    try:
        from contrastlab.cli.app import main as run_command_line
    except KeyboardInterrupt:
        sys.stderr.write("interrupted while starting (nothing was run)\n")
        raise SystemExit(130) from None
    run_command_line()
