"""Ctrl-C for work running outside the main thread (``platform tune --parallel N``: Optuna runs trials in worker
threads, and only the main thread receives SIGINT).

* :func:`hook_interrupts` (on the main thread) chains a SIGINT handler that first tells that work to stop and
  waits for it, then raises :class:`KeyboardInterrupt` as usual.
* :func:`interruptible` wraps one piece of such work (a local trial's run, a Ray grid): it yields the event the
  hook sets, and lets the hook wait until the work has ended (and, optionally, been recorded).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

_INTERRUPTED = threading.Event()  # set by the SIGINT hook: work running in other threads stops
_ACTIVE = threading.Condition()  # guards _ACTIVE_RUNS, the pieces of work running outside the main thread
_ACTIVE_RUNS = [0]
_SETTLING: list[Callable[[], bool]] = []  # interrupted work's `settled` checks, guarded by _ACTIVE
_WIND_DOWN = 15.0  # seconds the SIGINT hook waits for that work to stop (and settle)


def hook_interrupts() -> None:
    """On the main thread, chain a SIGINT handler that first tells the work running in other threads (Ray grids,
    local trials) to stop, waiting up to 15 s for it to end and for its ``settled`` checks (see
    :func:`interruptible`), then does what the previous handler did (Python's raises :class:`KeyboardInterrupt`).
    Those threads never receive Ctrl-C themselves; without this, ``platform tune --parallel N`` would wait for
    their runs to finish. A no-op elsewhere, when SIGINT is ignored, or when the
    hook is already installed (it then only forgets an earlier Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)
    _INTERRUPTED.clear()
    if previous in (signal.SIG_IGN, None) or getattr(previous, "stops_other_threads", False):
        return

    def on_sigint(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        deadline = time.monotonic() + _WIND_DOWN
        with _ACTIVE:
            while time.monotonic() < deadline and (_ACTIVE_RUNS[0] or not all(_ran(s) for s in _SETTLING)):
                _ACTIVE.wait(0.05)
            _SETTLING.clear()
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    on_sigint.stops_other_threads = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, on_sigint)


def _ran(check: Callable[[], bool]) -> bool:
    try:
        return bool(check())
    except Exception:  # a check that cannot tell does not hold Ctrl-C up
        return True


@contextlib.contextmanager
def interruptible(settled: Callable[[], bool] | None = None) -> Iterator[threading.Event | None]:
    """Around one piece of work (a Ray grid, a local trial's run): outside the main thread, yields the event the
    SIGINT hook sets (the work must then stop and raise :class:`KeyboardInterrupt`) and lets the hook wait for it
    to end, and after an
    interrupt also until ``settled()`` is true (``platform tune``: until Optuna has recorded the interrupted trial,
    so that the main thread re-queues it after that). On the main thread, where Ctrl-C raises
    :class:`KeyboardInterrupt` directly, yields ``None``."""
    if threading.current_thread() is threading.main_thread():
        yield None
        return
    with _ACTIVE:
        _ACTIVE_RUNS[0] += 1
    try:
        yield _INTERRUPTED
    finally:
        with _ACTIVE:
            _ACTIVE_RUNS[0] -= 1
            if settled is not None and _INTERRUPTED.is_set():
                _SETTLING.append(settled)
            _ACTIVE.notify_all()
