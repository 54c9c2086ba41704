"""``train`` and ``eval`` print notes on stderr and results on stdout, so ``platform eval RUN > metrics.txt`` or a
pipe into another program gets only the results while the notes still reach the terminal (README, "CLI tour")."""

from __future__ import annotations

import json
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import contrastlab as cl
from contrastlab.testing import fresh_plugin_manager, signal_self, sigterm_must_be_handled

TOY_RUN = ["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=4", "--run-name", "r"]


@pytest.fixture
def toy() -> Iterator[None]:
    """The built-ins plus the example plugin package ``contrastlab-toy``."""
    import contrastlab_toy.plugin

    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy"):
        yield


def _invoke(args: list[str]):
    """The CLI in-process with stdout and stderr apart (``result.stdout``, ``result.stderr``)."""
    from typer.testing import CliRunner

    from contrastlab.cli import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result


def _flat(text: str) -> str:
    """``text`` with its line breaks and runs of spaces as single spaces (a console may wrap a long note)."""
    return " ".join(text.split())


def _note_on_stderr_only(result, note: str) -> None:
    """``note`` is on stderr and nowhere on stdout."""
    assert note in _flat(result.stderr), result.stderr
    assert note not in _flat(result.stdout) and "note:" not in result.stdout, result.stdout


def _trained(tmp_path: Path) -> Path:
    """A completed toy run of 4 steps."""
    _invoke([*TOY_RUN, "--logdir", str(tmp_path)])
    return tmp_path / "toy_clusters" / "dcl" / "r"


def test_a_run_that_trains_no_loss_says_so_on_stderr(toy: None, tmp_path: Path, monkeypatch) -> None:
    from contrastlab.platform.plugins import get_task_plugin

    monkeypatch.setattr(type(get_task_plugin("toy_clusters")), "uses_loss", lambda self, config: False)
    result = _invoke([*TOY_RUN, "--logdir", str(tmp_path)])
    _note_on_stderr_only(result, "note: this toy_clusters configuration trains no contrastive loss, so loss 'dcl' "
                                 "is not used")
    assert "eval/nn_accuracy" in result.stdout, result.stdout  # the summary: stdout


class _NoPrimaryModule:
    """A third-party task whose ``train`` does not return the primary metric it declares."""

    @cl.hookimpl
    def register_plugins(self, register) -> None:
        from contrastlab_toy.task import ToyTask

        class NoPrimaryStream(ToyTask):
            name = "no_primary_stream"

            def train(self, config, run):
                return {"eval/other": sum(super().train(config, run).values())}

        register(NoPrimaryStream)


def test_a_run_without_its_primary_metric_says_so_on_stderr(tmp_path: Path) -> None:
    with fresh_plugin_manager(_NoPrimaryModule(), package="contrastlab-np-stream"):
        result = _invoke(["train", "--plugin", "no_primary_stream", "--loss", "dcl", "--set", "train.steps=4",
                          "--logdir", str(tmp_path)])
    _note_on_stderr_only(result, "note: this run has no 'eval/nn_accuracy', the primary metric of plugin "
                                 "'no_primary_stream'")
    assert "eval/other" in result.stdout, result.stdout


class _StopAtTheEndModule:
    """A task that saves a checkpoint on a stop but receives SIGTERM only after its last step."""

    @cl.hookimpl
    def register_plugins(self, register) -> None:
        from contrastlab_toy.task import ToyTask

        class StopAtTheEnd(ToyTask):
            name = "stop_at_the_end"
            checkpoint_on_stop = True

            def train(self, config, run):
                metrics = super().train(config, run)
                signal_self(signal.SIGTERM)
                return metrics

        register(StopAtTheEnd)


def test_a_stop_during_the_last_step_says_the_run_finished_on_stderr(tmp_path: Path) -> None:
    with fresh_plugin_manager(_StopAtTheEndModule(), package="contrastlab-stop-end"), sigterm_must_be_handled():
        result = _invoke(["train", "--plugin", "stop_at_the_end", "--loss", "dcl", "--set", "train.steps=4",
                          "--logdir", str(tmp_path)])
    (run_dir,) = tmp_path.glob("*/*/*")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    _note_on_stderr_only(result, "the stop came during the last step or the final evaluation, so the run finished "
                                 "instead")
    assert "eval/nn_accuracy" in result.stdout, result.stdout


def test_eval_of_an_unfinished_run_notes_it_and_its_resume_command_on_stderr(toy: None, tmp_path: Path) -> None:
    run_dir = _trained(tmp_path)
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "interrupted", "progress": 0.25}))
    result = _invoke(["eval", str(run_dir)])
    _note_on_stderr_only(result, "note: this run has not completed (status interrupted, 25% done)")
    assert f"platform train --resume {shlex.quote(str(run_dir))}" in _flat(result.stderr), result.stderr
    assert "--resume" not in result.stdout, result.stdout
    assert f"eval.json: {run_dir / 'eval.json'}" in result.stdout.splitlines(), result.stdout  # the result: stdout


def test_eval_of_a_run_in_training_notes_it_on_stderr(toy: None, tmp_path: Path, held_by_another_process) -> None:
    run_dir = _trained(tmp_path)
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "running", "progress": 0.5}))
    with held_by_another_process(run_dir):  # another process trains it
        result = _invoke(["eval", str(run_dir)])
    _note_on_stderr_only(result, "note: this run is being trained now by another process (pid 4242), 50% done")
    assert "eval/nn_accuracy" in result.stdout, result.stdout


def test_eval_options_a_plugin_lacks_are_noted_on_stderr(toy: None, tmp_path: Path) -> None:
    run_dir = _trained(tmp_path)
    result = _invoke(["eval", str(run_dir), "--episodes", "3"])
    _note_on_stderr_only(result, "note: plugin 'toy_clusters' has no evaluation episodes; --episodes is ignored")
    assert "eval/nn_accuracy" in result.stdout, result.stdout
