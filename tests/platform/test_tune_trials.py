"""What ``platform tune`` says about each trial, at unit level: the start line (values, the seed's position), the
end line of a complete, pruned and failed trial, and stopping after 3 failed trials in a row (not 3 in all).
Written from the mutation audit of ``experiments/tune_trials.py``."""

from __future__ import annotations

import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from contrastlab.experiments.tune_trials import (
    MAX_CONSECUTIVE_FAILURES,
    TooManyFailuresError,
    TrialFailedError,
    TrialLines,
    shown_values,
    start_line,
)


def frozen(number: int, state: str, value: float | None = None, seconds: float | None = 12.4,
           steps: tuple[int, ...] = (), attrs: dict | None = None) -> SimpleNamespace:
    """A stand-in for Optuna's FrozenTrial with what the lines read."""
    duration = None if seconds is None else datetime.timedelta(seconds=seconds)
    return SimpleNamespace(number=number, state=SimpleNamespace(name=state), value=value, duration=duration,
                           intermediate_values={s: 0.1 for s in steps}, user_attrs=attrs or {})


class FakeStudy:
    def __init__(self) -> None:
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1


def test_start_line_names_the_values_and_the_seeds_position():
    values = {"loss.tau_plus": "0.05123456789", "train.lr": "0.001"}
    assert shown_values(values) == "tau_plus=0.05123 train.lr=0.001"
    assert shown_values({"loss.hcl.beta": "0.5"}) == "hcl.beta=0.5"  # only the leading "loss." is dropped
    assert shown_values({}) == "(no parameters)"
    assert start_line(3, values, 7, [5, 7]) == "trial 3: tau_plus=0.05123 train.lr=0.001, seed 2/2"
    assert start_line(0, {}, 1, [1, 2, 3]) == "trial 0: (no parameters), seed 1/3"
    assert start_line(0, {}, 9, [1, 2]) == "trial 0: (no parameters), seed 9"


def test_end_lines_of_complete_pruned_and_failed_trials(tmp_path):
    lines = TrialLines("eval/ndcg@20")
    assert lines.line(frozen(3, "COMPLETE", 0.280123)) == "trial 3: complete, eval/ndcg@20 0.2801 (12 s)"
    assert lines.line(frozen(3, "COMPLETE", 0.5, seconds=None)) == "trial 3: complete, eval/ndcg@20 0.5 (0 s)"
    assert lines.line(frozen(4, "PRUNED", steps=(0, 4, 2))) == "trial 4: pruned at step 4 (12 s)"
    assert lines.line(frozen(4, "PRUNED", steps=())) == "trial 4: pruned (12 s)"
    log = tmp_path / "trials" / "0005" / "logs" / "run.log"
    lines.failed(5, TrialFailedError("RuntimeError: boom", log))
    assert lines.line(frozen(5, "FAIL")) == f"trial 5 failed: RuntimeError: boom; log: {log}"
    lines.failed(6, TrialFailedError("RuntimeError: no log"))  # the log is not known: the trial's logs folder
    folder = tmp_path / "trials" / "0006"
    assert lines.line(frozen(6, "FAIL", attrs={"dir": str(folder)})) == (
        f"trial 6 failed: RuntimeError: no log; log: {folder / 'logs'}"
    )
    assert lines.line(frozen(7, "FAIL")) == f"trial 7 failed: error not recorded; log: {Path('trials') / 'logs'}"


def test_three_failures_in_a_row_stop_the_study_but_three_in_all_do_not(capsys):
    assert MAX_CONSECUTIVE_FAILURES == 3  # docs/tune.md
    lines, study = TrialLines("m"), FakeStudy()
    states = ["FAIL", "FAIL", "COMPLETE", "FAIL", "PRUNED", "FAIL", "RUNNING", "FAIL", "WAITING"]
    for number, state in enumerate(states):  # a running or waiting trial neither counts nor resets the count
        lines(study, frozen(number, state, 0.1))
    lines.check()  # never 3 in a row: no error
    assert (study.stops, lines.gave_up, lines.in_a_row) == (0, False, 2)
    printed = capsys.readouterr().err.splitlines()
    assert len(printed) == 7 and printed[2].startswith("trial 2: complete") and printed[4].startswith("trial 4")
    lines(study, frozen(9, "FAIL"))
    assert (study.stops, lines.gave_up) == (1, True)
    lines(study, frozen(10, "FAIL"))  # a trial ending after that is still reported; the study is stopped once
    assert (study.stops, lines.in_a_row) == (1, 4)
    assert capsys.readouterr().err.splitlines()[-1].startswith("trial 10 failed")
    with pytest.raises(TooManyFailuresError, match=r"^3 trials in a row failed; see trials.md") as info:
        lines.check()
    assert info.value.exit_code == 1


@pytest.mark.parametrize("limit", [1, 2])
def test_the_failure_limit_can_be_lowered(limit):
    lines, study = TrialLines("m", limit=limit), FakeStudy()
    for number in range(limit):
        assert not lines.gave_up
        lines(study, frozen(number, "FAIL"))
    assert lines.gave_up and study.stops == 1
