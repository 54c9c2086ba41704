"""Ctrl-C and SIGTERM for work outside the main thread (:mod:`contrastlab.experiments.interrupts`), unit by unit;
the end-to-end cases (tune, compare) are in ``tests/platform`` (found by a mutation audit)."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from contrastlab.experiments import interrupts as it


@pytest.fixture
def fresh_state():
    """Each test starts with no active work, no Ctrl-C and the SIGINT/SIGTERM handlers it found."""
    sigint, sigterm = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    it._INTERRUPTED.clear()
    it._SETTLING.clear()
    yield
    signal.signal(signal.SIGINT, sigint)
    signal.signal(signal.SIGTERM, sigterm)
    it._INTERRUPTED.clear()
    it._SETTLING.clear()
    assert it._ACTIVE_RUNS[0] == 0


def in_thread(body) -> threading.Thread:
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def test_interruptible_yields_none_on_the_main_thread_and_the_event_elsewhere(fresh_state):
    with it.interruptible() as event:
        assert event is None and it._ACTIVE_RUNS[0] == 0
    seen = []

    def work():
        with it.interruptible() as event:
            seen.append((event, it._ACTIVE_RUNS[0]))
        seen.append(it._ACTIVE_RUNS[0])

    in_thread(work).join(5)
    assert seen == [(it._INTERRUPTED, 1), 0]


def test_wind_down_waits_for_the_work_to_stop_and_settle(fresh_state):
    """The hook sets the event, then waits until the work has ended and its ``settled`` check is true."""
    started, settled, ended = threading.Event(), [False], []

    def settle():
        time.sleep(0.3)
        settled[0] = True

    def work():
        with it.interruptible(settled=lambda: settled[0]) as event:
            started.set()
            event.wait(10)
            time.sleep(0.3)  # stopping takes a while
            ended.append(time.monotonic())
        in_thread(settle)

    worker = in_thread(work)
    assert started.wait(5)
    t0 = time.monotonic()
    it._wind_down_other_threads()
    waited = time.monotonic() - t0
    worker.join(5)
    assert ended and settled[0] and not worker.is_alive()
    assert 0.5 <= waited < 5 and it._SETTLING == []


def test_wind_down_returns_at_once_without_work_and_a_broken_check_does_not_hold_it(fresh_state):
    t0 = time.monotonic()
    it._wind_down_other_threads()
    assert time.monotonic() - t0 < 1 and it._INTERRUPTED.is_set()

    def broken():
        raise RuntimeError("cannot tell")

    with it._ACTIVE:
        it._SETTLING.append(broken)
    t0 = time.monotonic()
    it._wind_down_other_threads()
    assert time.monotonic() - t0 < 1


def test_settled_is_only_waited_for_after_an_interrupt(fresh_state):
    done = []

    def work():
        with it.interruptible(settled=lambda: False):
            pass
        done.append(True)

    in_thread(work).join(5)
    assert done and it._SETTLING == []


def test_the_sigint_hook_chains_once_and_not_over_an_ignored_sigint(fresh_state):
    calls = []

    def previous(signum, frame):
        calls.append(signum)

    signal.signal(signal.SIGINT, previous)
    it._INTERRUPTED.set()
    it.hook_interrupts()
    hook = signal.getsignal(signal.SIGINT)
    assert hook is not previous and hook.stops_other_threads and not it._INTERRUPTED.is_set()
    it.hook_interrupts()  # installed already: not chained a second time
    assert signal.getsignal(signal.SIGINT) is hook
    hook(signal.SIGINT, None)
    assert calls == [signal.SIGINT] and it._INTERRUPTED.is_set()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    it.hook_interrupts()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_the_sigint_hook_raises_keyboard_interrupt_over_the_default_action(fresh_state):
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    it.hook_interrupts()
    with pytest.raises(KeyboardInterrupt):
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)


def test_sigterm_as_interrupt_raises_terminated_once_and_restores_the_handler(fresh_state):
    def previous(signum, frame):
        pass

    signal.signal(signal.SIGTERM, previous)
    with it.sigterm_as_interrupt() as state:
        assert state.exit_code == 130
        handler = signal.getsignal(signal.SIGTERM)
        with pytest.raises(it.Terminated):
            handler(signal.SIGTERM, None)
        assert state.terminated and state.exit_code == 143
        assert signal.getsignal(signal.SIGTERM) is previous  # a second SIGTERM is not held up
    assert signal.getsignal(signal.SIGTERM) is previous
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with it.sigterm_as_interrupt() as state:
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN and state.exit_code == 130
