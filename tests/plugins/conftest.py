"""Fixtures shared by the plugin tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from contrastlab.platform.rundir import RunDir
from contrastlab.testing import run_cli


def _resume_from_final(plugin: str, args: Sequence[str], logdir: Path) -> tuple[dict, dict]:
    """Train ``plugin`` with ``args`` to completion, then put the run in the state a SIGKILL during the final
    evaluation (or a full disk at ``summary.json``) leaves: the final checkpoint saved, no summary, status
    interrupted. Resume it and return the summary metrics (uninterrupted run, resumed run)."""
    code, out = run_cli(["train", "--plugin", plugin, *args, "--logdir", str(logdir), "--run-name", "a"])
    assert code == 0, out
    run_dir = next(p for p in logdir.glob("*/*/a") if RunDir.has_record(p))
    rundir = RunDir(run_dir)
    before = rundir.summary()["metrics"]
    rundir.summary_json.unlink()
    info = json.loads(rundir.run_json.read_text())
    assert info["status"] == "completed" and info["last_checkpoint_step"] is not None
    rundir.run_json.write_text(json.dumps({**info, "status": "interrupted"}))
    code, out = run_cli(["train", "--resume", str(run_dir)])
    assert code == 0, out
    return before, rundir.summary()["metrics"]


@pytest.fixture
def resume_from_final() -> Callable[[str, Sequence[str], Path], tuple[dict, dict]]:
    """``resume_from_final(plugin, args, logdir)`` → (summary metrics of the uninterrupted run, of the run resumed
    from its final checkpoint with no summary written)."""
    return _resume_from_final
