"""The ``platform`` command line (Typer): ``train``, ``eval``, ``list``, ``config``, ``compare``, ``report``, ...

Depends on :mod:`contrastlab.experiments` and the core (:mod:`contrastlab.platform`); nothing depends on it.
"""

from contrastlab.cli.app import app, main

__all__ = ["app", "main"]
