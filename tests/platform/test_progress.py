"""The training progress bar (``platform.progress``): when its plain lines print, what they say, who draws."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from contrastlab.platform import progress


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    """``progress``'s monotonic clock, set by the test."""
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    return now


def test_plain_lines_print_every_tenth_every_30_seconds_and_at_the_end(clock, capsys) -> None:
    """Off a terminal a line is printed at the first update, then when 10 % more is done or 30 s went by since the
    last line, and always at 100 %; the postfix values stay on every later line (floats to 4 significant digits)."""
    with progress.ProgressBar(total=1000) as bar:
        bar.update(0)  # the first line: at once
        bar.update(100, loss=0.123456)  # 10 % since the last line: printed
        bar.update(50)  # 5 %, no time: not printed
        clock[0] = 30.0
        bar.update(1, phase="warm-up")  # 30 s since the last line: printed
        clock[0] = 40.0
        bar.update(1)  # neither: not printed
        bar.update(798)  # 95 %
        bar.update()  # one unit
        bar.update(49)  # 100 %, only 5 % since the last line: printed all the same
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "train 0/1000", "train 100/1000", "train 151/1000", "train 950/1000", "train 1000/1000"]
    assert lines[0] == "train 0/1000 (0%) 0.0 step/s ETA ?"
    assert lines[1].endswith("(10%) 0.0 step/s ETA ? loss=0.1235")
    assert lines[-1] == "train 1000/1000 (100%) 25.0 step/s ETA 00:00:00 loss=0.1235  phase=warm-up"


def test_plain_lines_of_exact_tenths_print_at_every_tenth(clock, capsys) -> None:
    """A bar advancing in exact 10 % steps prints a line at each of them: in floating point 0.3 − 0.2 < 0.1, which
    made the old comparison skip 30 %, 60 %, 80 % and 90 % of a 10-step bar."""
    with progress.ProgressBar(total=10) as bar:
        for _ in range(10):
            bar.update(1)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"train {k}/10" for k in range(1, 11)]


def test_a_disabled_bar_prints_nothing_and_draws_no_rich_bar(clock, capsys, monkeypatch) -> None:
    """``enabled=False`` (a torchrun rank other than 0): no plain line, and no rich bar even on a terminal."""
    with progress.ProgressBar(total=10, enabled=False) as bar:
        bar.update(10)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(progress, "Console", lambda **kw: Console(file=io.StringIO(), force_terminal=True))
    assert not progress.ProgressBar(total=10, enabled=False).interactive
    assert progress.ProgressBar(total=10).interactive


def test_the_bar_counts_from_initial_and_never_divides_by_a_zero_total(clock) -> None:
    fresh = progress.ProgressBar(total=0, description="eval", unit="episode")
    assert fresh.total == 1 and fresh.done == 0
    assert fresh.line() == "eval 0/1 (0%) 0.0 episode/s ETA ?"
    resumed = progress.ProgressBar(total=100, initial=40)
    clock[0] = 2.0
    resumed.update(10)
    assert resumed.line() == "train 50/100 (50%) 5.0 step/s ETA 00:00:10"  # the rate counts the units since start


def test_the_rich_bar_draws_on_stderr_and_stays_when_done() -> None:
    """stdout is for results (``platform eval`` prints its metrics there); the finished bar is not erased."""
    bar = progress.ProgressBar(total=10)
    assert bar.console.stderr
    bar.interactive = True
    with bar:
        assert bar._progress is not None and not bar._progress.live.transient


def test_the_rate_column_shows_the_finished_speed_else_the_current_one() -> None:
    column = progress._RateColumn("frame")
    assert column.render(SimpleNamespace(finished_speed=None, speed=12.34)).plain == "12.3 frame/s"
    assert column.render(SimpleNamespace(finished_speed=5.0, speed=7.0)).plain == "5.0 frame/s"
    assert column.render(SimpleNamespace(finished_speed=None, speed=None)).plain == "- frame/s"


def test_a_side_task_that_counts_units_stays_in_the_rate(clock) -> None:
    """Only a side task during which no unit was counted, at the start of the window, is left out of the rate."""
    bar = progress.ProgressBar(total=1000, enabled=False)
    with bar.side_task():
        clock[0] = 5.0
        bar.update(50)
    clock[0] = 10.0
    assert bar.rate() == 5.0
