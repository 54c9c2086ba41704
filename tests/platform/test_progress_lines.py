"""Long commands say what they do: compare's plain progress lines off a terminal, eval's first line."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
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
    plain.eta.finished(60.0)
    plain.report(3, 2, 0, ended=True)
    plain.eta.finished(120.0)
    plain.report(4, 2, 1, ended=True)
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


def test_a_held_eta_reads_unknown_until_the_rate_restarts(monkeypatch) -> None:
    """CURL's warm-up (random actions, no updates) ran 10× faster than the rest: before the updates began, the smoke
    run's line read "ETA 00:00:02" at 40 % with about 20 s left (at the paper preset: minutes shown for hours)."""
    from contrastlab.platform import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    bar = progress.ProgressBar(total=1000, enabled=False)
    bar.hold_eta("warm-up, no updates yet")
    clock[0] = 1.0
    bar.update(400)
    assert "ETA ? (warm-up, no updates yet)" in bar.line(), bar.line()
    bar.restart_rate()
    clock[0] = 11.0
    bar.update(100)
    assert "ETA 00:00:50" in bar.line(), bar.line()
    held = progress.ProgressBar(total=100)
    held.interactive = True
    with held:  # the rich bar shows the same
        held.hold_eta("warm-up")
        column = next(c for c in held._progress.columns if isinstance(c, progress._EtaColumn))
        assert "? (warm-up)" in str(column.render(held._progress._tasks[held._task]))


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
    left = [[0.5, 1.0]]  # the part left of each waiting run
    plain.eta.parts_left = lambda: ([], left[0])
    plain.eta.finished(10.0, part=0.5)  # a whole run ≈ 20 s; 1.5 runs of work left
    plain.report(1, 0, 0, ended=True)
    assert buffer.getvalue().splitlines()[-1].endswith("ETA 0:00:30")
    left[0] = [1.0]
    plain.eta.finished(40.0)  # a fresh run: the better measure of a whole run
    plain.report(2, 0, 0, ended=True)
    assert buffer.getvalue().splitlines()[-1].endswith("ETA 0:00:40")


def test_the_eta_falls_while_runs_train_and_is_known_before_the_first_finishes(monkeypatch) -> None:
    """It used to change only when a run finished, and said "?" until then (a curl grid: half an hour). Now the
    running runs' checkpointed progress sets the work left and, before any run finished, a whole run's time."""
    from contrastlab.experiments import grid_progress

    clock, parts = [100.0], {0: 0.0, 1: 0.5, 2: 0.0}
    monkeypatch.setattr(grid_progress.time, "monotonic", lambda: clock[0])
    live = grid_progress.LiveProgress({0: 0.0, 1: 0.5, 2: 0.0}, lambda i: parts[i])  # run 1 resumes at 50 %
    eta = grid_progress.GridEta(total=3, slots=2)
    eta.parts_left, eta.paces = live.parts_left, live.paces
    live.start(0)
    live.start(1)
    clock[0] = 110.0
    parts[0] = 0.01  # under the 2 % a pace needs
    live.refresh([0, 1])
    assert eta.text(0) == "?"
    clock[0] = 160.0
    parts[0], parts[1] = 0.25, 0.75  # both at 60 s per quarter: a whole run ≈ 240 s
    live.refresh([0, 1])
    assert live.parts_left() == ([0.75, 0.25], [1.0])
    assert eta.seconds_left(0) == 240.0 * (0.25 + 1.0)  # run 2 starts in the slot run 1 frees
    parts[0] = 0.0  # a run.json rewritten by a resume never moves the estimate back
    live.refresh([0])
    assert live.parts_left() == ([0.75, 0.25], [1.0])
    live.stop(1)  # run 1 ended: nothing left of it
    eta.finished(60.0, part=0.5)  # 60 s for its last half: a whole run ≈ 120 s
    assert eta.seconds_left(1) == 120.0 * 1.0  # run 2, whole, in the free slot; run 0 has 0.75 left
    assert eta.seconds_left(3) == 0.0


def test_the_live_view_on_a_terminal_shows_the_grid_eta(tmp_path: Path, monkeypatch) -> None:
    """rich's own time-remaining column needs two finished runs within 30 s, so on a terminal the ETA was mostly
    "-:--:--": the live bar now shows the grid's estimate (the plain lines' ETA)."""
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    monkeypatch.setenv("FAKE_CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("FAKE_SLEEP", "0.8")  # runs over 0.5 s: the ETA before the last one finished is not 0
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200)
    runner.run_grid(grid(), tmp_path / "out", slots=[None], base=[sys.executable, str(script)], console=console,
                    poll=0.05)  # fmt: skip
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())
    assert "ETA ?" in text  # before the first run finished
    assert set(re.findall(r"ETA (\d:\d\d:\d\d)", text)) - {"0:00:00"}, text  # a time left while runs were left
    assert "-:--:--" not in text
    assert re.search(r"4/4 \d:\d\d:\d\d ETA 0:00:00\s*$", text), text[-300:]  # the final bar: nothing left


def test_the_live_view_of_a_grid_done_before_says_nothing_is_left(tmp_path: Path, monkeypatch) -> None:
    """A grid whose runs all finished earlier (every run skipped) starts no run: its only bar said "ETA ?"."""
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    monkeypatch.setenv("FAKE_CALLS", str(tmp_path / "calls.jsonl"))
    runner.run_grid(grid(), tmp_path / "out", slots=[None], base=[sys.executable, str(script)],
                    console=Console(file=io.StringIO()), poll=0.05)  # fmt: skip
    buffer = io.StringIO()
    runner.run_grid(grid(), tmp_path / "out", slots=[None], base=[sys.executable, str(script)],
                    console=Console(file=buffer, force_terminal=True, width=200), poll=0.05)  # fmt: skip
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())
    assert "ETA ?" not in text and re.search(r"4/4 \d:\d\d:\d\d ETA 0:00:00 4 already done\s*$", text), text[-300:]


def test_the_eta_of_several_slots_does_not_rise_when_the_last_runs_start(monkeypatch) -> None:
    """5 runs of 100 s, 4 at a time: the work left was shared out over the 4 slots, so at 90 s the ETA said 35 s
    (1.4 runs ÷ 4) and rose to 100 s when the fifth run started alone. The runs are placed on the slots now."""
    from contrastlab.experiments import grid_progress

    clock, parts = [0.0], dict.fromkeys(range(5), 0.0)
    monkeypatch.setattr(grid_progress.time, "monotonic", lambda: clock[0])
    live = grid_progress.LiveProgress(dict(parts), lambda i: parts[i])
    eta = grid_progress.GridEta(total=5, slots=4)
    eta.parts_left, eta.paces = live.parts_left, live.paces
    for i in range(4):
        live.start(i)
    seen = []
    for now in (50.0, 90.0):
        clock[0] = now
        parts.update(dict.fromkeys(range(4), now / 100))
        live.refresh(range(4))
        seen.append(eta.seconds_left(0))
    clock[0] = 100.0
    for i in range(4):
        live.stop(i)
        eta.finished(100.0)
    live.start(4)
    seen.append(eta.seconds_left(4))
    assert seen == pytest.approx([150.0, 110.0, 100.0])
    assert grid_progress.busy_span([0.5, 0.2], [1.0, 1.0, 0.5], slots=2) == pytest.approx(1.7)  # .2+1, .5+1, 1.2+.5


def test_a_plain_bar_eta_beyond_a_day_keeps_its_days(monkeypatch) -> None:
    """The plain line formatted the ETA with ``strftime("%H:%M:%S")``: 115.7 days left (a GPU preset on a CPU, as
    a `nohup` log shows it) read "ETA 17:45:00". Hours now count on past 24."""
    from contrastlab.platform import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    bar = progress.ProgressBar(total=1_000_000, enabled=False)
    clock[0] = 100.0
    bar.update(10)  # 0.1 step/s: 999,990 steps left = 9,999,900 s
    assert "ETA 2777:45:00" in bar.line()


def test_a_finished_bar_says_nothing_is_left_even_without_a_rate(monkeypatch) -> None:
    """A bar restarted at its last unit (CURL with init_steps covering the whole budget, or an evaluation after the
    last frame) has no rate since the restart: at 100 % its line said "ETA ?" instead of "ETA 00:00:00"."""
    from contrastlab.platform import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    bar = progress.ProgressBar(total=800, enabled=False)
    clock[0] = 1.0
    bar.update(800)
    bar.restart_rate()
    clock[0] = 2.0
    bar.update(0, eval=34.4)
    assert "800/800 (100%)" in bar.line() and "ETA 00:00:00" in bar.line(), bar.line()


def test_a_finished_bar_drops_its_held_eta() -> None:
    """A curl run with no update at all (its warm-up covers every step) ended its bar on "ETA ? (warm-up ...)" at
    100 %; the plain line already showed 00:00:00."""
    from rich.progress import Progress

    from contrastlab.platform.progress import _EtaColumn

    progress = Progress()
    task_id = progress.add_task("curl", total=10, eta_held="warm-up, no updates yet")
    column = _EtaColumn()
    assert "?" in column.render(progress.tasks[0]).plain
    progress.update(task_id, completed=10)
    assert "?" not in column.render(progress.tasks[0]).plain


def test_a_side_task_before_the_first_unit_stays_out_of_the_rate(monkeypatch) -> None:
    """New-user trial: curl evaluates at frame 0 and again just as the updates start. Both evaluations fell inside
    the rate's window before any frame was counted, so the warm-up's rate rose line after line (28, 56, 84, 111
    frame/s: the first evaluation's seconds divided into ever more frames) and the first line after the restart read
    "2.3 frame/s ETA 00:05:38" with about a minute left."""
    from contrastlab.platform import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    bar = progress.ProgressBar(total=1000, enabled=False)
    with bar.side_task():  # an evaluation before the first unit: left out
        clock[0] = 5.0
    clock[0] = 6.0
    bar.update(100)
    assert bar.rate() == 100.0, bar.line()
    bar.restart_rate()
    with bar.side_task():
        clock[0] = 16.0
    clock[0] = 26.0
    bar.update(100)
    assert bar.rate() == 10.0 and "ETA 00:01:20" in bar.line(), bar.line()


def test_a_side_task_between_units_counts_in_the_rate(monkeypatch) -> None:
    """Evaluations that recur through a run are part of the pace the ETA extrapolates (on a GPU they can take as
    long as the updates between them)."""
    from contrastlab.platform import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    bar = progress.ProgressBar(total=1000, enabled=False)
    clock[0] = 10.0
    bar.update(100)
    with bar.side_task():
        clock[0] = 20.0
    bar.update(100)
    assert bar.rate() == 10.0, bar.line()
