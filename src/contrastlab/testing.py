"""Test helpers for plugin authors (and for contrastlab's own tests).

* :func:`fresh_plugin_manager`: an isolated plugin manager with your plugin module registered exactly as its
  entry point would register it, made current for the duration of a ``with`` block.
* :func:`gaussian_clusters`: a tiny labelled synthetic dataset (unit-norm class clusters) for fast checks.
* :func:`noisy_views`: two augmented "views" of a batch of vectors.
* :func:`run_cli`: run ``platform ...`` in-process with Typer's CliRunner and return (exit code, output).
* :func:`sigterm_at` and :func:`check_stop_and_resume`: for a plugin that sets ``checkpoint_on_stop``, check that
  a run stopped by SIGTERM at any step and resumed logs what the uninterrupted run logs; :func:`signal_self`
  sends this process a signal and lets its handler run.

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

import json
import os
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
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


def signal_self(signum: int) -> None:
    """Send ``signum`` to this process and give Python the chance to run its handler before returning."""
    os.kill(os.getpid(), signum)
    for _ in range(100):
        time.sleep(0.001)


@contextmanager
def sigterm_must_be_handled() -> Iterator[None]:
    """Within the block SIGTERM's fallback handler raises ``AssertionError`` instead of ending the test process, and
    on leaving the block it must be back in place (a command that handles SIGTERM restores the previous handler)."""

    def not_this_process(*_: Any) -> None:
        raise AssertionError("SIGTERM reached the handler the command should have replaced")

    previous = signal.signal(signal.SIGTERM, not_this_process)
    try:
        yield
        assert signal.getsignal(signal.SIGTERM) is not_this_process, "the SIGTERM handler was not restored"
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def sigterm_at(step: int, when: str = "checkpoint_due") -> Iterator[None]:
    """Within the block, the process sends itself SIGTERM once, when a run reaches ``step``: as it asks
    ``run.checkpoint_due(step)`` (``when="checkpoint_due"``), or right after ``run.log(..., step)`` (``"log"``)."""
    from contrastlab.platform.run import Run

    if when not in ("checkpoint_due", "log"):
        raise ValueError(f"when must be 'checkpoint_due' or 'log', not {when!r}")
    original = getattr(Run, when)
    armed = [True]

    def deliver() -> None:
        armed[0] = False
        signal_self(signal.SIGTERM)

    def checkpoint_due(self: Run, at: int) -> bool:
        if armed[0] and at == step:
            deliver()
        return original(self, at)

    def log(self: Run, scalars: dict[str, float], at: int, *args: Any, **kwargs: Any) -> None:
        original(self, scalars, at, *args, **kwargs)
        if armed[0] and at == step:
            deliver()

    setattr(Run, when, checkpoint_due if when == "checkpoint_due" else log)
    try:
        yield
    finally:
        setattr(Run, when, original)


def check_stop_and_resume(plugin: str, args: Sequence[str], logdir: Path, step: int, when: str = "checkpoint_due",
                          ignore: Sequence[str] = ("time", "per_s", "wall")) -> tuple[Path, str]:
    """Train ``plugin`` twice with ``args``: once straight through, once stopped by SIGTERM at ``step``
    (:func:`sigterm_at`) and continued with ``--resume``. Asserts that the stopped run saved its checkpoint at
    ``step`` and exited as interrupted, and that the resumed run's ``metrics.jsonl`` rows and final metrics equal
    the uninterrupted run's (names containing any of ``ignore``, e.g. throughput, are left out). Returns the
    stopped run's directory and what its resume printed."""

    from contrastlab.platform.rundir import RunDir

    def train(where: Path) -> tuple[int, str, Path]:
        code, out = run_cli(["train", "--plugin", plugin, *args, "--logdir", str(where)])
        dirs = [p for p in where.glob("*/*/*") if RunDir.has_record(p)]
        assert len(dirs) == 1, out
        return code, out, dirs[0]

    def kept(row: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in row.items() if not any(w in k for w in ignore)}

    def logged(run_dir: Path) -> list[dict[str, Any]]:
        lines = RunDir(run_dir).metrics_jsonl.read_text().splitlines()
        return [kept(json.loads(line)) for line in lines]

    code, out, full = train(logdir / "straight")
    assert code == 0, out
    with sigterm_at(step, when):
        code, out, stopped = train(logdir / "stopped")
    assert code == 143 and f"stopped after saving a checkpoint at step {step};" in out, out  # 128 + SIGTERM
    assert RunDir(stopped).info()["last_checkpoint_step"] == step
    code, resumed = run_cli(["train", "--resume", str(stopped)])
    assert code == 0, resumed
    assert logged(stopped) == logged(full)
    final = [kept(RunDir(d).summary()["metrics"]) for d in (stopped, full)]
    assert final[0] == final[1] and final[0]
    return stopped, resumed
