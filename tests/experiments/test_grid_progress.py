"""The compare grid's time-left estimate (:mod:`contrastlab.experiments.grid_progress`): the cases the progress-line
tests in ``tests/platform/test_progress_lines.py`` leave open (found by a mutation audit)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from contrastlab.experiments import grid_progress as gp


def test_a_waiting_run_resumed_part_way_counts_only_the_part_it_has_left():
    live = gp.LiveProgress({0: 0.0, 1: 0.5, 2: 0.25}, lambda i: 0.0)
    live.start(0)
    assert live.parts_left() == ([1.0], [0.5, 0.75])


def test_a_run_without_a_recorded_start_part_starts_from_nothing(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(gp.time, "monotonic", lambda: clock[0])
    live = gp.LiveProgress({}, lambda i: 0.3)
    live.start(4)
    clock[0] = 6.0
    assert live.paces() == []  # not read yet: nothing done
    live.refresh([4])
    assert live.parts_left() == ([pytest.approx(0.7)], [])
    assert live.paces() == [pytest.approx(20.0)]  # 30 % in 6 s


@pytest.mark.parametrize(("gained", "paces"), [(0.015, []), (0.02, [50.0]), (0.03, [100.0 / 3])])
def test_a_running_run_gives_a_pace_from_2_percent_on(monkeypatch, gained, paces):
    clock = [0.0]
    monkeypatch.setattr(gp.time, "monotonic", lambda: clock[0])
    live = gp.LiveProgress({0: 0.0}, lambda i: gained)
    live.start(0)
    clock[0] = 1.0
    live.refresh([0])
    assert live.paces() == pytest.approx(paces)  # whole-run seconds: 1 s per `gained` of the run


@pytest.mark.parametrize(("part", "whole"), [(0.0, 10.0), (0.5, 20.0), (0.75, 40.0), (0.9, 40.0)])
def test_a_resumed_runs_time_is_scaled_by_the_part_it_had_left_at_most_four_times(part, whole):
    """10 s for the last half of a run is a 20 s run; a run resumed at 90 % counts as at most 4 × its time (a
    tenth's noise would otherwise become ten times as large)."""
    eta = gp.GridEta(total=3, slots=1)
    eta.finished(10.0, part)
    assert eta.durations == [pytest.approx(whole)] and eta.fresh == ([10.0] if part == 0 else [])


def test_plain_lines_are_due_again_exactly_every_seconds_later(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(gp.time, "monotonic", lambda: clock[0])
    buffer = io.StringIO()
    plain = gp.PlainProgress(Console(file=buffer, force_terminal=False), total=4, skipped=0, slots=1, every=30.0)
    plain.report(0, 1, 0)  # the start
    clock[0] = 29.0
    plain.report(0, 1, 0)  # too soon
    clock[0] = 30.0
    plain.report(0, 1, 0)  # due: 30 s after the last line
    assert len(buffer.getvalue().splitlines()) == 2


def test_the_eta_says_finishing_while_runs_left_have_no_steps_left():
    """New-user trial: "grid: 3/4 done, 1 running ... ETA 0:00:00" stood for over 30 s while the last run ran its
    final evaluation (its progress was already 100 %). Done grids still say 0:00:00."""
    eta = gp.GridEta(total=4, slots=1)
    eta.finished(60.0)
    eta.parts_left = lambda: ([0.0], [])  # one run running, nothing of its steps left
    assert eta.text(3) == "finishing"
    eta.parts_left = lambda: ([0.5], [])
    assert eta.text(3) == "0:00:30"
    assert eta.text(4) == "0:00:00"
