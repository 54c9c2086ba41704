"""One process trains a run at a time.

The process that creates or resumes a run takes an exclusive ``flock`` on the run's ``.train.lock`` (and writes its
pid and host there: on a shared file system it may run on another machine) before it writes anything else; a
``platform train --resume`` of a run that another live process is training is refused in one line instead of both
processes writing the same checkpoints and logs. The operating system drops the lock when its process ends, however
it ends (SIGKILL), so a killed run resumes as before; a network file system may keep the lock of a machine that
crashed until it comes back, and the refusal then names the file to delete. The lock is the process's, not the
:class:`~contrastlab.platform.run.Run` object's: the same process may reopen a run it holds (the Python API, tests),
and the lock is given back when the last Run that took it closes (a Run made to evaluate, ``resume=False``, takes
none and gives none back). Where ``fcntl`` is missing (Windows), or the file system does not lock (``flock`` answers
ENOLCK, EOPNOTSUPP, ENOSYS: Lustre without ``-o flock``, some network mounts), nothing is locked.
"""

from __future__ import annotations

import os
import socket
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from contrastlab.platform.errors import RunDirError
from contrastlab.platform.rundir import RunDir

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_HELD: dict[str, tuple[IO[str], weakref.WeakSet[Any]]] = {}
"""The lock files this process holds, by resolved run directory, with the objects (Runs) that took them."""


def lock_run(run_dir: Path | str, owner: Any) -> bool:
    """Take the training lock of ``run_dir`` for this process, on behalf of ``owner`` (a Run); ``False`` when the
    process held it already (``owner`` then shares it) or nothing can be locked here. Another live process holding
    it raises :class:`RunDirError` naming its pid, before anything in the run is touched."""
    layout = RunDir(run_dir)
    key = str(layout.path.resolve())
    if fcntl is None:
        return False
    if key in _HELD:
        _HELD[key][1].add(owner)
        return False
    handle = open(layout.train_lock, "a+", encoding="utf-8")  # noqa: SIM115 - held open until release_run
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # EWOULDBLOCK: another open file of it holds the lock
        handle.seek(0)
        holder, stop = _holder(handle.read(), layout.train_lock)
        handle.close()
        raise RunDirError(f"run {run_dir} is being trained by another process (pid {holder}); wait for it to end, or "
                          f"{stop} and resume then") from None
    except OSError:  # this file system does not lock: train unlocked, as without fcntl
        handle.close()
        return False
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()} {socket.gethostname()}")
    handle.flush()
    _HELD[key] = (handle, weakref.WeakSet([owner]))
    return True


def release_run(run_dir: Path | str, owner: Any) -> None:
    """``owner`` no longer needs the training lock of ``run_dir``: the process gives it back (the file stays,
    unlocked) once no object that took it is left (one that took none, such as an evaluation's Run, changes
    nothing)."""
    key = str(Path(run_dir).resolve())
    entry = _HELD.get(key)
    if entry is None:
        return
    entry[1].discard(owner)
    if not entry[1]:
        del _HELD[key]
        entry[0].close()


@contextmanager
def locked_unless_failed(run_dir: Path | str, owner: Any) -> Iterator[None]:
    """:func:`lock_run` for the block; an exception in it drops ``owner``'s claim (a run that was never handed to a
    caller cannot be closed, so its lock stayed with the process), which keeps a lock other Runs took before."""
    lock_run(run_dir, owner)
    try:
        yield
    except BaseException:
        release_run(run_dir, owner)
        raise


def training_pid(run_dir: Path | str) -> str | None:
    """The pid of another live process training ``run_dir`` (holding its lock; ``4242 on host node7`` when it runs
    on another machine), or ``None`` when none is: a run whose ``run.json`` still says ``running`` with no holder was
    killed outright (SIGKILL, power loss)."""
    layout = RunDir(run_dir)
    if fcntl is None or str(layout.path.resolve()) in _HELD or not layout.train_lock.is_file():
        return None
    with open(layout.train_lock, encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(handle.read(), layout.train_lock)[0]
        except OSError:  # a file system that does not lock: nobody can be seen training
            return None
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def _holder(text: str, lock: Path) -> tuple[str, str]:
    """The holder a lock file's ``<pid> <host>`` names (``4242``, ``4242 on host node7`` for another machine,
    ``unknown`` before it wrote them) and how to stop it."""
    pid, _, host = text.strip().partition(" ")
    if not pid:
        return "unknown", "stop it"
    if host and host != socket.gethostname():  # a network file system may keep a crashed machine's lock
        return f"{pid} on host {host}", f"stop it there (kill {pid}); if {host} is down, delete {lock}"
    return pid, f"stop it (kill {pid})"
