"""Fixtures for the core tests: the example toy plugin registered exactly as its entry point would be, and Ctrl-C
handled as in a process started from a terminal."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from contrastlab.platform.plugins import PluginManager
from contrastlab.testing import fresh_plugin_manager


@pytest.fixture
def toy_pm() -> Iterator[PluginManager]:
    """A fresh plugin manager with the built-ins plus the example plugin package ``contrastlab-toy``."""
    import contrastlab_toy.plugin

    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy") as pm:
        yield pm


@pytest.fixture
def run_left_running(toy_pm: PluginManager, tmp_path: Path) -> Path:
    """A toy run trained to its end whose run.json then says ``running``, half done: what a run killed outright
    (SIGKILL) looks like on disk."""
    from contrastlab.testing import run_cli

    code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=4",
                         "--logdir", str(tmp_path), "--run-name", "x"])
    assert code == 0, out
    run_dir = tmp_path / "toy_clusters" / "dcl" / "x"
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "running", "progress": 0.5}))
    return run_dir


@pytest.fixture(autouse=True)
def ctrl_c_as_from_a_terminal() -> Iterator[None]:
    """Each test starts with Python's own SIGINT handler, as a command started from a terminal has. A pytest started
    as a background job of a script (no job control) inherits SIGINT ignored, and every test that sends itself
    Ctrl-C failed there (GracefulStop and the tune/compare hooks keep an ignored Ctrl-C ignored, on purpose);
    tests of that case set SIG_IGN themselves."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
