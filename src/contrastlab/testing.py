"""Test helpers for plugin authors (and for contrastlab's own tests).

* :func:`fresh_plugin_manager`: an isolated plugin manager with your plugin module registered exactly as its
  entry point would register it, made current for the duration of a ``with`` block.
* :func:`gaussian_clusters`: a tiny labelled synthetic dataset (unit-norm class clusters) for fast checks.
* :func:`noisy_views`: two augmented "views" of a batch of vectors.
* :func:`run_cli`: run ``platform ...`` in-process with Typer's CliRunner and return (exit code, output).

Example (pytest)::

    from contrastlab.testing import fresh_plugin_manager, run_cli
    import my_plugin

    def test_my_plugin_trains(tmp_path):
        with fresh_plugin_manager(my_plugin, package="my-plugin"):
            code, out = run_cli(["train", "--plugin", "mine", "--loss", "dcl", "--preset", "smoke",
                                 "--logdir", str(tmp_path)])
        assert code == 0, out
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch

from contrastlab.platform.plugins import PluginManager, use_plugin_manager


@contextmanager
def fresh_plugin_manager(
    *modules: ModuleType | Any, package: str = "test-plugin", builtins: bool = True, entry_points: bool = False
) -> Iterator[PluginManager]:
    """A new :class:`PluginManager` with ``modules`` registered as distribution ``package``, made current.

    ``builtins`` keeps contrastlab's own losses, samplers, encoders and plugins; ``entry_points`` also loads
    installed third-party packages (off by default so tests do not depend on the environment).
    """
    pm = PluginManager(builtins=builtins, entry_points=entry_points)
    for module in modules:
        pm.register_module(module, package=package)
    with use_plugin_manager(pm):
        yield pm


def gaussian_clusters(
    n: int = 256, dim: int = 16, classes: int = 4, spread: float = 0.3, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` points in ``dim`` dimensions around ``classes`` random unit centres; returns (x [n, dim], y [n])."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.nn.functional.normalize(torch.randn(classes, dim, generator=gen), dim=1)
    y = torch.arange(n) % classes
    x = centres[y] + spread * torch.randn(n, dim, generator=gen) / dim**0.5
    return x, y


def noisy_views(
    x: torch.Tensor, noise: float = 0.1, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two views of ``x`` with independent Gaussian noise (a stand-in for data augmentation)."""
    first = x + noise * torch.randn(x.shape, generator=generator)
    second = x + noise * torch.randn(x.shape, generator=generator)
    return first, second


def run_cli(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Invoke the ``platform`` CLI in-process; returns (exit code, combined stdout/stderr)."""
    from typer.testing import CliRunner

    from contrastlab.cli import app

    result = CliRunner().invoke(app, args, env=env)
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        output += "".join(traceback.format_exception(result.exception))
    return result.exit_code, output
