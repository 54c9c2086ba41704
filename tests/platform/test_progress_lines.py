"""Long commands say what they do: compare's plain progress lines off a terminal, eval's first line."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from rich.console import Console
from test_compare_runner import FAKE_TRAIN, grid

from contrastlab.experiments import runner
from contrastlab.platform.plugins import PluginManager
from contrastlab.testing import run_cli

LINE = re.compile(r"^grid: (\d+)/(\d+) done.*, (\d+) running, (\d+) failed, elapsed \d+:\d\d:\d\d, ETA ")


def test_compare_off_a_terminal_prints_done_running_failed_and_eta(tmp_path: Path, monkeypatch) -> None:
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    monkeypatch.setenv("FAKE_CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("FAKE_SLEEP", "0.3")
    monkeypatch.setenv("FAKE_FAIL_LATE", "b:1")
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=200)
    runner.run_grid(grid(), tmp_path / "out", slots=[None, None], base=[sys.executable, str(script)],
                    console=console, poll=0.05, report_every=0.1)  # fmt: skip
    lines = [m for m in map(LINE.match, buffer.getvalue().splitlines()) if m]
    counts = [tuple(map(int, m.groups())) for m in lines]
    assert counts[0] == (0, 4, 2, 0), buffer.getvalue()  # the first line comes as soon as the grid starts
    assert counts[-1][:2] == (4, 4) and counts[-1][3] == 1, buffer.getvalue()
    finished = [c for c in counts if c[0] > 0]
    assert {c[0] for c in finished} == {1, 2, 3, 4}  # a line for every finished run
    assert lines[-1].string.endswith("ETA 0:00:00")
    assert any("ETA ?" in line for line in buffer.getvalue().splitlines())  # before any run finished


def test_plain_progress_rate_limit_and_eta() -> None:
    buffer = io.StringIO()
    plain = runner.PlainProgress(Console(file=buffer, force_terminal=False), total=10, skipped=2, slots=2, every=3600)
    plain.report(2, 2, 0)  # printed: the start
    plain.report(2, 2, 0)  # not printed: within the hour
    plain.report(3, 2, 0, finished=60.0)
    plain.report(4, 2, 1, finished=120.0)
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("grid: 2/10 done (2 skipped), 2 running, 0 failed")
    assert lines[2].endswith("ETA 0:04:30")  # mean 90 s × 6 remaining / 2 at a time


def test_eval_says_what_it_evaluates_before_it_starts(toy_pm: PluginManager, tmp_path: Path) -> None:
    code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path),
                         "--set", "train.steps=10", "--set", "checkpoint_every=5"])  # fmt: skip
    assert code == 0, out
    (run_dir,) = [p for p in tmp_path.glob("*/*/*") if p.is_dir()]
    code, out = run_cli(["eval", str(run_dir)])
    assert code == 0, out
    assert out.splitlines()[0] == f"evaluating {run_dir} (checkpoint at step 10)"


def test_a_bar_restarted_measures_its_rate_and_eta_from_then_on(monkeypatch) -> None:
    """CURL's first random-action frames (no updates) run far faster than the rest: a rate counted from the start
    showed "ETA 00:00:01" at 40 % with minutes left. From the restart, the rate is the updates' pace."""
    from contrastlab.platform import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    bar = progress.ProgressBar(total=1000, enabled=False)
    clock[0] = 1.0
    bar.update(400)  # 400 fast frames in 1 s
    bar.restart_rate()
    clock[0] = 11.0
    bar.update(100)  # then 10 frames/s
    assert bar.rate() == 10.0
    assert "ETA 00:00:50" in bar.line()


def test_a_restarted_rich_bar_forgets_its_speed_samples() -> None:
    from contrastlab.platform.progress import ProgressBar

    bar = ProgressBar(total=100)
    bar.interactive = True
    with bar:
        bar.update(40)
        task = bar._progress._tasks[bar._task]
        assert len(task._progress) > 0
        bar.restart_rate()
        assert len(task._progress) == 0 and task.completed == 40


def test_plain_progress_eta_counts_what_resumed_runs_have_left() -> None:
    """A grid resumed half way: a run resumed at 50 % took 10 s; counted as a typical run it made the ETA of the runs
    still to do (1.5 whole runs of work) half of what it is."""
    buffer = io.StringIO()
    plain = runner.PlainProgress(Console(file=buffer, force_terminal=False), total=4, skipped=0, slots=1, every=3600)
    left = [1.5]
    plain.work_left = lambda: left[0]
    plain.report(1, 0, 0, finished=10.0, part=0.5)  # a whole run ≈ 20 s; 1.5 runs of work left
    assert buffer.getvalue().splitlines()[-1].endswith("ETA 0:00:30")
    left[0] = 1.0
    plain.report(2, 0, 0, finished=40.0)  # a fresh run: the better measure of a whole run
    assert buffer.getvalue().splitlines()[-1].endswith("ETA 0:00:40")
