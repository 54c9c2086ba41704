"""Ctrl-C for work running outside the main thread (``platform tune --parallel N``: Optuna runs trials in worker
threads, and only the main thread receives SIGINT).

* :func:`hook_interrupts` (on the main thread) chains a SIGINT handler that first tells that work to stop and
  waits for it, then raises :class:`KeyboardInterrupt` as usual.
* :func:`interruptible` wraps one piece of such work (a local trial's run, a Ray grid): it yields the event the
  hook sets, and lets the hook wait until the work has ended (and, optionally, been recorded).
* :func:`sigterm_as_interrupt` turns the first SIGTERM (``kill PID``) into the :class:`KeyboardInterrupt` of a
  Ctrl-C, so ``platform compare`` and ``platform tune`` stop their runs the same way and print the same hint.
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
        _wind_down_other_threads()
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    on_sigint.stops_other_threads = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, on_sigint)


def _wind_down_other_threads() -> None:
    """Tell the work running in other threads to stop, and wait up to 15 s for it to end and settle (a no-op
    when none runs)."""
    _INTERRUPTED.set()
    deadline = time.monotonic() + _WIND_DOWN
    with _ACTIVE:
        while time.monotonic() < deadline and (_ACTIVE_RUNS[0] or not all(_ran(s) for s in _SETTLING)):
            _ACTIVE.wait(0.05)
        _SETTLING.clear()


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


class Terminated(KeyboardInterrupt):
    """The first SIGTERM inside :func:`sigterm_as_interrupt`, raised where Ctrl-C raises KeyboardInterrupt."""


class TermState:
    """What :func:`sigterm_as_interrupt` yields: ``terminated`` is true once a SIGTERM arrived (code that catches
    the interrupt may re-raise a plain KeyboardInterrupt, so the exception's type is not enough to tell)."""

    def __init__(self) -> None:
        self.terminated = False

    @property
    def exit_code(self) -> int:
        """143 (128 + SIGTERM) after a SIGTERM, else 130 (128 + SIGINT), as a shell reports a killed process."""
        return 128 + int(signal.SIGTERM if self.terminated else signal.SIGINT)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[TermState]:
    """Within the block (on the main thread), the first SIGTERM raises :class:`Terminated`, a KeyboardInterrupt,
    so the clean-up of Ctrl-C runs (the runs are stopped, save and end ``interrupted``); a second SIGTERM does what
    the previous handler does (by default: end the process at once). Elsewhere, or when SIGTERM is ignored, the
    block runs unchanged."""
    state = TermState()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN:
        yield state
        return
    restore = signal.SIG_DFL if previous is None else previous

    def on_sigterm(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, restore)  # a second SIGTERM is not held up by the clean-up
        state.terminated = True
        _wind_down_other_threads()  # as Ctrl-C does: `platform tune --parallel N`'s worker threads stop first
        raise Terminated

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield state
    finally:
        signal.signal(signal.SIGTERM, restore)
