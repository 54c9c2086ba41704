"""Checkpoints: a full disk keeps the last good one, retention (--keep-checkpoints), latest-only parts."""

from __future__ import annotations

import errno
import json
import math
from pathlib import Path

import pytest
import torch

import contrastlab.platform.checkpoints as checkpoints
from contrastlab.platform.config import resolve_config
from contrastlab.platform.errors import StorageError
from contrastlab.platform.plugins import PluginManager
from contrastlab.platform.run import Run
from contrastlab.testing import run_cli


def no_space(obj, f, *args, **kwargs):
    """``torch.save`` on a disk that fills up in the middle of the file."""
    f.write(b"PK\x03\x04 half a checkpoint")
    raise OSError(errno.ENOSPC, "No space left on device")


def toy_run(tmp_path: Path, *sets: str) -> Run:
    from contrastlab_toy.task import ToyTask

    task = ToyTask()
    return Run.create(task, resolve_config(task, preset="smoke", sets=list(sets), device="cpu"), tmp_path)


def only_run(root: Path) -> Path:
    (run,) = [p for p in root.glob("*/*/*") if p.is_dir()]
    return run


def test_disk_full_keeps_the_previous_checkpoint(toy_pm: PluginManager, tmp_path: Path, monkeypatch) -> None:
    run = toy_run(tmp_path)
    run.save_checkpoint({"w": torch.ones(3)}, 10)
    good = run.rundir.checkpoint(10).read_bytes()
    monkeypatch.setattr(torch, "save", no_space)
    with pytest.raises(StorageError) as info:
        run.save_checkpoint({"w": torch.zeros(3)}, 20)
    message = str(info.value)
    assert "\n" not in message and "No space left on device" in message and "step 10" in message
    assert sorted(p.name for p in run.rundir.checkpoints.iterdir()) == ["step_000000000010.pt"]  # no temp file
    assert run.rundir.checkpoint(10).read_bytes() == good
    monkeypatch.undo()
    state = run.load_checkpoint()
    assert state["step"] == 10 and torch.equal(state["w"], torch.ones(3))


def test_disk_full_inside_torch_is_reported_as_such(toy_pm: PluginManager, tmp_path: Path, monkeypatch) -> None:
    """A real full disk: the file write fails and torch turns it into a RuntimeError; the cause is recovered."""
    real_open = open

    class FillingFile:
        def __init__(self, fh):
            self.fh, self.written = fh, 0

        def write(self, data):
            self.written += len(data)
            if self.written > 200:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.fh.write(data)

        def __getattr__(self, name):
            return getattr(self.fh, name)

    def filling_open(path, mode="r", *args, **kwargs):
        return FillingFile(real_open(path, mode, *args, **kwargs))

    run = toy_run(tmp_path)
    run.save_checkpoint({"w": torch.ones(3)}, 10)
    monkeypatch.setattr(checkpoints, "open", filling_open, raising=False)
    with pytest.raises(StorageError, match="No space left on device"):
        run.save_checkpoint({"w": torch.zeros(10_000)}, 20)
    assert [s for s, _ in run.rundir.checkpoint_steps()] == [10]
    assert not list(run.rundir.checkpoints.glob("*.tmp"))


def test_train_on_a_full_disk_fails_with_one_line_and_resumes(
    toy_pm: PluginManager, tmp_path: Path, monkeypatch
) -> None:
    real_save, calls = torch.save, []

    def second_save_fails(obj, f, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            return no_space(obj, f)
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", second_save_fails)
    args = ["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path),
            "--set", "train.steps=30", "--set", "checkpoint_every=10"]  # fmt: skip
    code, out = run_cli(args)
    assert code != 0 and "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "step 10" in errors[0], out
    run_dir = only_run(tmp_path)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["step_000000000010.pt"]
    monkeypatch.setattr(torch, "save", real_save)
    code, out = run_cli(["train", "--resume", str(run_dir)])
    assert code == 0, out
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"


@pytest.mark.parametrize("keep", [1, 3, None])
def test_keep_checkpoints_option(toy_pm: PluginManager, tmp_path: Path, keep: int | None) -> None:
    """``--keep-checkpoints N`` keeps the newest N; without it the newest 2 (README, docs/curl.md)."""
    option = [] if keep is None else ["--keep-checkpoints", str(keep)]
    code, out = run_cli(
        ["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path), "--set", "train.steps=50",
         "--set", "checkpoint_every=10", *option]
    )  # fmt: skip
    assert code == 0, out
    steps = [int(p.stem.split("_")[1]) for p in (only_run(tmp_path) / "checkpoints").iterdir()]
    assert sorted(steps) == [50, 40, 30][:2 if keep is None else keep][::-1]


def test_keep_checkpoints_is_validated(toy_pm: PluginManager, tmp_path: Path) -> None:
    for args in (["--keep-checkpoints", "0"], ["--set", "keep_checkpoints=0"]):
        code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path), *args])
        assert code != 0 and "Traceback" not in out and "keep_checkpoints" in out, out
    assert not list(tmp_path.iterdir())


def test_latest_only_parts_stay_with_the_newest_checkpoint(toy_pm: PluginManager, tmp_path: Path) -> None:
    run = toy_run(tmp_path, "keep_checkpoints=2")
    for step in (10, 20, 30):
        run.save_checkpoint({"net": torch.full((2,), step), "buffer": torch.arange(step)}, step, latest_only=["buffer"])
    names = sorted(p.name for p in run.rundir.checkpoints.iterdir())
    assert names == ["step_000000000020.pt", "step_000000000030.latest.pt", "step_000000000030.pt"]
    assert "buffer" not in torch.load(run.rundir.checkpoint(30), weights_only=False)
    state = run.load_checkpoint()
    assert state["step"] == 30 and state["buffer"].numel() == 30 and state["net"][0] == 30
    run.rundir.checkpoint(30).unlink()  # the newest is gone: the older one resumes without the buffer
    state = run.load_checkpoint()
    assert state["step"] == 20 and "buffer" not in state


def test_resume_deletes_the_temporary_file_of_a_killed_save(toy_pm: PluginManager, tmp_path: Path) -> None:
    """SIGKILL during a save leaves ``step_N.pt.tmp`` (as large as a checkpoint); a resume removes it."""
    run = toy_run(tmp_path)
    run.save_checkpoint({"w": torch.ones(3)}, 10)
    partial = run.rundir.checkpoint(13).with_name(run.rundir.checkpoint(13).name + ".tmp")
    partial.write_bytes(b"PK\x03\x04 half a checkpoint")
    run.close()
    resumed = Run.open(run.dir)
    assert not partial.exists() and resumed.latest_checkpoint_step() == 10
    assert sorted(p.name for p in run.rundir.checkpoints.iterdir()) == ["step_000000000010.pt"]


def test_a_checkpoint_records_how_far_the_run_got(toy_pm: PluginManager, tmp_path: Path) -> None:
    """run.json's ``progress`` (the latest progress bar's part done) lets compare's ETA count only what a resumed
    run has left; before any bar there is none."""
    run = toy_run(tmp_path)
    run.save_checkpoint({"w": torch.ones(3)}, 5)
    assert "progress" not in json.loads(run.rundir.run_json.read_text())
    with run.progress(40, initial=10) as bar:
        bar.update(20)
        run.save_checkpoint({"w": torch.ones(3)}, 30)
    info = json.loads(run.rundir.run_json.read_text())
    assert info["progress"] == 0.75 and info["last_checkpoint_step"] == 30


def damage(path: Path, how: str) -> None:
    """Damage a checkpoint file: cut to half, emptied, or overwritten with bytes that are no checkpoint."""
    if how == "half":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(bytes(range(256)) * 20)


@pytest.mark.parametrize("how", ["half", "empty", "garbage"])
def test_a_damaged_newest_checkpoint_is_one_line_naming_it_and_the_previous_one(
    toy_pm: PluginManager, tmp_path: Path, how: str
) -> None:
    """From a bad-input sweep: a truncated checkpoint said ``error: Invalid argument`` (exit 1), an empty one
    ``Aborted.``, a garbage one printed an unpickling traceback, from both ``--resume`` and ``eval``."""
    code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path),
                         "--set", "train.steps=30", "--set", "checkpoint_every=10"])  # fmt: skip
    assert code == 0, out
    run_dir = only_run(tmp_path)
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "running"}))  # as if killed after step 30
    newest = run_dir / "checkpoints" / "step_000000000030.pt"
    damage(newest, how)
    for args in (["train", "--resume", str(run_dir)], ["eval", str(run_dir)]):
        code, out = run_cli(args)
        assert code == 2 and "Traceback" not in out, out
        errors = [line for line in out.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, out
        assert str(newest) in errors[0] and "step 20" in errors[0], out
    assert newest.exists() and (run_dir / "checkpoints" / "step_000000000020.pt").exists()  # nothing deleted
    newest.unlink()  # what the message suggests: the previous checkpoint resumes the run
    code, out = run_cli(["train", "--resume", str(run_dir)])
    assert code == 0, out
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"


def test_a_damaged_only_checkpoint_says_the_run_starts_again(toy_pm: PluginManager, tmp_path: Path) -> None:
    run = toy_run(tmp_path)
    run.save_checkpoint({"w": torch.ones(3)}, 10)
    run.close()
    damage(run.rundir.checkpoint(10), "half")
    with pytest.raises(checkpoints.CheckpointError) as info:
        Run.open(run.dir)
    message = str(info.value)
    assert "\n" not in message and "no earlier checkpoint" in message and "step 0" in message


def test_a_damaged_side_file_is_refused_before_the_run_is_touched(toy_pm: PluginManager, tmp_path: Path) -> None:
    """From a bad-input sweep: a cut-short ``.latest.pt`` (curl's replay buffer) was found only when training
    loaded it, after ``--resume`` had rewound the logs and marked the run running (it ended marked failed)."""
    run = toy_run(tmp_path)
    run.save_checkpoint({"w": torch.ones(3), "buffer": torch.arange(1000)}, 10, latest_only=["buffer"])
    run.close()
    part = run.rundir.checkpoint_latest_part(10)
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    before = run.rundir.run_json.read_text()
    with pytest.raises(checkpoints.CheckpointError, match=r"step_000000000010.latest.pt is damaged.*without the parts"):
        Run.open(run.dir)
    assert run.rundir.run_json.read_text() == before


def test_summary_json_is_standard_json_with_nan_as_null(toy_pm: PluginManager, tmp_path: Path) -> None:
    """A diverged metric (nan) was written as a bare ``NaN``, which strict JSON readers (jq, JavaScript) refuse;
    it is ``null`` now, as in metrics.jsonl, and report still reads it as nan."""
    from contrastlab.experiments.results import load_run

    run = toy_run(tmp_path)
    run.finish({"eval/knn_acc": float("nan"), "train/loss": 1.5})
    text = (run.dir / "summary.json").read_text()

    def refuse(constant: str) -> None:
        raise ValueError(f"not standard JSON: {constant}")

    summary = json.loads(text, parse_constant=refuse)
    assert summary["metrics"] == {"eval/knn_acc": None, "train/loss": 1.5}
    record = load_run(run.dir)
    assert math.isnan(record.metrics["eval/knn_acc"]) and record.metrics["train/loss"] == 1.5


def test_running_out_of_gpu_memory_while_loading_is_not_called_damage(
    toy_pm: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint loaded to a busy GPU (map_location=cuda) can run out of memory: that was reported as "checkpoint
    ... is damaged" with the advice to move the newest checkpoint aside and lose its progress. Out of memory goes on
    as itself (platform train then saves the traceback and prints the --resume command)."""
    run = toy_run(tmp_path)
    run.save_checkpoint({"w": torch.ones(3)}, 10)
    run.close()

    def busy_gpu(*args: object, **kwargs: object) -> None:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(checkpoints.torch, "load", busy_gpu)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        checkpoints.CheckpointStore(run.rundir).load(map_location="cpu")


def test_a_checkpoint_that_needs_code_not_installed_is_not_called_damaged(
    toy_pm: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint pickling an object of a plugin's class unpickles only where that class still is (a plugin
    uninstalled, or a version that moved the class): that was reported as damage, with the advice to move the file
    aside. It is one line that names the missing code, with no such advice."""
    import sys
    import types

    module = types.ModuleType("contrastlab_gone_plugin")
    exec("class State:\n    pass\n", module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    run = toy_run(tmp_path)
    run.save_checkpoint({"w": torch.ones(3), "state": module.State()}, 10)
    run.close()
    monkeypatch.delitem(sys.modules, module.__name__)
    for load in (lambda: Run.open(run.dir), lambda: checkpoints.CheckpointStore(run.rundir).load()):
        with pytest.raises(checkpoints.CheckpointError) as info:
            load()
        message = str(info.value)
        assert "\n" not in message and "damaged" not in message and "move it" not in message, message
        assert "contrastlab_gone_plugin" in message and "version of the plugin that wrote it" in message, message


def test_an_interrupted_checkpoint_write_leaves_no_temporary_file(tmp_path, monkeypatch) -> None:
    """Ctrl-C or SIGTERM in the middle of ``torch.save`` (a run that stops at once: ``platform tune``'s, or a second
    signal) used to leave ``<checkpoint>.tmp``, as large as a checkpoint, in a run that may never be resumed."""
    def save_then_interrupt(obj, fh) -> None:
        fh.write(b"x" * 1000)
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints.torch, "save", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.atomic_torch_save({"w": torch.zeros(3)}, tmp_path / "step_1.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_interrupted_text_write_leaves_no_temporary_file(tmp_path, monkeypatch) -> None:
    """The same for ``run.json``/``summary.json``: an interruption between the write and the rename left ``.tmp``."""
    from contrastlab.platform import rundir

    def interrupt(src, dst) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(rundir.os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        rundir.write_text_atomic(tmp_path / "run.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_failed_save_with_a_side_file_keeps_exactly_the_previous_checkpoint(
    toy_pm: PluginManager, tmp_path: Path, monkeypatch
) -> None:
    """The side file is written first; when the checkpoint itself then fails, the new side file goes (no orphan as
    large as a replay buffer) and the previous checkpoint keeps its own, also when the failed save was of its step."""
    run = toy_run(tmp_path)
    run.save_checkpoint({"net": torch.ones(2), "buffer": torch.arange(10)}, 10, latest_only=["buffer"])
    real_save, files = torch.save, ["step_000000000010.latest.pt", "step_000000000010.pt"]

    def main_file_fails(obj, f, *args, **kwargs):
        return no_space(obj, f) if "net" in obj else real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", main_file_fails)
    for step in (20, 10):
        with pytest.raises(StorageError, match="step 10"):
            run.save_checkpoint({"net": torch.zeros(2), "buffer": torch.arange(step)}, step, latest_only=["buffer"])
        assert sorted(p.name for p in run.rundir.checkpoints.iterdir()) == files
        state = checkpoints.CheckpointStore(run.rundir).load()
        assert state is not None and torch.equal(state["net"], torch.ones(2)) and "buffer" in state


@pytest.mark.parametrize(("error", "shown"), [
    (OSError("the network share went away"), "the network share went away"),
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
])
def test_a_failed_write_says_why_in_plain_words(tmp_path: Path, monkeypatch, error: OSError, shown: str) -> None:
    """The reason is the OS's message (without ``[Errno N]``), or the error's text when it has no error number."""

    def fails(obj, f, *args, **kwargs):
        raise error

    monkeypatch.setattr(checkpoints.torch, "save", fails)
    with pytest.raises(StorageError) as info:
        checkpoints.atomic_torch_save({"w": torch.zeros(3)}, tmp_path / "step_1.pt")
    message = str(info.value)
    assert message == f"cannot write {tmp_path / 'step_1.pt'}: {shown}", message
    assert "None" not in message and "[Errno" not in message, message


def test_a_file_that_fails_to_close_is_not_put_in_place(tmp_path: Path, monkeypatch) -> None:
    """Some file systems (NFS, a full quota) report a failed write only when the file is closed: that checkpoint may
    be incomplete, so it must not replace the previous one."""
    target = tmp_path / "step_1.pt"
    checkpoints.atomic_torch_save({"w": torch.ones(3)}, target)
    good, real_open = target.read_bytes(), open

    class FailsOnClose:
        def __init__(self, fh):
            self.fh = fh

        def close(self):
            self.fh.close()
            raise OSError(errno.EIO, "Input/output error")

        def __getattr__(self, name):
            return getattr(self.fh, name)

    monkeypatch.setattr(checkpoints, "open", lambda path, mode="r": FailsOnClose(real_open(path, mode)), raising=False)
    with pytest.raises(StorageError, match="Input/output error"):
        checkpoints.atomic_torch_save({"w": torch.zeros(3)}, target)
    assert target.read_bytes() == good and sorted(p.name for p in tmp_path.iterdir()) == ["step_1.pt"]


def test_peek_returns_only_the_entries_the_newest_checkpoint_has(toy_pm: PluginManager, tmp_path: Path) -> None:
    """``peek`` reads the entries asked for that the newest checkpoint holds; one it lacks is left out (a checkpoint
    of an older version without a recorded log position), and without checkpoints the answer is empty."""
    run = toy_run(tmp_path)
    store = checkpoints.CheckpointStore(run.rundir)
    assert store.peek("w") == {}
    store.save({"w": torch.ones(3), "position": 7}, 10)
    store.save({"w": torch.full((3,), 2.0)}, 20)
    seen = store.peek("w", "position")
    assert set(seen) == {"w"} and torch.equal(seen["w"], torch.full((3,), 2.0))
