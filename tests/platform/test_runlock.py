"""The training lock of a run (``platform.runlock``): where it cannot be taken, and when it is given back."""

from __future__ import annotations

import errno
import fcntl
import json
from pathlib import Path

import pytest

from contrastlab.platform.plugins import PluginManager
from contrastlab.testing import run_cli


def _train_toy(tmp_path: Path, *extra: str) -> tuple[int, str]:
    return run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=4",
                    "--logdir", str(tmp_path), "--run-name", "x", *extra])


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS])
def test_a_file_system_without_flock_trains_unlocked(
    toy_pm: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """Some file systems (Lustre without ``-o flock``, some network mounts) answer ``flock`` with ENOLCK, EOPNOTSUPP
    or ENOSYS. Every ``platform train`` there was refused as "being trained by another process (pid unknown)",
    leaving the new run directory behind, and ``platform eval`` said every unfinished run was being trained. Only
    a lock held by another process refuses; elsewhere nothing is locked, as where ``fcntl`` is missing."""

    def no_flock(fd: object, operation: int) -> None:
        raise OSError(code, "locking not supported")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    status, out = _train_toy(tmp_path)
    assert status == 0 and "another process" not in out, out
    run_dir = tmp_path / "toy_clusters" / "dcl" / "x"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "completed"
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "running", "progress": 0.5}))
    status, out = run_cli(["eval", str(run_dir)])
    text = " ".join(out.split())
    assert status == 0 and "being trained now" not in text and "no process is training it: killed?" in text, out
    status, out = run_cli(["train", "--resume", str(run_dir)])
    assert status == 0 and "another process" not in out, out


def test_a_refused_reopen_gives_the_lock_back(toy_pm: PluginManager, tmp_path: Path) -> None:
    """Python API: ``Run.open`` of a run whose newest checkpoint is damaged raises after it took the run's lock,
    and no Run is returned to close: the lock stayed with the process for its lifetime, so a ``platform train
    --resume`` from another process (once the file was moved aside) was refused as "being trained"."""
    from contrastlab.platform.errors import CheckpointError
    from contrastlab.platform.run import Run

    status, out = _train_toy(tmp_path, "--set", "checkpoint_every=2")
    assert status == 0, out
    run_dir = tmp_path / "toy_clusters" / "dcl" / "x"
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "interrupted"}))
    (newest,) = sorted((run_dir / "checkpoints").glob("step_*.pt"))[-1:]
    newest.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError):
        Run.open(run_dir)
    with open(run_dir / ".train.lock", "a+") as other:  # another process's attempt (flock: per open file)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while the lock leaked
        fcntl.flock(other, fcntl.LOCK_UN)


def test_a_reopen_that_fails_keeps_a_lock_the_process_held_before(toy_pm: PluginManager, tmp_path: Path) -> None:
    """A failed ``Run.open`` gives back only a lock it took itself: a run this process is training stays locked."""
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.errors import CheckpointError
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    plugin = get_task_plugin("toy_clusters")
    run = Run.create(plugin, resolve_config(plugin, loss="dcl", sets=["train.steps=20"], device="cpu"), tmp_path)
    run.save_checkpoint({}, 10)
    run.rundir.checkpoint(10).write_bytes(b"damaged")
    with pytest.raises(CheckpointError):
        Run.open(run.dir)
    with open(run.dir / ".train.lock", "a+") as other, pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    run.close()


def test_a_holder_that_wrote_no_pid_is_not_named_in_a_kill_command(toy_pm: PluginManager, tmp_path: Path) -> None:
    """The holder writes its pid just after taking the lock: a refusal in between said "stop it (kill unknown)"."""
    status, out = _train_toy(tmp_path)
    assert status == 0, out
    run_dir = tmp_path / "toy_clusters" / "dcl" / "x"
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "interrupted"}))
    with open(run_dir / ".train.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.truncate(0)
        status, out = run_cli(["train", "--resume", str(run_dir)])
    assert status == 2 and len(out.strip().splitlines()) == 1, out
    assert "(pid unknown)" in out and "kill" not in out and "stop it and resume then" in " ".join(out.split()), out


def test_a_holder_on_another_machine_is_named_with_its_host(toy_pm: PluginManager, tmp_path: Path) -> None:
    """On a shared file system (a cluster, Ray workers) the lock's holder may run on another machine: the refusal
    said "kill 4242", a pid of this machine, and had no way out when that machine had crashed and the network file
    system still held its lock. The lock file records the host; the refusal names it and the file to delete then."""
    import socket

    status, out = _train_toy(tmp_path)
    assert status == 0, out
    run_dir = tmp_path / "toy_clusters" / "dcl" / "x"
    assert (run_dir / ".train.lock").read_text().split()[1:] == [socket.gethostname()]
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "running"}))
    with open(run_dir / ".train.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.truncate(0)
        held.write("4242 node-elsewhere")
        held.flush()
        status, out = run_cli(["train", "--resume", str(run_dir)])
        text = " ".join(out.split())
        assert status == 2 and len(out.strip().splitlines()) == 1, out
        assert "(pid 4242 on host node-elsewhere)" in text and "stop it there (kill 4242)" in text, out
        assert f"delete {run_dir / '.train.lock'}" in text, out
        status, out = run_cli(["eval", str(run_dir)])
        assert status == 0 and "another process (pid 4242 on host node-elsewhere)" in " ".join(out.split()), out
        held.truncate(0)
        held.write(f"4242 {socket.gethostname()}")  # this machine: no host named
        held.flush()
        status, out = run_cli(["train", "--resume", str(run_dir)])
        assert "(pid 4242); wait for it to end, or stop it (kill 4242) and resume then" in " ".join(out.split()), out


def test_closing_another_run_object_of_the_run_keeps_the_lock(toy_pm: PluginManager, tmp_path: Path) -> None:
    """Python API: the process's lock was given back by whichever Run of the run directory closed first, so a
    ``Run.open(run.dir, resume=False)`` made to evaluate a run in training, once closed, let another process's
    ``--resume`` start on it. A Run gives back only a lock it took, once no other Run that took it is open."""
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    plugin = get_task_plugin("toy_clusters")
    run = Run.create(plugin, resolve_config(plugin, loss="dcl", sets=["train.steps=20"], device="cpu"), tmp_path)
    run.save_checkpoint({}, 10)
    Run.open(run.dir, resume=False).close()  # an evaluation's Run
    again = Run.open(run.dir)  # the same process reopening it: shares the lock
    again.close()
    with open(run.dir / ".train.lock", "a+") as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        run.close()  # the last Run that took it
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


class _Owner:
    """Stands for a Run (the lock keeps weak references to its owners)."""


def test_the_lock_file_names_this_process_and_host_and_the_first_taker_owns_it(tmp_path: Path) -> None:
    """``lock_run`` answers whether this call took the lock; the file then holds exactly ``<pid> <host>``, even
    over what an earlier holder wrote; a second owner shares it, and it is given back when the last one releases."""
    import os
    import socket

    from contrastlab.platform.runlock import lock_run, release_run, training_pid

    (tmp_path / ".train.lock").write_text("999999 some-old-host-name")
    first, second = _Owner(), _Owner()  # two Runs of this process
    try:
        assert lock_run(tmp_path, first) is True
        assert (tmp_path / ".train.lock").read_text() == f"{os.getpid()} {socket.gethostname()}"
        assert lock_run(tmp_path, second) is False  # shared, not taken again
        assert training_pid(tmp_path) is None  # this process is not "another process"
        release_run(tmp_path, first)
        with open(tmp_path / ".train.lock", "a+") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # still held for the second
    finally:
        release_run(tmp_path, first)
        release_run(tmp_path, second)
    with open(tmp_path / ".train.lock", "a+") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # given back
    assert training_pid(tmp_path) is None  # a lock file nobody holds: nobody is training


def test_where_flock_fails_nothing_is_locked_and_nobody_is_seen_training(tmp_path: Path, monkeypatch) -> None:
    from contrastlab.platform.runlock import lock_run, release_run, training_pid

    def no_flock(fd: object, operation: int) -> None:
        raise OSError(errno.ENOLCK, "locking not supported")

    owner = object()
    (tmp_path / ".train.lock").write_text("4242 elsewhere")
    monkeypatch.setattr(fcntl, "flock", no_flock)
    assert lock_run(tmp_path, owner) is False and training_pid(tmp_path) is None
    release_run(tmp_path, owner)  # took nothing, gives nothing back


def test_without_fcntl_nothing_is_locked(tmp_path: Path, monkeypatch) -> None:
    """Windows: no ``fcntl``; runs train unlocked and none is seen as trained by another process."""
    from contrastlab.platform import runlock

    (tmp_path / ".train.lock").write_text("4242 elsewhere")
    monkeypatch.setattr(runlock, "fcntl", None)
    assert runlock.lock_run(tmp_path, object()) is False and runlock.training_pid(tmp_path) is None
    assert str(tmp_path.resolve()) not in runlock._HELD  # (other tests' runs in this process may hold theirs)
