"""``experiments/tune_report.py``: what the trials table and the two plots of ``platform tune`` show, checked
against the study's trials directly (best-so-far by hand, importances as Optuna computes them)."""

from __future__ import annotations

import csv
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from contrastlab.experiments.tune_report import (  # noqa: E402  (after the optuna skip)
    no_importance_reason,
    short_dir,
    trial_rows,
    write_plots,
    write_tables,
)


def study_of(direction: str, values: list[float | None], keys: tuple[str, ...] = ("a", "b")) -> object:
    """A study with one trial per value (``None``: a FAIL trial, its value unknown), parameters ``keys``."""
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.RandomSampler(seed=0))
    for value in values:
        trial = study.ask({k: optuna.distributions.FloatDistribution(0.0, 1.0) for k in keys})
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
    return study


def drawn_figures(monkeypatch: pytest.MonkeyPatch) -> list:
    """The figures ``write_plots`` closes, in order (history first, importance second)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures: list = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))
    return figures


def running_best(values: list[float], maximize: bool) -> list[float]:
    best, out = None, []
    for v in values:
        best = v if best is None else (v if (v > best if maximize else v < best) else best)
        out.append(best)
    return out


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_history_plots_complete_trials_and_the_best_so_far_in_the_studys_direction(
    direction: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = [0.3, None, 0.1, 0.5, 0.2]
    study = study_of(direction, values)
    figures = drawn_figures(monkeypatch)
    assert write_plots(study, tmp_path, "eval/score") == [tmp_path / "history.png", tmp_path / "importance.png"]
    ax = figures[0].axes[0]
    trials, best = ax.get_lines()
    done = [(i, v) for i, v in enumerate(values) if v is not None]
    assert list(trials.get_xdata()) == [i for i, _ in done] == list(best.get_xdata())
    assert list(trials.get_ydata()) == [v for _, v in done]
    assert list(best.get_ydata()) == running_best([v for _, v in done], direction == "maximize")
    assert best.get_drawstyle() == "steps-post"
    assert ax.get_ylabel() == "eval/score" and ax.get_title() == "optimisation history (4 complete)"


def test_importance_plot_shows_optunas_importances_most_important_on_top(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = optuna.create_study(direction="maximize")
    rng = __import__("random").Random(1)
    for _ in range(12):
        trial = study.ask({k: optuna.distributions.FloatDistribution(0.0, 1.0) for k in ("a", "b", "c")})
        study.tell(trial, 5 * trial.params["b"] + 0.5 * trial.params["a"] + 0.01 * rng.random())
    # Optuna's numbers, fixed: before Optuna 5 its default evaluator is an unseeded random forest, and two calls
    # differ; the plot must draw whatever it returns, most important first
    expected = {"b": 0.7, "c": 0.2, "a": 0.1}
    monkeypatch.setattr(optuna.importance, "get_param_importances", lambda study, **kwargs: dict(expected))
    figures = drawn_figures(monkeypatch)
    write_plots(study, tmp_path, "eval/score")
    ax = figures[1].axes[0]
    bars = ax.patches
    names = [label.get_text() for label in ax.get_yticklabels()]
    assert names == list(expected)[::-1]  # barh draws the first name at the bottom
    assert [bar.get_width() for bar in bars] == pytest.approx([expected[n] for n in names])
    assert sum(bar.get_width() for bar in bars) == pytest.approx(1.0)
    assert ax.get_title() == "parameter importance"


def pruned(study: object, value: float) -> None:
    """Add a PRUNED trial; Optuna stores its last reported value as the trial's value."""
    trial = study.ask({k: optuna.distributions.FloatDistribution(0.0, 1.0) for k in ("a", "b")})
    trial.report(value, 3)
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)


def test_importance_needs_two_complete_trials_exactly_and_a_pruned_one_does_not_count(tmp_path: Path) -> None:
    assert no_importance_reason(study_of("maximize", [0.1, None, None])) == "needs ≥ 2 complete trials (1 so far)"
    assert no_importance_reason(study_of("maximize", [0.1, 0.2])) is None
    study = study_of("maximize", [0.1])
    pruned(study, 0.9)
    assert study.trials[1].value == 0.9  # what makes "has a value" alone the wrong test
    assert no_importance_reason(study) == "needs ≥ 2 complete trials (1 so far)"


def test_history_leaves_pruned_trials_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study = study_of("maximize", [0.1])
    pruned(study, 0.9)
    figures = drawn_figures(monkeypatch)
    write_plots(study, tmp_path, "eval/score")
    trials, best = figures[0].axes[0].get_lines()
    assert list(trials.get_ydata()) == [0.1] == list(best.get_ydata())


def test_tables_bold_the_best_trial_in_the_studys_direction(tmp_path: Path) -> None:
    for direction, best in (("maximize", "1"), ("minimize", "0")):
        write_tables(study_of(direction, [0.1, 0.3, None]), tmp_path, "eval/score")
        rows = [line for line in (tmp_path / "trials.md").read_text().splitlines() if line.startswith("| ")][1:]
        bold = [row.split(" | ")[0].strip("| *") for row in rows if "**" in row]
        assert bold == [best], rows
        assert f"Objective: eval/score ({direction})" in (tmp_path / "trials.md").read_text()
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert all(len(c) == 7 for c in cells) and re.fullmatch(r"\d+\.\d", cells[0][5].strip("*")), rows  # seconds kept
    header, *csv_rows = list(csv.reader((tmp_path / "trials.csv").open()))
    assert header == ["trial", "state", "value", "a", "b", "seconds", "dir"]
    assert [r[:3] for r in csv_rows] == [["0", "COMPLETE", "0.100000"], ["1", "COMPLETE", "0.300000"],
                                         ["2", "FAIL", ""]]


def test_trial_rows_give_the_seconds_between_start_and_completion(tmp_path: Path) -> None:
    start = datetime(2026, 1, 1, 12, 0, 0)
    trial = optuna.trial.create_trial(
        params={"loss.tau_plus": 0.05}, distributions={"loss.tau_plus": optuna.distributions.FloatDistribution(0, 1)},
        value=0.7, user_attrs={"dir": str(tmp_path / "trials" / "0000")},
    )
    trial.datetime_start, trial.datetime_complete = start, start + timedelta(seconds=83.25)
    study = optuna.create_study(direction="maximize")
    study.add_trial(trial)
    study.ask()  # a trial still running: started, not complete
    header, rows = trial_rows(study)
    assert rows == [["0", "COMPLETE", "0.700000", "0.05", "83.2", str(tmp_path / "trials" / "0000")],
                    ["1", "RUNNING", "", "", "", ""]]
    assert header == ["trial", "state", "value", "loss.tau_plus", "seconds", "dir"]


def test_short_dir_is_relative_under_the_output_folder_only(tmp_path: Path) -> None:
    assert short_dir(str(tmp_path / "trials" / "0003"), tmp_path) == str(Path("trials") / "0003")
    assert short_dir("/elsewhere/trials/0003", tmp_path) == "/elsewhere/trials/0003"
    assert short_dir("", tmp_path) == ""
