"""The process-pool runner: resume skip, resume of unfinished runs, failure capture, one process per device.

A fake ``platform train`` (a small Python script) stands in for the real one, so these tests take seconds.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from contrastlab.experiments import grid as cmp
from contrastlab.experiments import runner

FAKE_TRAIN = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    argv = sys.argv[1:]
    with open(os.environ["FAKE_CALLS"], "a") as fh:
        fh.write(json.dumps(argv) + "\\n")
    import signal
    # Ctrl-C raises KeyboardInterrupt, as in a run started from a terminal, also when pytest itself was started
    # with SIGINT ignored (a background job of a script), which its children would inherit
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get("FAKE_STOP_DELAY"):  # a run that takes a while to stop (saving its checkpoint)
        def on_ctrl_c(signum, frame):
            with open(os.environ["FAKE_CALLS"] + ".stops", "a") as fh:
                fh.write(f"{time.time()}\\n")
            time.sleep(float(os.environ["FAKE_STOP_DELAY"]))
            sys.exit(130)
        if os.environ.get("FAKE_STOP_SIGNAL") == "SIGTERM":  # started with `&` from a script: SIGINT ignored
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, on_ctrl_c)
        else:
            signal.signal(signal.SIGINT, on_ctrl_c)
    with open(os.environ["FAKE_CALLS"] + ".ready", "a") as fh:  # started, its signal handlers in place
        fh.write("ready\\n")
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    def opt(name):
        return argv[argv.index(name) + 1] if name in argv else None
    if "--resume" in argv:
        run_dir = Path(opt("--resume"))
        info = json.loads((run_dir / "run.json").read_text())
    else:
        plugin, loss, seed = opt("--plugin"), opt("--loss"), int(opt("--seed"))
        if os.environ.get("FAKE_FAIL_EARLY") == f"{loss}:{seed}":
            print("error: ValueError: boom before the run directory", file=sys.stderr)
            sys.exit(2)
        run_dir = Path(opt("--logdir")) / plugin / loss / opt("--run-name")
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text(f"seed: {seed}\\n")
        info = {"plugin": plugin, "loss": loss, "seed": seed, "preset": opt("--preset"),
                "overrides": [f"--set {argv[i + 1]}" for i, a in enumerate(argv) if a == "--set"],
                "status": "running", "error": None}
        if os.environ.get("FAKE_FAIL_LATE") == f"{loss}:{seed}":
            info.update(status="failed", error="RuntimeError: diverged at step 3")
            (run_dir / "run.json").write_text(json.dumps(info))
            sys.exit(1)
    with open(run_dir / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"step": 1, "wall_time": 0.1, "eval/score": 0.5}) + "\\n")
    summary = {"plugin": info["plugin"], "loss": info["loss"], "seed": info["seed"], "metrics": {"score": 0.5},
               "primary_metric": "score", "higher_is_better": True, "device": opt("--device")}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    info["status"] = "completed"
    (run_dir / "run.json").write_text(json.dumps(info))
    """
)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_CALLS", str(calls))

    def read_calls() -> list[list[str]]:
        out = [json.loads(x) for x in calls.read_text().splitlines()] if calls.exists() else []
        calls.unlink(missing_ok=True)
        return out

    return [sys.executable, str(script)], read_calls


def grid() -> list[cmp.GridPoint]:
    return cmp.expand_grid(
        "toy",
        ["a", "b"],
        [1, 2],
        preset="smoke",
        axes=[cmp.parse_grid("loss.t=0.1")],
        hparams_of=lambda loss: {"t"} if loss == "b" else set(),
    )


def quiet() -> Console:
    return Console(file=open("/dev/null", "w"), force_terminal=False)


def interrupt_when_both_run(monkeypatch: pytest.MonkeyPatch, exc: type[BaseException]) -> list[float]:
    """Patch ``time.sleep`` so that the runner's poll raises ``exc`` once, as soon as both fake runs have started
    and installed their signal handlers (their ``.ready`` lines): on a busy machine starting a Python process can
    take seconds, and a signal that arrives earlier kills a fake run before it records anything. After 120 s it
    interrupts anyway (the test then fails on its checks). Returns a list that gets the monotonic time of the
    interrupt."""
    import os
    import time

    real_sleep, ready = time.sleep, Path(os.environ["FAKE_CALLS"] + ".ready")
    deadline, interrupted = time.monotonic() + 120, []

    def sleep(seconds: float) -> None:
        if not interrupted:
            up = ready.read_text().count("ready") if ready.exists() else 0
            if up >= 2 or time.monotonic() > deadline:
                interrupted.append(time.monotonic())
                raise exc
        real_sleep(min(seconds, 0.1))

    monkeypatch.setattr(time, "sleep", sleep)
    return interrupted


def test_failure_does_not_stop_others_and_rerun_skips_finished(tmp_path, fake, monkeypatch):
    base, calls = fake
    out = tmp_path / "out"
    points = grid()
    monkeypatch.setenv("FAKE_FAIL_EARLY", "a:2")
    monkeypatch.setenv("FAKE_FAIL_LATE", "b:1")
    results = runner.run_grid(points, out, slots=[None, None], base=base, console=quiet(), poll=0.05)
    assert [r.status for r in results] == ["completed", "failed", "failed", "completed"]
    assert len(calls()) == 4
    early, late = results[1], results[2]
    assert early.error == "error: ValueError: boom before the run directory"
    info = json.loads((early.run_dir / "run.json").read_text())
    assert info["status"] == "failed" and info["placeholder"] and info["loss"] == "a" and info["seed"] == 2
    assert late.error == "RuntimeError: diverged at step 3"
    assert (late.run_dir / runner.ERROR_FILE).read_text().strip() == late.error
    assert (out / "logs" / "toy" / "a" / f"{points[1].run_name}.log").read_text().count("boom") == 1

    # Repeat: the two finished runs are skipped; the early failure starts fresh, the late one resumes.
    monkeypatch.delenv("FAKE_FAIL_EARLY")
    monkeypatch.delenv("FAKE_FAIL_LATE")
    results = runner.run_grid(points, out, slots=[None], base=base, console=quiet(), poll=0.05)
    assert [r.status for r in results] == ["skipped", "completed", "completed", "skipped"]
    again = calls()
    assert len(again) == 2
    assert again[0][:2] == ["train", "--plugin"] and again[0][again[0].index("--run-name") + 1] == points[1].run_name
    assert again[1] == ["train", "--resume", str(points[2].run_dir(out))]
    assert not (points[2].run_dir(out) / runner.ERROR_FILE).exists()
    assert "placeholder" not in json.loads((points[1].run_dir(out) / "run.json").read_text())

    # A third time: nothing runs at all.
    results = runner.run_grid(points, out, slots=[None], base=base, console=quiet(), poll=0.05)
    assert {r.status for r in results} == {"skipped"} and calls() == []


def test_one_process_per_device(tmp_path, fake, monkeypatch):
    base, calls = fake
    monkeypatch.setenv("FAKE_SLEEP", "0.3")
    points = grid()
    results = runner.run_grid(
        points, tmp_path / "out", slots=["cuda:0", "cuda:1"], base=base, console=quiet(), poll=0.02
    )
    assert all(r.status == "completed" for r in results)
    devices = [c[c.index("--device") + 1] for c in calls()]
    assert sorted(devices) == ["cuda:0", "cuda:0", "cuda:1", "cuda:1"]
    used = {json.loads((r.run_dir / "summary.json").read_text())["device"] for r in results}
    assert used == {"cuda:0", "cuda:1"}


def test_platform_base_command_exists():
    base = runner.platform_base_command()
    assert Path(base[0]).exists()


def test_ctrl_c_interrupts_running_processes(tmp_path, fake, monkeypatch):
    """Ctrl-C stops the children promptly (SIGINT) and propagates; nothing is marked completed."""
    import time

    base, calls = fake
    monkeypatch.setenv("FAKE_SLEEP", "600")
    interrupted = interrupt_when_both_run(monkeypatch, KeyboardInterrupt)
    points = grid()
    with pytest.raises(KeyboardInterrupt):
        runner.run_grid(points, tmp_path / "out", slots=[None, None], base=base, console=quiet(), poll=0.05)
    assert time.monotonic() - interrupted[0] < 20  # not the 30 s after which the runner kills them
    assert len(calls()) == 2  # two were started, none finished
    assert all(runner.run_state(p.run_dir(tmp_path / "out")) != "completed" for p in points)
    logs = [p.log_path(tmp_path / "out") for p in points[:2]]
    assert all("KeyboardInterrupt" in log.read_text() for log in logs)  # stopped by the SIGINT, not killed


def test_ctrl_c_signals_every_run_before_waiting_for_any(tmp_path, fake, monkeypatch):
    """Runs that take a while to stop (a curl run saves a checkpoint first) all get Ctrl-C at once; waiting for
    the first before signalling the second would make its signal arrive late, as a second Ctrl-C."""
    import os

    base, calls = fake
    monkeypatch.setenv("FAKE_SLEEP", "60")
    monkeypatch.setenv("FAKE_STOP_DELAY", "3")
    interrupt_when_both_run(monkeypatch, KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        runner.run_grid(grid(), tmp_path / "out", slots=[None, None], base=base, console=quiet(), poll=0.05)
    stops = [float(t) for t in Path(os.environ["FAKE_CALLS"] + ".stops").read_text().split()]
    assert len(calls()) == 2 and len(stops) == 2
    assert abs(stops[0] - stops[1]) < 1.5  # one after the other they would be >= 3 s apart


def test_a_start_killed_inside_run_create_is_discarded_before_the_retry(tmp_path) -> None:
    """A run directory without config.yaml (killed while being created) holds nothing resumable: the retry
    starts fresh instead of failing on 'run directory already exists'; a resumable one is kept."""
    from contrastlab.experiments.runner import discard_unstarted

    unstarted, started = tmp_path / "a", tmp_path / "b"
    for d in (unstarted, started):
        d.mkdir()
        (d / "error.log").write_text("killed")
    (started / "config.yaml").write_text("seed: 1\n")
    discard_unstarted(unstarted)
    discard_unstarted(started)
    assert not unstarted.exists() and (started / "config.yaml").is_file()


def test_sigterm_stops_the_runs_with_sigterm(tmp_path, fake, monkeypatch):
    """After ``kill PID`` of the driver the runs get SIGTERM, not SIGINT: a compare started with ``&`` from a
    script ignores SIGINT, and so do its runs, which would only stop when killed 30 s later (left ``running``)."""
    import os
    import time

    from contrastlab.experiments.interrupts import Terminated

    base, calls = fake
    monkeypatch.setenv("FAKE_SLEEP", "60")
    monkeypatch.setenv("FAKE_STOP_DELAY", "0")
    monkeypatch.setenv("FAKE_STOP_SIGNAL", "SIGTERM")
    interrupted = interrupt_when_both_run(monkeypatch, Terminated)
    with pytest.raises(KeyboardInterrupt):
        runner.run_grid(grid(), tmp_path / "out", slots=[None, None], base=base, console=quiet(), poll=0.05)
    assert time.monotonic() - interrupted[0] < 20  # not the 30 s after which the runner kills them
    stops = Path(os.environ["FAKE_CALLS"] + ".stops").read_text().split()
    assert len(calls()) == 2 and len(stops) == 2  # both runs stopped through their SIGTERM handler
