"""Printed commands (TensorBoard, resume) are on their own line, shell-quoted and never wrapped."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from rich.console import Console
from toy_dist import install_fake_toy_dist

import contrastlab.cli.common as common
from contrastlab.platform.plugins import PluginManager

ROOT = Path(__file__).resolve().parents[2]


def command_lines(text: str, program: str) -> list[list[str]]:
    """The printed lines that are ``program ...`` commands, split as a shell would."""
    return [shlex.split(line) for line in text.splitlines() if line.startswith(f"  {program} ")]


def test_train_summary_commands_survive_a_narrow_pipe(tmp_path: Path) -> None:
    site = install_fake_toy_dist(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if k not in {"CONTRASTLAB_PLUGINS", "COLUMNS"}}
    env.update(COLUMNS="40", OMP_NUM_THREADS="1")
    paths = [site, ROOT / "examples" / "plugin_template" / "src", ROOT / "src"]
    env["PYTHONPATH"] = os.pathsep.join(map(str, paths))
    logdir = tmp_path / "my runs [v2]"
    result = subprocess.run(
        [sys.executable, "-m", "contrastlab.cli", "train", "--plugin", "toy_clusters", "--loss", "dcl",
         "--logdir", str(logdir), "--set", "train.steps=10"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (run_dir,) = [p for p in logdir.glob("*/*/*") if p.is_dir()]
    assert command_lines(result.stdout, "platform") == [["platform", "tensorboard", str(run_dir)]], result.stdout
    assert command_lines(result.stdout, "tensorboard") == [["tensorboard", "--logdir", str(run_dir)]], result.stdout
    assert f"run directory: {run_dir}" in result.stdout.splitlines()


@pytest.fixture
def narrow(monkeypatch) -> io.StringIO:
    """Both CLI consoles as a 30-column non-terminal."""
    buffer = io.StringIO()
    narrow_console = Console(file=buffer, width=30, force_terminal=False)
    monkeypatch.setattr(common, "console", narrow_console)
    monkeypatch.setattr(common, "err_console", narrow_console)
    return buffer


def test_resume_command_after_ctrl_c(toy_pm: PluginManager, tmp_path: Path, narrow: io.StringIO) -> None:
    from contrastlab_toy.task import ToyTask

    from contrastlab.cli.train import execute
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.run import Run

    class Interrupted(ToyTask):
        def train(self, config, run):
            raise KeyboardInterrupt

    task = Interrupted()
    run = Run.create(task, resolve_config(task, device="cpu"), tmp_path / "a b", run_name="it's")
    with pytest.raises(typer.Exit):
        execute(run)
    assert command_lines(narrow.getvalue(), "platform") == [["platform", "train", "--resume", str(run.dir)]]


def test_compare_prints_the_tensorboard_commands_unwrapped(tmp_path: Path, narrow: io.StringIO) -> None:
    from contrastlab.cli.compare import print_results

    out = tmp_path / "results with spaces"
    out.mkdir()
    (out / "results.md").write_text("# results\n")
    print_results(out)
    board = str(out / "tensorboard")
    text = narrow.getvalue()
    assert command_lines(text, "platform") == [["platform", "tensorboard", board]], text
    assert command_lines(text, "tensorboard") == [["tensorboard", "--logdir", board]], text
