"""Graceful stops: the first Ctrl-C or SIGTERM of a training run saves a checkpoint before the run ends.

Without this, a stopped run resumes from its last periodic checkpoint (50k frames apart in curl's ``paper``
preset). For a plugin that sets :attr:`~contrastlab.platform.task.TaskPlugin.checkpoint_on_stop`,
:class:`GracefulStop` turns the first SIGINT/SIGTERM into a *request*: :meth:`Run.checkpoint_due
<contrastlab.platform.run.Run.checkpoint_due>` then answers ``True`` at the plugin's next checkpoint point, and
:meth:`~contrastlab.platform.run.Run.save_checkpoint` ends the run as interrupted once that checkpoint is on disk.

* A second signal within ``merge_s`` of the first is the same stop arriving twice (the terminal signals the whole
  process group, then ``platform compare`` forwards Ctrl-C to its runs) and is ignored.
* A later second signal stops at once, without that checkpoint, as before (the previous checkpoint is kept).
* If no checkpoint is saved within ``grace_s`` (a long evaluation), the run stops at once as well, so whoever sent
  SIGTERM and waits to SIGKILL gets a clean ``interrupted`` run.
* Otherwise (plugins that do not opt in, ``CONTRASTLAB_CHECKPOINT_ON_STOP=0``, the ranks of a ``torchrun`` job,
  which would reach their checkpoint points at different steps and wait for each other) every signal stops at once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
OPT_OUT_VARIABLE = "CONTRASTLAB_CHECKPOINT_ON_STOP"
"""Set to ``0`` to stop at once on the first signal (``platform tune`` does for its trials' runs)."""


class GracefulStop:
    """Context manager installing the SIGINT/SIGTERM handlers of a training run (see the module docstring).

    ``wanted``: whether the plugin supports it (:attr:`TaskPlugin.checkpoint_on_stop`); ``announce`` receives one
    line when a stop is requested. The signal handler itself only records the time: a watcher thread, started on
    entering, announces the stop and enforces the grace period, so the handler never prints (it could interrupt a
    write to the same stream) nor starts threads or takes locks.
    """

    def __init__(self, *, wanted: bool = True, grace_s: float = 20.0, merge_s: float = 2.0,
                 announce: Callable[[str], None] | None = None, poll_s: float = 0.05) -> None:
        self.wanted = wanted and os.environ.get(OPT_OUT_VARIABLE, "1") != "0"
        self.grace_s = grace_s
        """Seconds to reach a checkpoint point after the first signal before stopping without one."""
        self.merge_s = merge_s
        """Signals this soon after the first count as the same request."""
        self.announce = announce or (lambda line: None)
        self.poll_s = poll_s
        self.enabled = False
        """Whether signals are deferred (wanted, single process, main thread); set on entering."""
        self.requested_at: float | None = None
        self.saved_step: int | None = None
        """The step of the checkpoint saved because of the stop, once it is on disk."""
        self.expired = False
        """Whether the grace period ran out before a checkpoint was saved (the run then stopped without one)."""
        self._signum = signal.SIGTERM
        self.signum: int | None = None
        """The first stop signal received (``signal.SIGINT`` or ``SIGTERM``), or ``None``: the exit code is
        ``128 + signum`` (130 for Ctrl-C, 143 for ``kill``), as a shell reports a killed process."""
        self._held = False
        self._closing = False
        self._watcher: threading.Thread | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """Whether a stop has been requested (the next checkpoint point saves and ends the run)."""
        return self.requested_at is not None

    def __enter__(self) -> GracefulStop:
        on_main = threading.current_thread() is threading.main_thread()
        self.enabled = self.wanted and on_main and int(os.environ.get("WORLD_SIZE", "1")) <= 1
        if on_main:
            for signum in _SIGNALS:
                if signal.getsignal(signum) is signal.SIG_IGN and signum == signal.SIGINT:
                    continue  # started with Ctrl-C ignored (`cmd &` in a script): keep ignoring it
                self._previous[signum] = signal.signal(signum, self._on_signal if self.enabled else self._stop_now)
        if self.enabled:
            self._watcher = threading.Thread(target=self._watch, name="graceful-stop", daemon=True)
            self._watcher.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.hold()
        self._closing = True
        if self._watcher is not None:
            self._watcher.join()  # a signal it sent is handled here (and ignored: held) before the handlers go back
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _stop_now(self, signum: int, frame: FrameType | None) -> None:
        """A plugin without checkpoint-on-stop: stop at once."""
        self.signum = self.signum or signum
        raise KeyboardInterrupt

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signum = self.signum or signum
        if self.expired:  # the grace period ran out: the watcher signalled us
            if self._held:
                self.expired = False
                return  # ... just as the stop's checkpoint began (or the run ended): let it finish
            raise KeyboardInterrupt
        now = time.monotonic()
        if self.requested_at is None:
            self.requested_at, self._signum = now, signum
            return
        if now - self.requested_at < self.merge_s:
            return  # the same stop, delivered twice
        raise KeyboardInterrupt

    def _watch(self) -> None:
        announced = False
        while not self._closing:
            time.sleep(self.poll_s)
            if self.requested_at is None or self._held:
                continue
            if not announced:
                announced = True
                again = "Ctrl-C" if self._signum == signal.SIGINT else "the signal"
                self.announce(f"{signal.Signals(self._signum).name}: stopping at the next checkpoint point to save "
                              f"the progress (at most {self.grace_s:g} s); {again} again, {self.merge_s:g} s or more "
                              "later, stops now without it")
            if time.monotonic() - self.requested_at >= self.grace_s:
                self.expired = True
                os.kill(os.getpid(), signal.SIGTERM)  # our handler runs on the main thread (SIGINT may be ignored)
                return

    def hold(self) -> None:
        """End the grace period (called when the stop's checkpoint starts, so the write is not cut short)."""
        self._held = True
