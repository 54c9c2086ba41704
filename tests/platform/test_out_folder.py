"""compare's output-folder lock: one compare per --out, also for compares started at the same moment."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contrastlab.experiments.out_folder import LOCK_FILE, LOCK_WRITE_S, acquire_lock
from contrastlab.platform.errors import ConfigError


def test_a_compare_that_takes_the_out_between_the_check_and_the_lock_keeps_it(tmp_path: Path, monkeypatch) -> None:
    """The lock was checked, then written: of compares started together (a shell loop with `&`), one that took the
    lock between another's check and write lost it to that other, and both ran the same runs in one --out."""
    out = tmp_path / "out"
    make_dir = Path.mkdir

    def other_compare_takes_it(self, *args, **kwargs):
        make_dir(self, *args, **kwargs)
        if self == out:
            (out / LOCK_FILE).write_text(str(os.getppid()))  # a live process that is not us

    monkeypatch.setattr(Path, "mkdir", other_compare_takes_it)
    with pytest.raises(ConfigError, match=f"another platform compare \\(pid {os.getppid()}\\)"):
        acquire_lock(out)
    assert (out / LOCK_FILE).read_text() == str(os.getppid())


def test_a_stale_lock_is_replaced_and_one_being_written_is_respected(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    lock = out / LOCK_FILE
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock.write_text(str(dead.pid))  # a compare that died
    assert acquire_lock(out) == lock and lock.read_text() == str(os.getpid())
    lock.write_text("")  # another compare between creating the lock and writing its pid
    with pytest.raises(ConfigError, match="another platform compare is starting there"):
        acquire_lock(out)
    old = time.time() - LOCK_WRITE_S - 5
    os.utime(lock, (old, old))  # empty for longer than a write takes: stale
    assert acquire_lock(out) == lock and lock.read_text() == str(os.getpid())


@pytest.mark.parametrize(("text", "refused"), [("1", True), ("4242", True), ("0", False), ("-3", False), ("x", False)])
def test_a_lock_refuses_only_for_a_positive_pid(tmp_path: Path, monkeypatch, text: str, refused: bool) -> None:
    """Any positive pid that is alive holds the out (pid 1 too: a compare in a container); ``0``, a negative number
    or text is no compare's pid (``kill(0, 0)`` would ask about this process group and always say alive)."""
    from contrastlab.experiments import out_folder, runner

    monkeypatch.setattr(runner, "pid_alive", lambda pid: True)
    monkeypatch.setattr(out_folder.os, "getpid", lambda: 999_999_999)  # pytest may itself be pid 1 (a container)
    (tmp_path / LOCK_FILE).write_text(text)
    if refused:
        with pytest.raises(ConfigError, match=f"pid {text}"):
            out_folder.refuse_busy_out(tmp_path)
    else:
        out_folder.refuse_busy_out(tmp_path)


def test_the_lock_makes_an_out_whose_parents_do_not_exist(tmp_path: Path) -> None:
    lock = acquire_lock(tmp_path / "a" / "b" / "out")
    assert lock == tmp_path / "a" / "b" / "out" / LOCK_FILE and lock.read_text() == str(os.getpid())
