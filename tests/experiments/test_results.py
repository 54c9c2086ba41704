"""Run directories read as records (:mod:`contrastlab.experiments.results`): status, error, primary metric and
direction from ``run.json``/``summary.json``/``compare_error.txt``, and the labels of grouped configurations."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contrastlab.experiments import results as rs


def write_run(root: Path, name: str, info: dict[str, Any], summary: dict[str, Any] | None,
              compare_error: str | None = None) -> Path:
    """A run directory with the given ``run.json`` (plus ``summary.json`` and ``compare_error.txt`` if given)."""
    run_dir = root / name
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"loss": "dcl", "seed": 1, "overrides": [], **info}))
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps(summary))
    if compare_error is not None:
        (run_dir / "compare_error.txt").write_text(compare_error)
    return run_dir


def test_compare_error_file_marks_an_unfinished_run_failed_with_its_error(tmp_path: Path) -> None:
    """``platform compare`` writes ``compare_error.txt`` when a run's process dies (timeout, kill): its run.json may
    still say ``running`` with no error. The report must show it failed, with the recorded error."""
    killed = rs.load_run(write_run(tmp_path, "killed", {"plugin": "graph", "status": "running"}, None,
                                   "TimeoutError: run took longer than 600 s\n"))
    assert (killed.status, killed.error) == ("failed", "TimeoutError: run took longer than 600 s")
    # an empty error file keeps run.json's own error
    empty = rs.load_run(write_run(tmp_path, "empty", {"plugin": "graph", "status": "failed", "error": "boom"},
                                  None, "\n"))
    assert (empty.status, empty.error) == ("failed", "boom")
    # a run completed by a later retry keeps its result (the file is only the earlier attempt's)
    summary = {"metrics": {"eval/svm_acc": 0.7}, "primary_metric": "eval/svm_acc", "higher_is_better": True}
    done = rs.load_run(write_run(tmp_path, "done", {"plugin": "graph", "status": "completed"}, summary, "old\n"))
    assert (done.status, done.metrics) == ("completed", {"eval/svm_acc": 0.7})


def test_status_missing_from_run_json_is_read_from_the_summary(tmp_path: Path) -> None:
    """A run.json without ``status``: completed when summary.json is there, else unknown."""
    summary = {"metrics": {"eval/svm_acc": 0.7}, "primary_metric": "eval/svm_acc", "higher_is_better": True}
    with_summary = rs.load_run(write_run(tmp_path, "a", {"plugin": "graph"}, summary))
    assert (with_summary.status, with_summary.metrics) == ("completed", {"eval/svm_acc": 0.7})
    assert rs.load_run(write_run(tmp_path, "b", {"plugin": "graph"}, None)).status == "unknown"


@pytest.mark.parametrize(("plugin", "summary", "primary", "higher"), [
    # summary.json names both: it is the record, also for a plugin that is not installed here
    ("not_installed", {"primary_metric": "loss", "higher_is_better": False}, "loss", False),
    # an older summary without the direction: both come from the installed plugin (graph: svm_acc, higher)
    ("graph", {"primary_metric": "eval/svm_acc"}, "eval/svm_acc", True),
    ("graph", {}, "eval/svm_acc", True),
    # neither recorded nor installed: the first metric, higher is better
    ("not_installed", {}, "acc", True),
])  # fmt: skip
def test_primary_metric_and_direction(tmp_path: Path, plugin: str, summary: dict, primary: str,
                                      higher: bool) -> None:
    """The primary metric and its direction decide the bold cell and the verdict of a report."""
    metrics = {"acc": 0.5, "loss": 1.2, "eval/svm_acc": 0.7}
    record = rs.load_run(write_run(tmp_path, "r", {"plugin": plugin, "status": "completed"},
                                   {"metrics": metrics, **summary}))
    assert (record.primary, record.higher_is_better) == (primary, higher)


def _record(loss: str, seed: int, tau: str | None) -> rs.RunRecord:
    overrides = {} if tau is None else {"loss.tau_plus": tau}
    return rs.RunRecord(Path(f"/r/{loss}-{tau}-{seed}"), "graph", loss, seed, "smoke", overrides, "completed",
                        metrics={"eval/svm_acc": 0.5}, primary="eval/svm_acc")


def test_a_sampled_value_is_shown_to_4_digits_unless_two_configurations_would_share_a_label() -> None:
    """Tuned values (many digits) are shortened in labels; only when two configurations would then read the same
    are they shown exactly."""
    alone = rs.group_runs([_record("dcl", s, "0.05123456789") for s in (1, 2)] + [_record("infonce", 1, None)])
    assert [g.column for g in alone] == ["dcl tau_plus=0.05123", "infonce"]
    close = rs.group_runs([_record("dcl", 1, "0.05123456789"), _record("dcl", 1, "0.0512349"),
                           _record("dcl", 1, "0.1")])
    assert [g.column for g in close] == ["dcl tau_plus=0.05123456789", "dcl tau_plus=0.0512349", "dcl tau_plus=0.1"]


def test_curves_keep_finite_numbers_per_step_and_the_last_duplicate(tmp_path: Path) -> None:
    """``metrics.jsonl``: a damaged line, a NaN, text values and the step/wall_time columns are no curve points;
    a step logged twice (a resumed run) keeps its later value."""
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    lines = [
        json.dumps({"step": 10, "wall_time": 0.1, "eval/score": 0.5, "train/loss": 2.0}),
        "{not json",
        json.dumps({"wall_time": 0.2, "eval/score": 0.9}),  # no step
        json.dumps({"step": 20, "wall_time": 0.3, "eval/score": float("nan"), "note": "resumed"}),
        json.dumps({"step": 10, "wall_time": 0.4, "eval/score": 0.6}),
        json.dumps({"step": 30, "train/loss": 1}),
    ]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert rs.load_curves(run_dir) == {"eval/score": [(10, 0.6)], "train/loss": [(10, 2.0), (30, 1.0)]}
    assert rs.load_curves(tmp_path) == {}  # no metrics.jsonl


def _scored(loss: str, seed: int, metrics: dict[str, float], overrides: dict[str, str] | None = None) -> rs.RunRecord:
    return rs.RunRecord(Path(f"/r/{loss}-{seed}-{sorted((overrides or {}).items())}"), "graph", loss, seed, "smoke",
                        overrides or {}, "completed", metrics=metrics, primary="eval/svm_acc")


def test_one_seed_has_std_zero_and_each_metric_its_own_interval() -> None:
    """``Group.stats``: one seed is mean ± 0 (no spread to show); ``Group.interval`` of a second metric is that
    metric's Student-t interval, not the primary's cached one."""
    from scipy import stats as scipy_stats

    (one,) = rs.group_runs([_scored("dcl", 1, {"eval/svm_acc": 0.7})])
    assert one.stats() == (0.7, 0.0, 1)
    acc, loss = [0.6, 0.7, 0.9], [2.0, 1.0, 1.5]
    (group,) = rs.group_runs([_scored("dcl", s, {"eval/svm_acc": a, "train/loss": b, "other": 3 * b})
                              for s, a, b in zip((1, 2, 3), acc, loss, strict=True)])
    for metric, values in (("train/loss", loss), ("other", [3 * b for b in loss]), (None, acc)):
        x = np.asarray(values)
        low, high = scipy_stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=scipy_stats.sem(x))
        assert group.interval("mean", metric) == pytest.approx((x.mean(), low, high)), metric


def test_the_iqm_gets_a_bootstrap_interval_from_four_seeds_on() -> None:
    """New-user trial: a 2-seed IQM was printed as "121.3 [91.4, 151.2]", its seeds' [min, max], which the docs
    call unreliable. Below four seeds the IQM is the mean, without an interval."""
    values = [0.6, 0.7, 0.9, 0.5, 0.8]
    for n in (2, 3):
        (group,) = rs.group_runs([_scored("dcl", s, {"eval/svm_acc": v}) for s, v in enumerate(values[:n], 1)])
        est, low, high = group.interval("iqm")
        assert est == pytest.approx(np.mean(values[:n])) and math.isnan(low) and math.isnan(high), n
    for n in (4, 5):
        (group,) = rs.group_runs([_scored("dcl", s, {"eval/svm_acc": v}) for s, v in enumerate(values[:n], 1)])
        est, low, high = group.interval("iqm")
        trimmed = sorted(values[:n])[1:-1]  # n // 4 = 1 value cut from each end
        assert est == pytest.approx(np.mean(trimmed)) and min(values[:n]) <= low <= est <= high <= max(values), n


def test_a_key_every_run_sets_alike_is_left_out_of_the_labels() -> None:
    """Only the override keys that vary name rows and columns: ``--set train.epochs=5`` on every run adds nothing."""
    groups = rs.group_runs([
        _scored("dcl", 1, {"eval/svm_acc": 0.5}, {"train.epochs": "5", "loss.tau_plus": "0.1"}),
        _scored("dcl", 1, {"eval/svm_acc": 0.5}, {"train.epochs": "5", "loss.tau_plus": "0.2"}),
    ])
    assert [(g.row, g.column) for g in groups] == [("graph", "dcl tau_plus=0.1"), ("graph", "dcl tau_plus=0.2")]


def test_summary_metrics_keep_numbers_and_nan_and_skip_other_values(tmp_path: Path) -> None:
    """summary.json writes a NaN metric as null (read back as nan: the seed diverged); a text value is no metric."""
    summary = {"metrics": {"eval/svm_acc": 0.7, "epochs": 3, "note": "text", "eval/loss": None},
               "primary_metric": "eval/svm_acc", "higher_is_better": True}
    record = rs.load_run(write_run(tmp_path, "r", {"plugin": "graph", "status": "completed"}, summary))
    assert record.metrics.keys() == {"eval/svm_acc", "epochs", "eval/loss"}
    assert record.metrics["eval/svm_acc"] == 0.7 and record.metrics["epochs"] == 3.0
    assert math.isnan(record.metrics["eval/loss"])
