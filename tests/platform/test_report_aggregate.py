"""Aggregation numbers, table layout (DCL Table 3 shape), CSV and failure marking on synthetic run directories."""

from __future__ import annotations

import csv
import math

import pytest
from test_compare_support import write_synthetic_run

from contrastlab.platform import report as rp
from contrastlab.platform.errors import RunDirError

TAU = "--set loss.tau_plus="


@pytest.fixture
def table3(tmp_path):
    """infonce × 3 seeds; dcl at τ+ 0.05 × 3 seeds; dcl at τ+ 0.1: 2 completed + 1 failed."""
    for seed, v in zip([1, 2, 3], [0.6, 0.7, 0.8], strict=True):
        write_synthetic_run(tmp_path, loss="infonce", seed=seed, final={"score": v, "loss": 1.0})
    for seed, v in zip([1, 2, 3], [0.8, 0.9, 1.0], strict=True):
        write_synthetic_run(tmp_path, loss="dcl", seed=seed, overrides=[f"{TAU}0.05"], final={"score": v, "loss": 2.0})
    for seed, v in zip([1, 2], [0.75, 0.85], strict=True):
        write_synthetic_run(tmp_path, loss="dcl", seed=seed, overrides=[f"{TAU}0.1"], final={"score": v})
    write_synthetic_run(
        tmp_path,
        loss="dcl",
        seed=3,
        overrides=[f"{TAU}0.1"],
        status="failed",
        error="RuntimeError: loss is NaN at step 40",
    )
    return tmp_path


def test_grouping_and_stats(table3):
    dirs = rp.find_run_dirs([table3])
    assert len(dirs) == 9
    groups = rp.group_runs([rp.load_run(d) for d in dirs])
    assert [(g.row, g.column) for g in groups] == [
        ("toy", "dcl tau_plus=0.05"),
        ("toy", "dcl tau_plus=0.1"),
        ("toy", "infonce"),
    ]
    dcl05, dcl1, infonce = groups
    mean, std, n = infonce.stats()
    assert (mean, n) == (pytest.approx(0.7), 3) and std == pytest.approx(0.1)  # sample std (n-1)
    assert dcl05.stats() == (pytest.approx(0.9), pytest.approx(0.1), 3)
    mean, std, n = dcl1.stats()
    assert (mean, n) == (pytest.approx(0.8), 2) and std == pytest.approx(math.sqrt(0.005))
    assert dcl05.stats("loss") == (pytest.approx(2.0), pytest.approx(0.0), 3)
    assert rp.best_by_row(groups)["toy"] is dcl05
    failed = [r for r in dcl1.runs if r.status != "completed"]
    assert len(failed) == 1 and failed[0].error == "RuntimeError: loss is NaN at step 40"


def test_markdown_marks_best_and_failures(table3):
    groups = rp.group_runs([rp.load_run(d) for d in rp.find_run_dirs([table3])])
    md = rp.markdown(groups)
    header = "| task | metric | dcl tau_plus=0.05 | dcl tau_plus=0.1 | infonce |"
    assert header in md
    row = next(line for line in md.splitlines() if line.startswith("| toy | score"))
    assert row == "| toy | score (↑) | **0.9000 ± 0.1000** | 0.8000 ± 0.0707 (n=2/3) | 0.7000 ± 0.1000 |"
    assert "| toy | dcl tau_plus=0.1 | 3 | failed | RuntimeError: loss is NaN at step 40 |" in md


def test_lower_is_better_and_all_failed(tmp_path):
    for seed in (1, 2):
        write_synthetic_run(tmp_path, loss="a", seed=seed, final={"err": 0.2 + seed / 10}, primary="err")
        write_synthetic_run(tmp_path, loss="b", seed=seed, final={"err": 0.1 + seed / 10}, primary="err")
        write_synthetic_run(tmp_path, loss="c", seed=seed, status="failed", error="DataMissingError: no data")
    records = [rp.load_run(d) for d in rp.find_run_dirs([tmp_path])]
    for r in records:
        r.higher_is_better = False
    groups = rp.group_runs(records)
    assert rp.best_by_row(groups)["toy"].column == "b"
    md = rp.markdown(groups)
    assert "**0.2500 ± 0.0707**" in md and "failed: DataMissingError: no data" in md


def test_rows_are_tasks_columns_are_losses(tmp_path):
    """Tasks (a non-loss key that varies) become rows, loss/τ+ columns: DCL Table 3 layout."""
    for task, base in (("cheetah", 300.0), ("walker", 500.0)):
        write_synthetic_run(tmp_path, loss="infonce", overrides=[f"--set env.task={task}"], final={"score": base})
        for tau, bonus in (("0.01", 10.0), ("0.1", 20.0)):
            write_synthetic_run(
                tmp_path, loss="dcl", overrides=[f"--set env.task={task}", f"{TAU}{tau}"], final={"score": base + bonus}
            )
    groups = rp.group_runs([rp.load_run(d) for d in rp.find_run_dirs([tmp_path])])
    md = rp.markdown(groups)
    assert "| task | metric | dcl tau_plus=0.01 | dcl tau_plus=0.1 | infonce |" in md
    assert "| toy env.task=cheetah | score (↑) | 310.0 (n=1) | **320.0 (n=1)** | 300.0 (n=1) |" in md
    assert "| toy env.task=walker | score (↑) | 510.0 (n=1) | **520.0 (n=1)** | 500.0 (n=1) |" in md
    # --rows moves keys explicitly; here nothing is a row, so the task joins the column label
    cols = {g.column for g in rp.group_runs([rp.load_run(d) for d in rp.find_run_dirs([tmp_path])], rows=[])}
    assert "dcl env.task=walker tau_plus=0.1" in cols


def test_csv_one_row_per_run(table3, tmp_path):
    groups = rp.group_runs([rp.load_run(d) for d in rp.find_run_dirs([table3])])
    path = rp.write_csv(groups, tmp_path / "results.csv")
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 9
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"] == "RuntimeError: loss is NaN at step 40"
    assert failed[0]["seed"] == "3" and failed[0]["configuration"] == "dcl tau_plus=0.1"
    scores = sorted(float(r["score"]) for r in rows if r["configuration"] == "infonce")
    assert {r["metric.loss"] for r in rows if r["configuration"] == "infonce"} == {"1.0"}
    assert scores == [0.6, 0.7, 0.8]
    assert {r["overrides"] for r in rows if r["loss"] == "dcl"} == {"loss.tau_plus=0.05", "loss.tau_plus=0.1"}


def test_fmt_and_errors(tmp_path):
    assert rp.fmt_mean_std(0.81234, 0.0131) == "0.8123 ± 0.0131"
    assert rp.fmt_mean_std(812.34, 12.0) == "812.3 ± 12.0"
    assert rp.fmt_mean_std(float("nan"), float("nan")) == "–"
    assert rp.parse_overrides(["--set a.b=1", "c=2", "--set seed=3"]) == {"a.b": "1", "c": "2"}
    with pytest.raises(RunDirError):
        rp.build_report([tmp_path], tmp_path / "out")
    with pytest.raises(RunDirError):
        rp.find_run_dirs([tmp_path / "missing"])


def test_ties_are_all_marked(tmp_path):
    for loss in ("a", "b", "c"):
        write_synthetic_run(tmp_path, loss=loss, final={"score": 0.5 if loss != "c" else 0.4})
    md = rp.markdown(rp.group_runs([rp.load_run(d) for d in rp.find_run_dirs([tmp_path])]))
    assert "| toy | score (↑) | **0.5000 (n=1)** | **0.5000 (n=1)** | 0.4000 (n=1) |" in md


def test_nan_final_metric_is_not_averaged(tmp_path):
    write_synthetic_run(tmp_path, loss="a", seed=1, final={"score": 0.5})
    write_synthetic_run(tmp_path, loss="a", seed=2, final={"score": 0.7})
    run = write_synthetic_run(tmp_path, loss="a", seed=3, final={"score": 0.1})
    summary = (run / "summary.json").read_text().replace("0.1", "NaN")
    (run / "summary.json").write_text(summary)
    (group,) = rp.group_runs([rp.load_run(d) for d in rp.find_run_dirs([tmp_path])])
    assert group.stats() == (pytest.approx(0.6), pytest.approx(math.sqrt(0.02)), 2)
    assert "**0.6000 ± 0.1414** (n=2/3)" in rp.markdown([group])


def test_unknown_rows_key_and_curve_tag_are_errors(tmp_path):
    import pytest

    from contrastlab.platform.errors import ConfigError

    write_synthetic_run(tmp_path, loss="infonce", overrides=["--set env.task=walk"], final={"score": 1.0})
    with pytest.raises(ConfigError, match=r"--rows foo\.bar is not an override"):
        rp.build_report([tmp_path], tmp_path / "out", rows=["foo.bar"])
    with pytest.raises(ConfigError, match="--curve nosuch/tag was not logged"):
        rp.build_report([tmp_path], tmp_path / "out", curve="nosuch/tag")
