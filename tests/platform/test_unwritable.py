"""Paths that cannot be read or written: one ``error:`` line, a non-zero exit, no traceback, nothing written."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import contrastlab.platform.rundir as rundir
from contrastlab.platform.plugins import PluginManager
from contrastlab.testing import run_cli

TRAIN = ["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=10"]


def snapshot(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")}


def assert_one_line_error(code: int, out: str, *needles: str) -> None:
    assert code != 0, out
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    for needle in needles:
        assert needle in errors[0], out


@pytest.fixture
def world(toy_pm: PluginManager, tmp_path: Path) -> dict[str, Path]:
    """A finished toy run, a plain file, a directory and a binary file."""
    runs = tmp_path / "runs"
    code, out = run_cli([*TRAIN, "--logdir", str(runs)])
    assert code == 0, out
    (run,) = [p for p in runs.glob("*/*/*") if p.is_dir()]
    (tmp_path / "afile").write_text("not a directory\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00\x81")
    return {"root": tmp_path, "runs": runs, "run": run, "file": tmp_path / "afile", "dir": tmp_path / "adir",
            "binary": tmp_path / "binary.yaml"}  # fmt: skip


CASES = {  # case: (arguments, {name} = a path of the world fixture; a word the error must contain)
    "train --logdir through a file": ([*TRAIN, "--logdir", "{file}/runs"], "is a file"),
    "train --logdir is a file": ([*TRAIN, "--logdir", "{file}"], "is a file"),
    "eval --video through a file": (["eval", "{run}", "--video", "{file}/e.gif"], "is a file"),
    "eval --video is a directory": (["eval", "{run}", "--video", "{dir}"], "is a directory"),
    "compare --out through a file": (
        ["compare", "--plugin", "toy_clusters", "--loss", "dcl", "--preset", "smoke", "--out", "{file}/out"],
        "is a file",
    ),
    "report --out through a file": (["report", "{runs}", "--out", "{file}/rep"], "is a file"),
    "config --config is a directory": (["config", "--plugin", "toy_clusters", "--config", "{dir}"], "is a directory"),
    "config --config is binary": (["config", "--plugin", "toy_clusters", "--config", "{binary}"], "UTF-8"),
    "tensorboard LOGDIR is a file": (["tensorboard", "{file}"], "is a file"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_line_error_and_nothing_written(world: dict[str, Path], case: str, monkeypatch) -> None:
    from contrastlab_toy.task import ToyTask

    # the toy plugin has no videos, so its --video would be ignored unchecked: let it claim one for these cases
    monkeypatch.setattr(ToyTask, "eval_options", frozenset({"video"}))
    template, needle = CASES[case]
    before = snapshot(world["root"])
    code, out = run_cli([arg.format(**world) for arg in template])
    assert_one_line_error(code, out, needle)
    assert snapshot(world["root"]) == before


def test_read_only_logdir(toy_pm: PluginManager, tmp_path: Path, monkeypatch) -> None:
    """What a read-only directory looks like to ``os.access`` (this test may run as root, which may write anyway)."""
    logdir = tmp_path / "ro"
    logdir.mkdir()
    real_access = os.access
    monkeypatch.setattr(rundir.os, "access", lambda p, mode: False if Path(p) == logdir else real_access(p, mode))
    code, out = run_cli([*TRAIN, "--logdir", str(logdir / "runs")])
    assert_one_line_error(code, out, "not writable", str(logdir))
    assert not list(logdir.iterdir())


def test_write_error_while_creating_the_run_leaves_nothing(toy_pm: PluginManager, tmp_path: Path, monkeypatch) -> None:
    """A read-only file system only says so when writing (EROFS): the half-made run directory is removed."""

    def read_only_fs(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "write_text", read_only_fs)
    code, out = run_cli([*TRAIN, "--logdir", str(tmp_path / "runs")])
    monkeypatch.undo()
    assert_one_line_error(code, out, "Read-only file system", "--logdir")
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only directories")
def test_real_read_only_directory(toy_pm: PluginManager, tmp_path: Path) -> None:
    logdir = tmp_path / "ro"
    logdir.mkdir()
    logdir.chmod(0o555)
    try:
        code, out = run_cli([*TRAIN, "--logdir", str(logdir)])
        assert_one_line_error(code, out, "not writable")
        assert not list(logdir.iterdir())
    finally:
        logdir.chmod(0o755)


def test_a_failed_start_keeps_the_folders_another_run_put_a_run_into(toy_pm: PluginManager, tmp_path: Path,
                                                                     monkeypatch) -> None:
    """The clean-up removes this start's run directory and the empty folders it made, never a run of another
    process that appeared in them meanwhile (it removed the whole folder tree it had made)."""
    other = tmp_path / "runs" / "toy_clusters" / "dcl" / "other-run"

    def another_run_then_read_only(self, *args, **kwargs):
        other.mkdir(parents=True, exist_ok=True)
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "write_text", another_run_then_read_only)
    code, out = run_cli([*TRAIN, "--logdir", str(tmp_path / "runs")])
    monkeypatch.undo()
    assert_one_line_error(code, out, "Read-only file system", "--logdir")
    assert [p.name for p in other.parent.iterdir()] == ["other-run"]


def test_a_failed_start_in_the_users_empty_run_name_folder_leaves_it_empty(toy_pm: PluginManager, tmp_path: Path,
                                                                           monkeypatch) -> None:
    """A full disk while writing run.json left config.yaml in the user's own empty `--run-name` folder: the folder
    stayed (right) but the next start refused it and suggested a `--resume` that could not work (no run.json)."""
    mine = tmp_path / "runs" / "toy_clusters" / "dcl" / "mine"
    mine.mkdir(parents=True)
    write_text = Path.write_text

    def disk_full_at_run_json(self, *args, **kwargs):
        if self.name == "run.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full_at_run_json)
    code, out = run_cli([*TRAIN, "--logdir", str(tmp_path / "runs"), "--run-name", "mine"])
    monkeypatch.undo()
    assert_one_line_error(code, out, "No space left on device", "--logdir")
    assert mine.is_dir() and list(mine.iterdir()) == []  # the user's folder stays, as it was
    code, out = run_cli([*TRAIN, "--logdir", str(tmp_path / "runs"), "--run-name", "mine"])
    assert code == 0, out
