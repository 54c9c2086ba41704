"""The output folder of ``platform compare``: one comparison at a time, of one plugin, outside any run."""

from __future__ import annotations

import os
import time
from pathlib import Path

from contrastlab.experiments import runner
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.rundir import RunDir

__all__ = ["LOCK_FILE", "acquire_lock", "refuse_busy_out", "refuse_inside_a_run", "refuse_other_plugin"]

LOCK_FILE = ".compare.lock"
"""Holds the pid of the ``platform compare`` running in an ``OUT``."""

LOCK_WRITE_S = 10.0
"""A lock file without a pid younger than this is a compare writing it, not a stale one."""


def refuse_busy_out(out: Path) -> None:
    """Refuse an ``OUT`` whose lock file names another live ``platform compare``."""
    lock = out / LOCK_FILE
    if lock.is_file():
        try:
            pid = int(lock.read_text().strip())
        except ValueError:
            pid = -1
        if pid > 0 and pid != os.getpid() and runner.pid_alive(pid):
            raise ConfigError(f"--out {out}: another platform compare (pid {pid}) is running there")


def refuse_other_plugin(out: Path, plugin: str) -> None:
    """Refuse an ``OUT`` whose ``compare.json`` records a comparison of another plugin: this grid's
    ``compare.json``, tables and plots would silently replace that comparison's (its runs would stay, its results
    would be gone until its own command ran again)."""
    held = (runner.read_json(out / "compare.json") or {}).get("plugin")
    if isinstance(held, str) and held != plugin:
        raise ConfigError(
            f"--out {out} holds a {held} comparison (its compare.json); a {plugin} comparison there would replace "
            f"its results: choose another --out (`platform report DIR1 DIR2 --out DIR` tabulates both)"
        )


def acquire_lock(out: Path) -> Path:
    """Refuse to run two ``platform compare`` in the same ``OUT`` at once; returns the lock file (holding this pid).

    The lock is created exclusively (``O_EXCL``), so of two compares started at the same moment (a shell loop with
    ``&``) only one gets it; a lock whose pid is gone (a compare that died) is replaced. A lock still without a pid
    is another compare between creating and writing it, unless it is older than ``LOCK_WRITE_S``."""
    refuse_busy_out(out)
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_FILE
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            refuse_busy_out(out)  # a live compare holds it
            try:
                written, age = lock.read_text().strip(), time.time() - lock.stat().st_mtime
            except OSError:  # removed meanwhile: try again
                continue
            if not written and age < LOCK_WRITE_S:
                break
            lock.unlink(missing_ok=True)  # stale
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))
        return lock
    raise ConfigError(f"--out {out}: another platform compare is starting there")


def refuse_inside_a_run(out: Path) -> None:
    """Refuse an ``OUT`` that is a run directory of ``platform train`` or lies inside one: the grid's runs, tables
    and logs would be written among that run's files (``platform report`` refuses such an ``--out`` too)."""
    folder = RunDir.run_holding(Path(out).resolve())
    if folder is not None:
        raise ConfigError(f"--out {out} is inside the run directory {folder}; choose a folder outside it, "
                          "e.g. --out compare/")
