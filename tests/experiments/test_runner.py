"""The compare runner's helpers (:mod:`contrastlab.experiments.runner`) that the process-pool tests in
``tests/platform/test_compare_runner.py`` leave open (found by a mutation audit)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from contrastlab.experiments import grid as cmp
from contrastlab.experiments import runner


def test_stop_train_ends_a_running_process_and_leaves_a_finished_one():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        runner.stop_train(sleeper)
        assert sleeper.poll() is not None  # SIGTERM ended it
    finally:
        sleeper.kill()
        sleeper.wait()
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    signalled: list[str] = []
    done.terminate, done.kill = (lambda: signalled.append("term")), (lambda: signalled.append("kill"))
    runner.stop_train(done)  # already ended: nothing to signal
    assert done.returncode == 0 and signalled == []


def test_the_platform_script_beside_the_interpreter_is_used_else_the_module(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    base = runner.platform_base_command()
    assert base[:2] == [str(bin_dir / "python"), "-c"] and "_contrastlab_cli" in base[2]  # no script there
    (bin_dir / "platform").write_text("#!/bin/sh\n")
    assert runner.platform_base_command() == [str(bin_dir / "platform")]


def _placeholder(run_dir: Path, *, placeholder: bool, config: bool) -> None:
    run_dir.mkdir(parents=True)
    info = {"status": "failed", **({"placeholder": True} if placeholder else {})}
    (run_dir / "run.json").write_text(json.dumps(info))
    (run_dir / runner.ERROR_FILE).write_text("boom\n")
    if config:
        (run_dir / "config.yaml").write_text("seed: 1\n")


def test_clear_failure_removes_only_the_placeholder_it_wrote(tmp_path):
    """Before a retry: the error file always goes; ``run.json`` and the folder only when compare wrote them as a
    placeholder for a run that never started (no ``config.yaml``)."""
    cases = {"mine": (True, False), "started": (True, True), "real": (False, False), "real_started": (False, True)}
    for name, (placeholder, config) in cases.items():
        _placeholder(tmp_path / name, placeholder=placeholder, config=config)
        runner.clear_failure(tmp_path / name)
        assert not (tmp_path / name / runner.ERROR_FILE).exists()
    assert not (tmp_path / "mine").exists()
    assert all((tmp_path / name / "run.json").is_file() for name in ("started", "real", "real_started"))


def test_plain_progress_lines_come_at_least_every_30_s_by_default(tmp_path, monkeypatch):
    """docs/compare.md: off a terminal, a line after every finished run and at least every 30 s in between."""
    every = []
    real = runner.PlainProgress

    def recording(console, total, skipped, slots, report_every, eta):
        every.append(report_every)
        return real(console, total, skipped, slots, report_every, eta)

    monkeypatch.setattr(runner, "PlainProgress", recording)
    point = cmp.GridPoint("toy", "a", 1, None)
    run_dir = point.run_dir(tmp_path)
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "completed"}))
    (run_dir / "summary.json").write_text("{}")
    console = Console(file=io.StringIO(), force_terminal=False)
    results = runner.run_grid([point], tmp_path, base=["true"], console=console)
    assert [r.status for r in results] == ["skipped"] and every == [30.0]


def test_each_run_gets_its_share_of_the_cores_as_omp_threads(tmp_path, monkeypatch):
    """``OMP_NUM_THREADS`` of a run is the cores divided by the concurrent runs (at least 1), unless the user set it."""
    import os

    threads = []
    real = runner.train_env
    monkeypatch.setattr(runner, "train_env", lambda n, **extra: threads.append(n) or real(n, **extra))
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    console = Console(file=io.StringIO(), force_terminal=False)
    runner.run_grid([], tmp_path, slots=[None] * 3, base=["true"], console=console)
    assert threads == [8 // 3]
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert runner.train_env(0)["OMP_NUM_THREADS"] == "1" and runner.train_env(4)["OMP_NUM_THREADS"] == "4"
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    env = runner.train_env(4, EXTRA="x")
    assert env["OMP_NUM_THREADS"] == "7" and env["EXTRA"] == "x" and env["PYTHONUNBUFFERED"] == "1"


def test_a_run_that_failed_before_its_folder_existed_gets_a_placeholder_record(tmp_path):
    """``run.json`` (status failed, the error, the point's settings, ``placeholder``) and ``compare_error.txt``,
    in a run folder whose parents did not exist yet; an existing ``run.json`` is kept."""
    point = cmp.GridPoint("toy", "a", 2, "smoke", ("train.steps=3",), (("loss.t", "0.1"),))
    run_dir = runner.record_failure(point, tmp_path / "out", "ValueError: boom")
    assert run_dir == point.run_dir(tmp_path / "out")
    info = json.loads((run_dir / "run.json").read_text())
    keys = ("plugin", "loss", "seed", "preset", "overrides", "status", "error", "placeholder")
    assert {k: info[k] for k in keys} == {
        "plugin": "toy", "loss": "a", "seed": 2, "preset": "smoke", "overrides": ["train.steps=3", "loss.t=0.1"],
        "status": "failed", "error": "ValueError: boom", "placeholder": True}  # fmt: skip
    assert (run_dir / runner.ERROR_FILE).read_text() == "ValueError: boom\n"
    (run_dir / "run.json").write_text(json.dumps({"status": "failed", "error": "diverged"}))
    runner.record_failure(point, tmp_path / "out", "diverged")
    assert json.loads((run_dir / "run.json").read_text()) == {"status": "failed", "error": "diverged"}


def test_pid_alive_only_asks_and_counts_another_users_process_as_alive(monkeypatch):
    import os
    import time

    code = "import signal, time; [signal.signal(s, signal.SIG_DFL) for s in range(1, 16) if s not in (9,)]; " \
           "print('ready', flush=True); time.sleep(60)"  # any signal would end it, also under nohup
    sleeper = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert sleeper.stdout.readline() == "ready\n"
        assert runner.pid_alive(sleeper.pid)
        time.sleep(0.2)
        assert sleeper.poll() is None  # signal 0: nothing was sent
    finally:
        sleeper.kill()
        sleeper.wait()
        sleeper.stdout.close()
    assert not runner.pid_alive(sleeper.pid)

    def not_yours(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", not_yours)
    assert runner.pid_alive(sleeper.pid)


def test_last_error_line_is_the_logs_last_non_empty_line_cut_at_500_characters(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("$ platform train\nTraceback (most recent call last):\n  ...\nValueError: boom\n\n  \n")
    assert runner.last_error_line(log) == "ValueError: boom"
    log.write_text("first\n" + "x" * 600 + "\n")
    assert runner.last_error_line(log) == "x" * 500
    log.write_text("\n \n")
    assert runner.last_error_line(log) == "process failed (empty log)"
    assert runner.last_error_line(tmp_path / "missing.log") == "process failed (no log)"


def test_latest_step_reads_the_last_metrics_line(tmp_path):
    """The live view's ``step N`` of a running run: its last ``metrics.jsonl`` line, also in a long file and in a
    file of one line."""
    metrics = runner.RunDir(tmp_path).metrics_jsonl
    assert runner.latest_step(tmp_path) == ""  # nothing logged yet
    metrics.write_text(json.dumps({"step": 7, "loss": 1.0}) + "\n")
    assert runner.latest_step(tmp_path) == "step 7"
    metrics.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(1, 1001)))
    assert runner.latest_step(tmp_path) == "step 1000"


def test_without_a_known_core_count_a_lone_run_gets_one_thread(tmp_path, monkeypatch):
    import os

    threads = []
    real = runner.train_env
    monkeypatch.setattr(runner, "train_env", lambda n, **extra: threads.append(n) or real(n, **extra))
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    console = Console(file=io.StringIO(), force_terminal=False)
    runner.run_grid([], tmp_path, slots=[None], base=["true"], console=console)
    assert threads == [1]


DONE_TRAIN = """
import json, sys
from pathlib import Path
argv = sys.argv[1:]
opt = lambda name: argv[argv.index(name) + 1]
run = Path(opt("--logdir")) / opt("--plugin") / opt("--loss") / opt("--run-name")
run.mkdir(parents=True)
if opt("--loss") == "done":
    (run / "config.yaml").write_text("seed: 1")
    (run / "summary.json").write_text("{}")
    (run / "run.json").write_text(json.dumps({"status": "completed"}))
print("trained nothing")
"""


def test_a_run_that_exits_0_without_a_summary_is_failed_not_done(tmp_path):
    """Only a zero exit *and* a completed run folder count as done; a zero exit alone is a failure that says so.
    Each outcome is one console line (not wrapped, its colour markup rendered, never printed as text)."""
    script = tmp_path / "train.py"
    script.write_text(DONE_TRAIN)
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=12)
    points = [cmp.GridPoint("toy", "done", 1, None), cmp.GridPoint("toy", "silent", 1, None)]
    done, silent = runner.run_grid(points, tmp_path / "out", base=[sys.executable, str(script)], console=console,
                                   poll=0.02)
    assert done.status == "completed" and silent.status == "failed"
    assert silent.error == "exited 0 without a completed summary.json (trained nothing)"
    assert (silent.run_dir / runner.ERROR_FILE).read_text().strip() == silent.error
    lines = [line for line in buffer.getvalue().splitlines() if line.startswith(("done", "failed"))]
    assert len(lines) == 2 and lines[0].startswith("done done s1 (") and lines[0].endswith(" s)")
    assert lines[1].startswith(f"failed silent s1: {silent.error}  (log: ")
    assert lines[1].endswith(f"{points[1].run_name}.log)")


STUBBORN_TRAIN = """
import signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a run that does not stop on Ctrl-C
Path(sys.argv[1]).write_text("ready")
time.sleep(30)
"""


def test_a_run_that_ignores_ctrl_c_is_killed_when_the_30_s_are_up(tmp_path, monkeypatch):
    """Ctrl-C waits at most 30 s in all for the runs to stop, then kills them (the clock is sped up here)."""
    import threading
    import time

    script, ready = tmp_path / "stubborn.py", tmp_path / "ready"
    script.write_text(STUBBORN_TRAIN)
    real_sleep, real_clock, interrupted, readings = time.sleep, time.monotonic, [], []

    def sleep(seconds):  # Ctrl-C reaches the main thread only (another thread in this worker may sleep too)
        if threading.current_thread() is threading.main_thread() and ready.exists() and not interrupted:
            interrupted.append(real_clock())
            raise KeyboardInterrupt
        real_sleep(min(seconds, 0.05))

    def clock():  # after Ctrl-C every reading is 100 s later than the one before
        if interrupted:
            readings.append(None)
        return real_clock() + 100.0 * len(readings)

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(time, "monotonic", clock)
    console = Console(file=io.StringIO(), force_terminal=False)
    point = cmp.GridPoint("toy", "a", 1, None)
    with pytest.raises(KeyboardInterrupt):
        runner.run_grid([point], tmp_path / "out", base=[sys.executable, str(script), str(ready)], console=console,
                        poll=0.02)
    assert real_clock() - interrupted[0] < 10  # killed, not waited for until its sleep ended


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
@pytest.mark.parametrize(("sig", "code"), [(None, -15), (9, -9)])
def test_a_child_gets_the_signal_when_the_thread_that_started_it_ends(sig, code):
    """In-process (test_tune_study.py checks it through a real driver process): SIGTERM by default, else the signal
    asked for."""
    import threading

    started = []

    def start() -> None:
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                        preexec_fn=runner.die_with_parent(sig)))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    (child,) = started
    try:
        assert child.wait(timeout=10) == code
    finally:
        child.kill()
        child.wait()
