"""Aggregation numbers, table layout (DCL Table 3 shape), CSV and failure marking on synthetic run directories."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats
from test_compare_support import write_synthetic_run

from contrastlab.experiments import report as rp
from contrastlab.experiments import results as rs
from contrastlab.experiments import tables as rt
from contrastlab.platform.errors import RunDirError

TAU = "--set loss.tau_plus="


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """The 95 % Student-t interval of the mean, from scipy (an implementation independent of ours)."""
    x = np.asarray(values, float)
    low, high = scipy_stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=scipy_stats.sem(x))
    return float(x.mean()), float(low), float(high)


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
    dirs = rs.find_run_dirs([table3])
    assert len(dirs) == 9
    groups = rs.group_runs([rs.load_run(d) for d in dirs])
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
    assert dcl05.interval("mean") == pytest.approx(t_interval([0.8, 0.9, 1.0]))  # Student-t, [0.6516, 1.1484]
    # the intervals of dcl τ+=0.05 and infonce [0.4516, 0.9484] overlap: no winner, a three-way tie
    verdict = rt.verdicts(groups)["toy"]
    assert verdict.winner is None
    assert verdict.leaders == ("dcl tau_plus=0.05", "dcl tau_plus=0.1", "infonce")
    failed = [r for r in dcl1.runs if r.status != "completed"]
    assert len(failed) == 1 and failed[0].error == "RuntimeError: loss is NaN at step 40"


def test_markdown_marks_best_and_failures(table3):
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([table3])])
    md = rt.markdown(groups)
    header = "| task | metric | dcl tau_plus=0.05 | dcl tau_plus=0.1 | infonce | best |"
    assert header in md
    row = next(line for line in md.splitlines() if line.startswith("| toy | score"))
    assert row == (
        "| toy | score (↑) | 0.9000 ± 0.1000 [0.6516, 1.1484] | 0.8000 ± 0.0707 [0.1647, 1.4353] (n=2/3) "
        "| 0.7000 ± 0.1000 [0.4516, 0.9484] | tie: dcl tau_plus=0.05, dcl tau_plus=0.1, infonce |"
    )
    assert "**" not in row  # overlapping intervals: nothing is bold
    assert "| toy | 0.9000 | 0.8000 | 0.7000 |" in md  # IQM: 2-3 seeds get no bootstrap interval
    assert "| toy | dcl tau_plus=0.1 | 3 | failed | RuntimeError: loss is NaN at step 40 |" in md


def test_lower_is_better_and_all_failed(tmp_path):
    for seed in (1, 2):
        write_synthetic_run(tmp_path, loss="a", seed=seed, final={"err": 0.2 + seed / 10}, primary="err")
        write_synthetic_run(tmp_path, loss="b", seed=seed, final={"err": 0.1 + seed / 10}, primary="err")
        write_synthetic_run(tmp_path, loss="c", seed=seed, status="failed", error="DataMissingError: no data")
    records = [rs.load_run(d) for d in rs.find_run_dirs([tmp_path])]
    for r in records:
        r.higher_is_better = False
    groups = rs.group_runs(records)
    assert rt.verdicts(groups)["toy"].leaders == ("b", "a")  # lower is better; the two intervals overlap
    md = rt.markdown(groups)
    assert "| 0.2500 ± 0.0707 [-0.3853, 0.8853] |" in md and "failed: DataMissingError: no data" in md


def test_rows_are_tasks_columns_are_losses(tmp_path):
    """Tasks (a non-loss key that varies) become rows, loss/τ+ columns: DCL Table 3 layout."""
    for task, base in (("cheetah", 300.0), ("walker", 500.0)):
        write_synthetic_run(tmp_path, loss="infonce", overrides=[f"--set env.task={task}"], final={"score": base})
        for tau, bonus in (("0.01", 10.0), ("0.1", 20.0)):
            write_synthetic_run(
                tmp_path, loss="dcl", overrides=[f"--set env.task={task}", f"{TAU}{tau}"], final={"score": base + bonus}
            )
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    md = rt.markdown(groups)
    assert "| task | metric | dcl tau_plus=0.01 | dcl tau_plus=0.1 | infonce | best |" in md
    # one seed each: no interval, so no winner can be claimed
    tie = "tie: dcl tau_plus=0.1, dcl tau_plus=0.01, infonce"
    assert f"| toy env.task=cheetah | score (↑) | 310.0 (n=1) | 320.0 (n=1) | 300.0 (n=1) | {tie} |" in md
    assert f"| toy env.task=walker | score (↑) | 510.0 (n=1) | 520.0 (n=1) | 500.0 (n=1) | {tie} |" in md
    # --rows moves keys explicitly; here nothing is a row, so the task joins the column label
    cols = {g.column for g in rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])], rows=[])}
    assert "dcl env.task=walker tau_plus=0.1" in cols


def test_csv_one_row_per_run(table3, tmp_path):
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([table3])])
    path = rt.write_csv(groups, tmp_path / "results.csv")
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 9
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"] == "RuntimeError: loss is NaN at step 40"
    assert failed[0]["seed"] == "3" and failed[0]["configuration"] == "dcl tau_plus=0.1"
    scores = sorted(float(r["score"]) for r in rows if r["configuration"] == "infonce")
    assert {r["metric.loss"] for r in rows if r["configuration"] == "infonce"} == {"1.0"}
    assert scores == [0.6, 0.7, 0.8]
    assert {r["overrides"] for r in rows if r["loss"] == "dcl"} == {"loss.tau_plus=0.05", "loss.tau_plus=0.1"}
    assert {(r["status"], r["wall_time_s"]) for r in rows} == {("completed", "1.5"), ("failed", "")}  # none: empty
    assert {r["preset"] for r in rows} == {"smoke"}


def test_fmt_and_errors(tmp_path):
    assert rt.fmt_mean_std(0.81234, 0.0131) == "0.8123 ± 0.0131"
    assert rt.fmt_mean_std(812.34, 12.0) == "812.3 ± 12.0"
    assert rt.fmt_mean_std(float("nan"), float("nan")) == "–"
    assert rt.fmt_interval(812.34, 790.0, 830.06) == "812.3 [790.0, 830.1]"
    assert rt.fmt_interval(0.5, float("nan"), float("nan")) == "0.5000"
    assert rs.parse_overrides(["--set a.b=1", "c=2", "--set seed=3"]) == {"a.b": "1", "c": "2"}
    with pytest.raises(RunDirError):
        rp.build_report([tmp_path], tmp_path / "out")
    with pytest.raises(RunDirError):
        rs.find_run_dirs([tmp_path / "missing"])


def test_single_seeds_are_never_a_winner(tmp_path):
    for loss in ("a", "b", "c"):
        write_synthetic_run(tmp_path, loss=loss, final={"score": 0.5 if loss != "c" else 0.4})
    md = rt.markdown(rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])]))
    assert "| toy | score (↑) | 0.5000 (n=1) | 0.5000 (n=1) | 0.4000 (n=1) | tie: a, b, c |" in md


def test_best_is_bold_only_when_its_interval_excludes_the_others(tmp_path):
    """Separated intervals give one bold winner; overlapping ones give a tie with the overlapping leaders."""
    scores = {"a": [0.90, 0.91, 0.92], "b": [0.50, 0.51, 0.52], "c": [0.88, 0.95, 0.99]}
    for loss, vals in scores.items():
        for seed, v in enumerate(vals, start=1):
            write_synthetic_run(tmp_path / "one", loss=loss, seed=seed, final={"score": v})
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path / "one"])])
    verdict = rt.verdicts(groups)["toy"]
    assert verdict.winner is None and verdict.leaders == ("c", "a")  # c has the best mean, a overlaps it
    md = rt.markdown(groups)
    assert "| tie: c, a |" in md and "**" not in md.split("## Per-task IQM")[0].split("| task |")[1]

    for loss, vals in {"a": [0.90, 0.91, 0.92], "b": [0.50, 0.51, 0.52]}.items():
        for seed, v in enumerate(vals, start=1):
            write_synthetic_run(tmp_path / "two", loss=loss, seed=seed, final={"score": v})
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path / "two"])])
    assert rt.verdicts(groups)["toy"].winner == "a" and rt.verdicts(groups)["toy"].leaders == ("a",)
    md = rt.markdown(groups)
    assert "| toy | score (↑) | **0.9100 ± 0.0100 [0.8852, 0.9348]** | 0.5100 ± 0.0100 [0.4852, 0.5348] | a |" in md
    summary = list(csv.DictReader(rt.write_summary_csv(groups, tmp_path / "summary.csv").open()))
    assert [(r["configuration"], r["verdict"], r["n"]) for r in summary] == [("a", "best", "3"), ("b", "", "3")]
    low, high = t_interval([0.90, 0.91, 0.92])[1:]
    assert float(summary[0]["ci_low"]) == pytest.approx(low) and float(summary[0]["ci_high"]) == pytest.approx(high)


def test_intervals_are_reproducible(table3, tmp_path):
    """The bootstrap has a fixed seed: rebuilding the report gives byte-identical tables."""
    first = rp.build_report([table3 / "runs"], tmp_path / "r1")
    second = rp.build_report([table3 / "runs"], tmp_path / "r2")
    for name in ("results.md", "summary.csv"):
        a = first[name].read_text().replace(str(tmp_path / "r1"), "")
        assert a == second[name].read_text().replace(str(tmp_path / "r2"), "")


def task_grid(root, rows: dict[str, dict[str, list[float]]]) -> list[rs.Group]:
    """``{task: {loss: [score per seed 1, 2, ...]}}`` written as runs (``env.task`` names the task), then grouped."""
    for task, cols in rows.items():
        for loss, vals in cols.items():
            for seed, v in enumerate(vals, start=1):
                write_synthetic_run(root, loss=loss, seed=seed, overrides=[f"--set env.task={task}"],
                                    final={"score": float(v)})
    return rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([root])])


def test_aggregate_over_tasks_is_stratified_iqm(tmp_path):
    """With two task rows the report adds rliable's aggregate: IQM over task × seed with a stratified interval."""
    rows = {"cheetah": {"infonce": [300, 310, 320, 330], "dcl": [340, 350, 360, 370]},
            "walker": {"infonce": [600, 610, 620, 900], "dcl": [640, 650, 660, 670]}}
    groups = task_grid(tmp_path, rows)
    cols = rt.aggregate_columns(groups)["score"]
    assert set(cols) == {"dcl", "infonce"}
    iqm, lo, hi = rt.aggregate_intervals(cols["infonce"], "iqm")
    pooled = sorted([300, 310, 320, 330, 600, 610, 620, 900])
    assert iqm == pytest.approx(sum(pooled[2:6]) / 4)  # the middle half of 8 scores
    assert lo < iqm < hi
    md = rt.markdown(groups)
    assert "## Aggregate over 2 tasks: score" in md
    assert f"| infonce | 8 | {iqm:.1f} [{lo:.1f}, {hi:.1f}] |" in md


def test_nan_final_metric_is_not_averaged(tmp_path):
    write_synthetic_run(tmp_path, loss="a", seed=1, final={"score": 0.5})
    write_synthetic_run(tmp_path, loss="a", seed=2, final={"score": 0.7})
    run = write_synthetic_run(tmp_path, loss="a", seed=3, final={"score": 0.1})
    summary = (run / "summary.json").read_text().replace("0.1", "NaN")
    (run / "summary.json").write_text(summary)
    (group,) = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert group.stats() == (pytest.approx(0.6), pytest.approx(math.sqrt(0.02)), 2)
    assert "0.6000 ± 0.1414 [-0.6706, 1.8706] (n=2/3)" in rt.markdown([group])


def test_unknown_rows_key_and_curve_tag_are_errors(tmp_path):
    import pytest

    from contrastlab.platform.errors import ConfigError

    write_synthetic_run(tmp_path, loss="infonce", overrides=["--set env.task=walk"], final={"score": 1.0})
    with pytest.raises(ConfigError, match=r"--rows foo\.bar is not a config key of any run"):
        rp.build_report([tmp_path], tmp_path / "out", rows=["foo.bar"])
    # any config.yaml key may name rows, so a typo is told the runs' sections and the closest key; it was told
    # "overridden keys: env.task" (for plain `platform train` runs: "(none)"), as if only those were allowed
    with pytest.raises(ConfigError, match=r"start with env\., loss\. \(see platform config\)\. "
                                          r"Did you mean 'loss\.name'\?$"):
        rp.build_report([tmp_path], tmp_path / "out", rows=["loss.nam"])
    with pytest.raises(ConfigError, match=r"Did you mean 'env\.task'\?$"):
        rp.build_report([tmp_path], tmp_path / "out", rows=["env.tsk"])
    with pytest.raises(ConfigError, match="--curve nosuch/tag was not logged"):
        rp.build_report([tmp_path], tmp_path / "out", curve="nosuch/tag")


def test_runs_that_no_loss_trained_are_listed_under_none(tmp_path):
    """pu's end-to-end baseline records loss_used: false: whatever --loss it was started with (and its loss.*
    settings) does not split or label it."""
    import json

    from contrastlab.platform.rundir import RunDir

    write_synthetic_run(tmp_path, loss="infonce", final={"score": 0.7})
    for loss, seed, extra in (("punce", 1, []), ("dcl", 2, [f"{TAU}0.1"])):
        run_dir = write_synthetic_run(tmp_path, loss=loss, seed=seed, overrides=["--set method=end_to_end", *extra],
                                      final={"score": 0.5})
        summary_path = RunDir(run_dir).summary_json
        summary_path.write_text(json.dumps({**json.loads(summary_path.read_text()), "loss_used": False}))
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    baseline = [g for g in groups if g.column.startswith("none")]
    assert len(baseline) == 1 and len(baseline[0].runs) == 2
    assert {g.column for g in groups} == {"infonce", "none"}


def test_a_run_found_twice_counts_once_and_an_unreadable_record_is_skipped(tmp_path):
    """The same (configuration, seed) in two compare folders was pooled twice (n inflated); a garbage run.json
    made a row of '?'. Both are left out, with a note."""
    for where, score in (("a", 0.5), ("b", 0.5)):
        write_synthetic_run(tmp_path / where, loss="infonce", seed=1, final={"score": score})
    write_synthetic_run(tmp_path / "b", loss="infonce", seed=2, final={"score": 0.7})
    write_synthetic_run(tmp_path / "c", loss="infonce", seed=2, status="failed", error="boom", name="again-s2")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "run.json").write_text("not json")
    notes: list[str] = []
    records = rp.collect_runs([tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "junk"], notes.append)
    assert sorted((r.seed, r.status) for r in records) == [(1, "completed"), (2, "completed")]
    assert len(notes) == 2 and "skipped 1 folder" in notes[0] and "junk" in notes[0]
    assert notes[1].startswith("2 run(s) repeat") and "again-s2" in notes[1]
    (group,) = rs.group_runs(records)
    assert group.stats()[2] == 2


def test_rows_may_name_a_config_key_no_run_overrode(tmp_path):
    """docs: --rows takes config keys; env.domain was refused unless every run had --set it."""
    import yaml

    for seed, domain in ((1, "cartpole"), (2, "walker")):
        run = write_synthetic_run(tmp_path, loss="infonce", seed=seed, name=f"{domain}-s{seed}", final={"score": 1.0})
        config = yaml.safe_load((run / "config.yaml").read_text())
        (run / "config.yaml").write_text(yaml.safe_dump({**config, "env": {"domain": domain}}))
    rp.build_report([tmp_path], tmp_path / "out", rows=["env.domain"])
    table = (tmp_path / "out" / "results.md").read_text()
    assert "env.domain=cartpole" in table and "env.domain=walker" in table


def test_a_configuration_whose_runs_were_all_stopped_reads_interrupted_not_failed(tmp_path):
    write_synthetic_run(tmp_path, loss="infonce", seed=1, status="interrupted")
    write_synthetic_run(tmp_path, loss="dcl", seed=1, status="failed", error="RuntimeError: boom")
    md = rt.markdown(rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])]))
    assert "interrupted (resumable)" in md and "failed: RuntimeError: boom" in md


def test_row_values_from_overrides_and_config_files_are_written_one_way(tmp_path):
    """`--set eval.linear=true` and a default `True` (and 1e-3 vs 0.001, or a null) name the same row."""
    import yaml

    for seed, override, config_value in ((1, "--set eval.lr=1e-3", 0.001), (2, None, 0.001), (3, None, None)):
        run = write_synthetic_run(tmp_path, loss="infonce", seed=seed, name=f"r{seed}", final={"score": 1.0},
                                  overrides=[override] if override else [])
        config = yaml.safe_load((run / "config.yaml").read_text())
        (run / "config.yaml").write_text(yaml.safe_dump({**config, "eval": {"lr": config_value}}))
    records = [rs.load_run(d) for d in rs.find_run_dirs([tmp_path])]
    rp.add_row_keys(records, ["eval.lr"])
    assert sorted(r.overrides["eval.lr"] for r in records) == ["0.001", "0.001", "null"]
    rp.build_report([tmp_path], tmp_path / "out", rows=["eval.lr"])
    table = (tmp_path / "out" / "results.md").read_text()
    assert "| toy eval.lr=0.001 | infonce | 2/2 |" in table and "eval.lr=null" in table  # one row for both


def test_one_completed_seed_of_several_says_so(tmp_path):
    """docs: "One seed shows (n=1); when some seeds did not complete, the cell shows (n=k/N)". With one seed of
    three completed the cell read `0.5000 (n=1)`, hiding the two failures."""
    write_synthetic_run(tmp_path, loss="a", seed=1, final={"score": 0.5})
    for seed in (2, 3):
        write_synthetic_run(tmp_path, loss="a", seed=seed, status="failed", error="boom")
    write_synthetic_run(tmp_path, loss="b", seed=1, final={"score": 0.4})
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert [rt.main_cell(g, False) for g in groups] == ["0.5000 (n=1/3)", "0.4000 (n=1)"]
    summary = list(csv.DictReader(rt.write_summary_csv(groups, tmp_path / "summary.csv").open()))
    assert [(r["n"], r["runs"], r["mean"], r["std"]) for r in summary] == [("1", "3", "0.5", ""), ("1", "1", "0.4", "")]


def test_completed_runs_without_a_finite_metric_are_not_called_failed_completed(tmp_path):
    """Every seed completed but diverged (NaN) or lacks the metric: the cell said `failed: completed`."""
    import json

    for seed in (1, 2):
        run = write_synthetic_run(tmp_path, loss="a", seed=seed, final={"score": 0.1})
        summary = json.loads((run / "summary.json").read_text())
        summary["metrics"] = {"score": float("nan")} if seed == 1 else {"other": 1.0}
        (run / "summary.json").write_text(json.dumps(summary))
    (group,) = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert rt.main_cell(group, False) == "failed: no finite score in 2 completed runs"


def test_rows_and_columns_are_in_numeric_order(tmp_path):
    """Labels sorted as text put `batch_size=128` before `batch_size=64` and `tau_plus=1e-3` after `0.1`; the
    numbers in labels are compared as numbers."""
    for batch in ("128", "64", "1024"):
        for tau in ("0.1", "0.05", "1e-3"):
            write_synthetic_run(tmp_path, loss="dcl", overrides=[f"--set train.batch_size={batch}", f"{TAU}{tau}"],
                                final={"score": 0.5})
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert list(dict.fromkeys(g.row for g in groups)) == [
        "toy train.batch_size=64", "toy train.batch_size=128", "toy train.batch_size=1024"
    ]
    columns = list(dict.fromkeys(g.column for g in groups))
    assert columns == ["dcl tau_plus=1e-3", "dcl tau_plus=0.05", "dcl tau_plus=0.1"]


def test_a_configuration_still_running_is_not_called_failed(tmp_path):
    """`platform report` on a compare that is still running: its unfinished configurations read `failed: running`."""
    write_synthetic_run(tmp_path, loss="a", seed=1, status="running")
    write_synthetic_run(tmp_path, loss="b", seed=1, final={"score": 0.5})
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert rt.main_cell(groups[0], False) == "running (no result yet)"


def test_two_seeds_apart_by_chance_are_a_tie_not_a_winner(tmp_path):
    """With two seeds the percentile bootstrap interval is [min, max]: [1.0, 1.1] and [1.2, 1.3] would have made
    b the winner, as happens for two identical configurations in about 1 comparison of 3. The t interval
    (±12.7·s/√2) keeps them tied."""
    for loss, vals in {"a": [1.0, 1.1], "b": [1.2, 1.3]}.items():
        for seed, v in enumerate(vals, start=1):
            write_synthetic_run(tmp_path, loss=loss, seed=seed, final={"score": v})
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    verdict = rt.verdicts(groups)["toy"]
    assert verdict.winner is None and verdict.leaders == ("b", "a")
    assert groups[1].interval("mean") == pytest.approx(t_interval([1.2, 1.3]))


def test_a_completed_run_whose_summary_is_unreadable_says_why(tmp_path):
    """A run.json that says completed beside a damaged summary.json showed status "incomplete" with an empty error
    column in results.md's "Runs not completed" table."""
    run_dir = write_synthetic_run(tmp_path, final={"score": 0.5})
    (run_dir / "summary.json").write_text("{truncated")
    record = rs.load_run(run_dir)
    assert record.status == "incomplete"
    assert record.error == "run.json says completed, but summary.json is missing or unreadable", record.error


def test_a_multi_line_error_with_a_pipe_stays_in_its_table_cell(tmp_path):
    """A failed run's error (torch's state_dict errors span lines) must not break the rows of results.md."""
    write_synthetic_run(tmp_path, loss="infonce", seed=1, final={"score": 0.5})
    error = "RuntimeError: Error(s) in loading state_dict:\n\tMissing key(s): a|b"
    write_synthetic_run(tmp_path, loss="dcl", seed=1, status="failed", error=error)
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    lines = rt.markdown(groups).splitlines()
    table = lines[lines.index("| task | metric | dcl | infonce | best |") :]
    assert table[2].startswith("| toy | score (↑) | failed: RuntimeError: Error(s) in loading state_dict: Missing")
    assert table[2].endswith("| 0.5000 (n=1) | – |")
    failure = next(line for line in lines if line.startswith("| toy | dcl | 1 | failed |"))
    assert "state_dict: Missing key(s): a\\|b |" in failure
    assert failure.endswith("base-s1 |") and failure.count(" | ") == 5


def test_values_equal_to_four_digits_are_two_columns_not_one(tmp_path):
    """Two τ+ sampled by tune that round to the same 4 digits: each keeps its own column, and the bold cell is the
    winner's (one label for both showed the loser's numbers under the winner's verdict)."""
    for seed in (1, 2):
        write_synthetic_run(tmp_path, loss="dcl", seed=seed, overrides=[f"{TAU}0.07930420320523977"],
                            final={"score": 0.5 + seed / 100})
        write_synthetic_run(tmp_path, loss="dcl", seed=seed, overrides=[f"{TAU}0.0793042"],
                            final={"score": 0.9 + seed / 100})
    write_synthetic_run(tmp_path, plugin="toy2", loss="dcl", overrides=[f"{TAU}0.07930420320523977"],
                        final={"score": 0.5})
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert [(g.row, g.column) for g in groups] == [
        ("toy", "dcl tau_plus=0.0793042"),
        ("toy", "dcl tau_plus=0.07930420320523977"),
        ("toy2", "dcl tau_plus=0.07930420320523977"),  # the same key is shown exactly in every row
    ]
    row = next(line for line in rt.markdown(groups).splitlines() if line.startswith("| toy | score"))
    assert row == ("| toy | score (↑) | **0.9150 ± 0.0071 [0.8515, 0.9785]** | 0.5150 ± 0.0071 [0.4515, 0.5785] | "
                   "dcl tau_plus=0.0793042 |")


def test_no_aggregate_winner_when_seeds_per_task_differ(tmp_path):
    """dcl equals infonce in both tasks but lost two seeds of the low-scoring one: pooled, its IQM rose by 150 and
    the aggregate named it the separated best."""
    rows = {"cheetah": {"infonce": [300, 301, 302], "dcl": [300]},
            "walker": {"infonce": [600, 601, 602], "dcl": [600, 601, 602]}}
    groups = task_grid(tmp_path, rows)
    md = rt.markdown(groups)
    aggregate = md[md.index("## Aggregate over 2 tasks") :]
    assert "**dcl**" not in aggregate
    assert ("Best IQM: not judged: the configurations have different numbers of seeds per task (dcl: 1, 3; "
            "infonce: 3, 3),") in aggregate


def test_the_main_table_says_how_many_seeds_it_averages_and_the_preset(table3):
    """The header read "mean ± std over seeds": a reader of results.md could not tell 3 seeds from 30, nor a smoke
    check (whose numbers mean nothing) from a paper-preset result: the preset was in no line of results.md."""
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([table3])])
    smoke = "Final score, preset smoke (a quick check of the pipeline, not a result): mean ± std over 3 seeds"
    assert f"{smoke} (sample std" in rt.markdown(groups)  # (n=2/3) too
    write_synthetic_run(table3, loss="hcl", seed=1, final={"score": 0.5}, preset="paper")  # one seed, other preset
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([table3])])
    md = rt.markdown(groups)
    assert "Final score, presets paper, smoke (in the task names): mean ± std over 1–3 seeds per configuration" in md
    assert "| toy preset=paper | score" in md
    paper = [g for g in groups if all(r.preset == "paper" for r in g.runs)]
    assert paper and rt.preset_note(paper) == ", preset paper"  # the quick-check note is smoke's alone


def test_labels_with_a_pipe_stay_in_their_table_cells(tmp_path):
    """A task or configuration label holding ``|`` (a value such as ``data.root=a|b``) split the table's columns."""
    for loss in ("infonce", "dcl"):
        for seed in (1, 2):
            write_synthetic_run(tmp_path, loss=loss, seed=seed, overrides=["--set env.task=a|b"],
                                final={"score": 0.5 + seed / 10})
    write_synthetic_run(tmp_path, loss="dcl", seed=1, overrides=["--set env.task=c"], final={"score": 0.4})
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    lines = rt.markdown(groups).splitlines()
    rows = [line for line in lines if line.startswith("| toy env.task=a")]
    assert rows and all(line.startswith("| toy env.task=a\\|b |") for line in rows)
    header = next(line for line in lines if line.startswith("| task | metric |"))
    for line in rows[:2]:  # the main table and the IQM table keep one cell per column
        assert line.replace("\\|", "").count("|") in (header.count("|"), header.count("|") - 2)


def test_a_failed_seed_keeps_its_error_beside_interrupted_or_diverged_ones(tmp_path):
    """No seed of `a` has a finite score: one crashed, the other was stopped (`b`) or completed with a NaN (`c`).
    The cell names the crash; it is neither resumable-only nor a mere missing metric."""
    import json

    write_synthetic_run(tmp_path, loss="a", seed=1, status="failed", error="RuntimeError: boom")
    write_synthetic_run(tmp_path, loss="a", seed=2, status="interrupted")
    write_synthetic_run(tmp_path, loss="b", seed=1, status="failed", error="RuntimeError: boom")
    run = write_synthetic_run(tmp_path, loss="b", seed=2, final={"score": 0.1})
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "metrics": {"score": float("nan")}}))
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert [rt.main_cell(g, False) for g in groups] == ["failed: RuntimeError: boom"] * 2


def test_one_completed_seed_of_two_shows_its_score_and_the_count_once(tmp_path):
    write_synthetic_run(tmp_path, loss="a", seed=1, final={"score": 0.5})
    write_synthetic_run(tmp_path, loss="a", seed=2, status="failed", error="boom")
    (group,) = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert rt.main_cell(group, False) == "0.5000 (n=1/2)"


def test_the_table_separators_have_one_cell_per_column(table3):
    """A Markdown table whose separator row has fewer cells than its header is not rendered as a table."""
    lines = rt.markdown(rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([table3])])).splitlines()
    headers = [i for i, line in enumerate(lines[:-1]) if lines[i + 1].startswith("|---")]
    assert len(headers) == 4  # main table, per-task IQM, all final metrics, runs not completed
    for i in headers:
        assert lines[i + 1].count("---") == lines[i].count(" | ") + 1, (lines[i], lines[i + 1])


def test_aggregate_names_a_separated_winner_and_the_configurations_left_out(tmp_path):
    """dcl is 100 above infonce at every seed of both tasks: every bootstrap replicate of its pooled IQM (the mean of
    the middle 4 of 6 scores) is at least (400 + 400 + 700 + 700) / 4 = 550, and infonce's at most
    (302 + 302 + 602 + 602) / 4 = 452, so the intervals are apart and dcl is the best. hcl ran in one task only."""
    rows = {"cheetah": {"infonce": [300, 301, 302], "dcl": [400, 401, 402], "hcl": [350, 351, 352]},
            "walker": {"infonce": [600, 601, 602], "dcl": [700, 701, 702]}}
    md = rt.markdown(task_grid(tmp_path, rows))
    aggregate = md[md.index("## Aggregate over 2 tasks") :]
    assert "| **dcl** | 6 |" in aggregate and "| infonce | 6 |" in aggregate and "Best IQM: dcl." in aggregate
    assert "Not aggregated (missing or failed in some task): hcl." in aggregate


def test_summary_csv_rows_fill_the_header_and_two_seeds_have_a_std(table3, tmp_path):
    """Every row has one cell per header column (no paired comparison here: its 8 columns are empty), and the
    sample std is left out only for a single seed: dcl tau_plus=0.1 completed 2 seeds, 0.75 and 0.85."""
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([table3])])
    path = rt.write_summary_csv(groups, tmp_path / "summary.csv")
    rows = list(csv.reader(path.open()))
    assert {len(r) for r in rows} == {len(rows[0])} and rows[0][-8:][0] == "baseline"
    by_name = {r["configuration"]: r for r in csv.DictReader(path.open())}
    assert by_name["dcl tau_plus=0.1"]["n"] == "2"
    assert float(by_name["dcl tau_plus=0.1"]["std"]) == pytest.approx(np.std([0.75, 0.85], ddof=1), rel=1e-5)


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_touching_intervals_tie_with_the_leader(higher_is_better):
    """As in stats.separated, an interval that touches the leader's overlaps it: `b` ties, `c` (apart) does not."""
    if higher_is_better:
        cands = [("c", 0.3, 0.1, 0.4), ("b", 0.7, 0.5, 0.8), ("top", 1.0, 0.8, 1.2)]
    else:
        cands = [("c", 0.9, 0.8, 1.0), ("b", 0.5, 0.3, 0.7), ("top", 0.2, 0.1, 0.3)]
    assert rt.judge(cands, higher_is_better) == rt.Verdict(None, ("top", "b"))


def test_the_aggregate_verdict_is_judged_on_the_iqm_intervals(tmp_path):
    """infonce has one outlier (5000) among 16 scores: it lifts infonce's mean above dcl's, and its mean interval
    (no outlier drawn in a task's 8 resampled seeds: probability (7/8)^8 = 0.34) reaches down to dcl's: by mean,
    a tie. The IQM (middle 8 of 16: cheetah's top 4 and walker's bottom 4) drops it unless it is drawn 5 times of 8
    (about 0.1 % of replicates), so infonce's IQM stays below (307·4 + 606·4)/8 = 456.5 and dcl's is at least 500:
    by the IQM the table reports, dcl is the best."""
    rows = {"cheetah": {"infonce": list(range(300, 308)), "dcl": list(range(350, 358))},
            "walker": {"infonce": [*range(600, 607), 5000], "dcl": list(range(650, 658))}}
    md = rt.markdown(task_grid(tmp_path, rows))
    aggregate = md[md.index("## Aggregate over 2 tasks") :]
    assert "Best IQM: dcl." in aggregate and "| **dcl** | 16 |" in aggregate
    cols = rt.aggregate_columns(task_grid(tmp_path / "again", rows))["score"]
    by_mean = rt.judge([(c, *rt.aggregate_intervals(gs, "mean")) for c, gs in cols.items()])
    assert by_mean.winner is None  # what the verdict would have said from the mean intervals



def test_a_configuration_still_running_beside_a_stopped_seed_says_running(tmp_path):
    """One seed still running, another interrupted, no error: the cell read `failed: running` or
    `failed: interrupted`, whichever a set gave first (it changed from one `platform report` to the next), for a
    configuration that had not failed."""
    write_synthetic_run(tmp_path, loss="a", seed=1, status="running")
    write_synthetic_run(tmp_path, loss="a", seed=2, status="interrupted")
    (group,) = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert rt.main_cell(group, False) == "running (no result yet)"


def test_a_diverged_seed_is_reported_while_another_still_runs(tmp_path):
    """One seed still running beside one that completed with a NaN metric: the cell names the divergence now
    (a seed that diverged is news that should not wait for the others to finish), not `running (no result yet)`."""
    write_synthetic_run(tmp_path, loss="a", seed=1, status="running")
    run = write_synthetic_run(tmp_path, loss="a", seed=2, final={"score": 0.25})
    (run / "summary.json").write_text((run / "summary.json").read_text().replace("0.25", "NaN"))
    (group,) = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    assert rt.main_cell(group, False) == "failed: no finite score in 1 completed run"


def test_results_md_warns_beside_a_loss_curve_that_levels_do_not_compare(tmp_path):
    """New-user trial: simclr smoke draws train/loss (infonce ≈ 4.1 against dcl ≈ 3.6) and lower reads as better;
    results.md named the tag without compare.md's warning that each loss has its own scale."""
    for loss in ("infonce", "dcl"):
        write_synthetic_run(tmp_path, loss=loss, seed=1, final={"score": 0.5}, curve=[0.1, 0.2])
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])])
    lines = rt.markdown(groups, {"toy": "train/loss", "pu": "pretrain/loss_vs_env_frames", "rl": "eval/loss_rate",
                                 "none": None}).splitlines()
    start = lines.index("Learning curves (`curves.png`, `aggregate.png`) show, per task:")
    assert lines[start + 1: start + 5] == [
        f"- toy: `train/loss`{rt.LOSS_CURVE_NOTE}", f"- pu: `pretrain/loss_vs_env_frames`{rt.LOSS_CURVE_NOTE}",
        "- rl: `eval/loss_rate`", "- none: `nothing logged`"]
    assert "compare the curves' shapes, not levels" in rt.LOSS_CURVE_NOTE
