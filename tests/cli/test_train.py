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


def test_resume_refuses_a_bad_keep_checkpoints_before_touching_the_run(tmp_path: Path) -> None:
    """``--resume RUN --keep-checkpoints 0`` was refused only after Run.open had rewound the run's logs and
    rewritten its run.json."""
    import json

    import contrastlab_toy.plugin

    from contrastlab.testing import fresh_plugin_manager

    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy"):
        code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path),
                             "--set", "train.steps=30", "--set", "checkpoint_every=10"])  # fmt: skip
        assert code == 0, out
        (run_dir,) = [p for p in tmp_path.glob("*/*/*") if p.is_dir()]
        info = json.loads((run_dir / "run.json").read_text())
        (run_dir / "run.json").write_text(json.dumps({**info, "status": "interrupted"}))
        (run_dir / "checkpoints" / "step_000000000030.pt").unlink()  # as if stopped after step 20's checkpoint
        before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
        code, out = run_cli(["train", "--resume", str(run_dir), "--keep-checkpoints", "0"])
        assert code == 2 and "keep_checkpoints must be >= 1" in out and "Traceback" not in out, out
        assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before
