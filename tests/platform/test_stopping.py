"""Graceful stops: the first Ctrl-C/SIGTERM saves a checkpoint at the next checkpoint point, then the run ends."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

import contrastlab as cl
from contrastlab.platform.plugins import PluginManager
from contrastlab.platform.stopping import OPT_OUT_VARIABLE, GracefulStop
from contrastlab.testing import fresh_plugin_manager, run_cli
from contrastlab.testing import signal_self as deliver


def wait_for(lines: list[str], n: int) -> list[str]:
    """``lines`` once it has ``n`` entries (announcements come from the watcher thread, which must still be running:
    leaving the ``with`` block stops it). The deadline only bounds a failing test: a busy machine can hold the
    watcher back for a long while."""
    deadline = time.monotonic() + 60
    while len(lines) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return lines


class WatcherClock:
    """Stands in for the ``time`` module of :mod:`contrastlab.platform.stopping`: its clock moves only when the test
    sets :attr:`now`, so no delay of a loaded machine can end a grace period early; :meth:`sleep` (the watcher's
    poll) still sleeps for real and counts the watcher's rounds."""

    def __init__(self) -> None:
        self.now = 0.0
        self.polls = 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.polls += 1
        time.sleep(seconds)

    def wait_rounds(self, stop: GracefulStop, n: int = 2) -> None:
        """Return once the watcher has started ``n`` more polls (it then has checked the clock, as it is now, at
        least ``n - 1`` times) or has ended the grace period (``stop.expired``; it polls no more then)."""
        target, deadline = self.polls + n, time.monotonic() + 60
        while self.polls < target and not stop.expired:
            assert time.monotonic() < deadline, "the grace-period watcher stopped polling"
            time.sleep(0.01)


def test_first_signal_requests_a_stop_and_a_quick_repeat_is_the_same_request() -> None:
    lines: list[str] = []
    with GracefulStop(merge_s=60, announce=lines.append) as stop:
        assert stop.enabled and not stop.requested
        deliver(signal.SIGTERM)
        assert stop.requested and stop.saved_step is None
        deliver(signal.SIGINT)  # the terminal's Ctrl-C, then `platform compare` forwarding it
        assert stop.requested
        wait_for(lines, 1)  # inside the block: leaving it stops the watcher, announced or not
    assert len(lines) == 1
    assert lines[0].startswith("SIGTERM: stopping at the next checkpoint point to save the progress (at most 20 s)")


def test_a_later_second_signal_stops_at_once() -> None:
    with GracefulStop(merge_s=0) as stop:
        deliver(signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            deliver(signal.SIGINT)


@pytest.mark.parametrize("ctrl_c_ignored", [False, True])
def test_no_checkpoint_point_within_the_grace_period_stops_the_run(ctrl_c_ignored: bool) -> None:
    lines: list[str] = []
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if ctrl_c_ignored else signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), GracefulStop(grace_s=0.2, announce=lines.append) as stop:
            deliver(signal.SIGTERM)
            time.sleep(60)  # interrupted after the 0.2 s grace period (a generous bound for a busy machine)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stop.expired and stop.saved_step is None
    assert lines == ["SIGTERM: stopping at the next checkpoint point to save the progress (at most 0.2 s); the "
                     "signal again, 2 s or more later, stops now without it"]


@pytest.mark.parametrize(("code", "ignored"), [(130, True), (0, False), (2, False)])
def test_an_interrupted_platform_process_ignores_a_repeated_ctrl_c_while_it_exits(
    code: int, ignored: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A terminal's Ctrl-C pressed twice: the second one, arriving while the interrupted process shuts down, must
    not kill it by SIGINT (its parent would see "killed by a signal" instead of exit status 130)."""
    import importlib
    from types import SimpleNamespace

    cli_app = importlib.import_module("contrastlab.cli.app")  # the package exports the Typer object as `app`

    def exits() -> None:
        raise SystemExit(code)

    monkeypatch.setattr(cli_app, "app", exits)
    monkeypatch.setattr(cli_app, "get_plugin_manager", lambda: SimpleNamespace(register_commands=lambda app: None))
    previous = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as done:
            cli_app.main()
        assert done.value.code == code
        assert (signal.getsignal(signal.SIGINT) is signal.SIG_IGN) is ignored
    finally:
        signal.signal(signal.SIGINT, previous)


def toy_run(tmp_path: Path, steps: int = 40):
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    plugin = get_task_plugin("toy_clusters")
    config = resolve_config(plugin, loss="dcl", seed=3, sets=[f"train.steps={steps}", "checkpoint_every=10"])
    return Run.create(plugin, config, tmp_path)


def test_the_stops_checkpoint_is_not_cut_short_by_the_grace_period(toy_pm: PluginManager, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import contrastlab.platform.stopping as stopping
    from contrastlab.platform.checkpoints import CheckpointStore

    run = toy_run(tmp_path)
    save = CheckpointStore.save
    clock = WatcherClock()  # frozen from the signal to the save, however long a busy machine takes in between
    monkeypatch.setattr(stopping, "time", clock)

    def slow_save(self, *args, **kwargs):  # a large replay buffer: the write outlasts the grace period
        clock.now = 10.0  # far past the 0.2 s grace period ...
        clock.wait_rounds(stop)  # ... and the watcher has seen it
        return save(self, *args, **kwargs)

    monkeypatch.setattr(CheckpointStore, "save", slow_save)
    with GracefulStop(grace_s=0.2) as stop:
        run.graceful_stop = stop
        deliver(signal.SIGTERM)
        assert run.checkpoint_due(7)  # not a multiple of checkpoint_every: due because of the stop
        with pytest.raises(KeyboardInterrupt):
            run.save_checkpoint({"x": 1}, 7)
        clock.wait_rounds(stop)  # past the grace period, after the save: nothing more is raised
    assert stop.saved_step == 7 and not stop.expired and run.latest_checkpoint_step() == 7


def test_the_final_checkpoint_lets_a_stopped_run_finish(toy_pm: PluginManager, tmp_path: Path) -> None:
    run = toy_run(tmp_path)
    with GracefulStop() as stop:
        run.graceful_stop = stop
        deliver(signal.SIGINT)
        run.save_checkpoint({"x": 1}, 40, final=True)  # returns: the summary is moments away
    assert stop.saved_step is None and run.latest_checkpoint_step() == 40


def test_a_resumed_runs_summary_averages_the_clamp_fraction_over_the_whole_run(toy_pm: PluginManager,
                                                                               tmp_path: Path) -> None:
    from contrastlab.platform.run import CLAMP_TAG, Run

    run = toy_run(tmp_path)
    run.log({CLAMP_TAG: 0.2}, 10)
    run.save_checkpoint({"x": 1}, 10)
    run.log({CLAMP_TAG: 0.9}, 20)  # after the checkpoint: dropped on resume
    run.close()
    resumed = Run.open(run.dir)
    resumed.log({CLAMP_TAG: 0.4}, 20)
    summary = resumed.finish({})
    assert summary["metrics"][CLAMP_TAG] == pytest.approx(0.3)


def test_handlers_are_restored_on_exit() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with GracefulStop():
        assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before


@pytest.mark.parametrize("why", ["torchrun rank", "plugin not opted in", "opted out"])
def test_signals_stop_at_once_where_a_stop_checkpoint_is_not_wanted(why: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if why == "torchrun rank":
        monkeypatch.setenv("WORLD_SIZE", "2")
    if why == "opted out":  # what `platform tune` sets for its trials
        monkeypatch.setenv(OPT_OUT_VARIABLE, "0")
    with GracefulStop(wanted=why != "plugin not opted in") as stop:
        assert not stop.enabled
        with pytest.raises(KeyboardInterrupt):
            deliver(signal.SIGTERM)
        assert not stop.requested


class _SignalledToy:
    """The example plugin's task, sent SIGTERM (or ``signum``) by the process itself just before its checkpoint check
    at a step."""

    def __init__(self, at_step: int, opt_in: bool = True, signum: int = signal.SIGTERM) -> None:
        from contrastlab_toy.task import ToyTask

        class SignalledToy(ToyTask):
            name = "toy_signalled"
            checkpoint_on_stop = opt_in  # it logs single-step losses: nothing accumulates between checkpoints
            armed = True

            def train(self, config, run):
                check = run.checkpoint_due

                def signal_then_check(step: int) -> bool:
                    if SignalledToy.armed and step == at_step:
                        SignalledToy.armed = False
                        deliver(signum)
                    return check(step)

                run.checkpoint_due = signal_then_check
                return super().train(config, run)

        self.task = SignalledToy

    @cl.hookimpl
    def register_plugins(self, register) -> None:
        register(self.task)


def test_sigterm_saves_a_checkpoint_at_the_next_step_and_resume_reproduces_the_run(
    toy_pm: PluginManager, tmp_path: Path
) -> None:
    import contrastlab_toy.plugin

    args = ["--loss", "dcl", "--seed", "3", "--set", "train.steps=40", "--set", "checkpoint_every=10",
            "--set", "train.log_every=10"]
    code, out = run_cli(["train", "--plugin", "toy_clusters", "--logdir", str(tmp_path / "full"), *args])
    assert code == 0, out
    (full_dir,) = (tmp_path / "full").glob("*/*/*")
    full = json.loads((full_dir / "summary.json").read_text())["metrics"]

    handler_before = signal.getsignal(signal.SIGTERM)
    with fresh_plugin_manager(contrastlab_toy.plugin, _SignalledToy(at_step=13), package="contrastlab-toy"):
        code, out = run_cli(["train", "--plugin", "toy_signalled", "--logdir", str(tmp_path / "stopped"), *args])
        assert code == 143, out  # 128 + SIGTERM, as a shell reports `kill`, and as compare and tune exit
        assert "stopped after saving a checkpoint at step 13; continue with:" in out and "Traceback" not in out
        (run_dir,) = (tmp_path / "stopped").glob("*/*/*")
        info = json.loads((run_dir / "run.json").read_text())
        assert info["status"] == "interrupted" and info["last_checkpoint_step"] == 13
        assert sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt")) == [
            "step_000000000010.pt", "step_000000000013.pt"]
        assert signal.getsignal(signal.SIGTERM) == handler_before  # platform train put it back
        code, out = run_cli(["train", "--resume", str(run_dir)])
        assert code == 0, out
    resumed = json.loads((run_dir / "summary.json").read_text())["metrics"]
    same = [k for k in full if not any(w in k for w in ("time", "per_s", "wall"))]
    assert same and {k: resumed[k] for k in same} == pytest.approx({k: full[k] for k in same})
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
             if "train/loss" in line]
    assert steps == [10, 20, 30, 40]  # nothing logged twice, nothing lost


def test_an_ignored_ctrl_c_stays_ignored() -> None:
    """A run started with SIGINT ignored (``platform train ... &`` in a script) is not stopped by the terminal's
    Ctrl-C, as before; SIGTERM still stops it gracefully."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with GracefulStop() as stop:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            deliver(signal.SIGINT)
            assert not stop.requested
            deliver(signal.SIGTERM)
            assert stop.requested
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize(("at_step", "signum", "exit_code"), [(13, signal.SIGTERM, 143), (5, signal.SIGTERM, 143),
                                                             (13, signal.SIGINT, 130)])
def test_a_plugin_that_does_not_opt_in_stops_at_once_as_before(at_step: int, signum: int, exit_code: int,
                                                               toy_pm: PluginManager, tmp_path: Path) -> None:
    """It stops at once, with the exit code a shell gives the signal (143 for `kill`, 130 for Ctrl-C)."""
    import contrastlab_toy.plugin

    with fresh_plugin_manager(contrastlab_toy.plugin, _SignalledToy(at_step=at_step, opt_in=False, signum=signum),
                              package="contrastlab-toy"):
        code, out = run_cli(["train", "--plugin", "toy_signalled", "--logdir", str(tmp_path), "--set",
                             "train.steps=40", "--set", "checkpoint_every=10"])
    said = ("interrupted; continue with:" if at_step > 10 else
            "interrupted before its first checkpoint; --resume starts it again from the beginning; continue with:")
    assert code == exit_code and said in out and "stopping at" not in out, out
    (run_dir,) = tmp_path.glob("*/*/*")
    saved = [p.name for p in (run_dir / "checkpoints").glob("*.pt")] if (run_dir / "checkpoints").is_dir() else []
    assert saved == (["step_000000000010.pt"] if at_step > 10 else [])
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_summary_is_written_lets_the_run_complete(signum: int, toy_pm: PluginManager,
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The handlers went back before `Run.finish`: a SIGTERM there (a `platform compare` stopped as its run ended)
    killed the process beside its summary.json with run.json still "running"; a Ctrl-C marked it interrupted."""
    from contrastlab.platform.plugins import registry
    from contrastlab.platform.run import Run
    from contrastlab.testing import sigterm_must_be_handled

    finish = Run.finish

    def signalled_finish(self, metrics):
        deliver(signum)
        return finish(self, metrics)

    monkeypatch.setattr(Run, "finish", signalled_finish)
    monkeypatch.setattr(registry("plugin").get("toy_clusters").factory, "checkpoint_on_stop", True)  # as built-ins
    with sigterm_must_be_handled():
        code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=4",
                             "--logdir", str(tmp_path), "--run-name", "r"])
    assert code == 0, out
    assert "so the run finished instead" in out, out
    info = json.loads((tmp_path / "toy_clusters" / "dcl" / "r" / "run.json").read_text())
    assert info["status"] == "completed", info


def test_a_second_signal_merge_s_or_more_later_stops_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """As announced: "again, 2 s or more later, stops now" (earlier it is the same stop, delivered twice)."""
    import contrastlab.platform.stopping as stopping

    clock = WatcherClock()
    monkeypatch.setattr(stopping, "time", clock)
    with GracefulStop(merge_s=2.0) as stop:
        deliver(signal.SIGTERM)
        clock.now = 1.99
        deliver(signal.SIGINT)
        assert stop.requested
        clock.now = 2.0
        with pytest.raises(KeyboardInterrupt):
            deliver(signal.SIGINT)


def test_the_grace_period_lasts_grace_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The announced "at most grace_s": no checkpoint point reached grace_s after the signal stops the run."""
    import contrastlab.platform.stopping as stopping

    clock = WatcherClock()
    monkeypatch.setattr(stopping, "time", clock)
    with pytest.raises(KeyboardInterrupt), GracefulStop(grace_s=5.0) as stop:
        deliver(signal.SIGTERM)
        clock.now = 4.99
        clock.wait_rounds(stop)
        assert not stop.expired
        clock.now = 5.0
        clock.wait_rounds(stop)
        assert stop.expired
        time.sleep(60)  # interrupted by the watcher's SIGTERM (a generous bound for a busy machine)


def test_a_later_signal_still_stops_once_the_watchers_late_signal_was_absorbed() -> None:
    """The grace period ran out just as the stop's checkpoint began: the watcher's SIGTERM is ignored so the write
    finishes, and after it a user's second signal stops at once again (it is not swallowed as well)."""
    with GracefulStop(merge_s=0) as stop:
        deliver(signal.SIGTERM)
        stop.expired = True  # what the watcher sets just before it signals
        stop.hold()  # ... as the checkpoint starts
        deliver(signal.SIGTERM)  # the watcher's signal arrives: absorbed
        assert not stop.expired
        with pytest.raises(KeyboardInterrupt):
            deliver(signal.SIGINT)
