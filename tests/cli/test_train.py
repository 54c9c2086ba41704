"""``platform train`` options that conflict with ``--resume`` (from a bad-input sweep)."""

from __future__ import annotations

from pathlib import Path

from contrastlab.testing import run_cli


def test_resume_refuses_a_logdir(tmp_path: Path) -> None:
    """A resumed run stays where it is, so ``--logdir`` cannot apply; it was silently ignored (exit 0 after
    training in the old place) while every other conflicting option was refused."""
    elsewhere = tmp_path / "elsewhere"
    code, out = run_cli(["train", "--resume", str(tmp_path / "some-run"), "--logdir", str(elsewhere)])
    assert code == 2 and "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "drop --logdir" in errors[0], out
    assert not elsewhere.exists()


def test_logdir_default_is_named_in_the_help() -> None:
    code, out = run_cli(["train", "--help"])
    assert code == 0 and "Root directory of runs (default: runs)" in " ".join(out.replace("│", " ").split()), out
