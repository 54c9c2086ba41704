"""The paired comparison of results.md: each configuration minus the baseline seed by seed, Holm per task."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats as scipy_stats
from test_compare_support import write_synthetic_run

from contrastlab.experiments import paired as pr
from contrastlab.experiments import report as rp
from contrastlab.experiments import results as rs
from contrastlab.platform.errors import ConfigError
from contrastlab.testing import run_cli

TAU = "--set loss.tau_plus="


def groups_of(root) -> list[rs.Group]:
    return rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([root])])


def paired_text_lines(groups: list[rs.Group], baseline: str | None = None) -> list[str]:
    """The results.md section, as build_report makes it: the pairs computed once, then shown."""
    return pr.paired_lines(groups, pr.compare_to_baseline(groups, baseline), baseline)


def write(root, loss: str, values: list[float], tau: float | None = None, seeds=None) -> None:
    for seed, value in zip(seeds or range(1, len(values) + 1), values, strict=True):
        write_synthetic_run(root, loss=loss, seed=seed, overrides=[f"{TAU}{tau}"] if tau is not None else [],
                            final={"score": value})


def test_p_value_and_interval_are_scipys_paired_t_test() -> None:
    base, other = np.array([0.61, 0.70, 0.82, 0.55, 0.74]), np.array([0.64, 0.71, 0.86, 0.60, 0.73])
    assert pr.paired_p_value(other - base) == pytest.approx(scipy_stats.ttest_rel(other, base).pvalue, rel=1e-9)
    assert math.isnan(pr.paired_p_value([0.1]))
    assert pr.paired_p_value([0.0, 0.0]) == 1.0


def test_equal_differences_at_every_seed_take_the_sign_tests_p_value() -> None:
    """The t statistic is undefined when every seed differs by the same amount (a discrete metric such as accuracy
    on a small test set does that by chance: one more graph right on both seeds); p = 0 called two seeds "better".
    The exact sign test's two-sided p-value, 2 · 0.5ⁿ, is used instead."""
    assert pr.paired_p_value([0.0033, 0.0033]) == 0.5
    assert pr.paired_p_value([0.02, 0.02, 0.02]) == 0.25
    assert pr.paired_p_value([-0.01] * 6) == pytest.approx(0.03125)


def test_holm_steps_down_and_stops_at_the_first_kept_hypothesis() -> None:
    # sorted: 0.01 <= 0.05/3 rejected; 0.03 > 0.05/2 kept, so 0.04 is kept too although it is below 0.05
    assert pr.holm_rejections([0.04, 0.01, 0.03]) == [False, True, False]
    assert pr.holm_rejections([0.01, 0.02, 0.04]) == [True, True, True]  # 0.01<=.0167, 0.02<=.025, 0.04<=.05
    assert pr.holm_rejections([math.nan, 0.03]) == [False, True]  # an untestable pair does not count in m
    # the k-th smallest of m is rejected when p <= alpha / (m - k + 1): equality rejects
    assert pr.holm_rejections([0.05]) == [True] and pr.holm_rejections([0.025, 0.025]) == [True, True]


def test_a_shared_seed_effect_is_found_where_the_main_tables_intervals_tie(tmp_path) -> None:
    """dcl is 0.02-0.03 above infonce at every seed, while the seeds themselves spread by 0.2: the main table
    calls it a tie, the paired test calls it better."""
    write(tmp_path, "infonce", [0.60, 0.70, 0.80])
    write(tmp_path, "dcl", [0.62, 0.72, 0.83])
    groups = groups_of(tmp_path)
    (pair,) = pr.compare_to_baseline(groups)
    d = np.array([0.02, 0.02, 0.03])
    half = scipy_stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert pair.baseline == "infonce" and pair.column == "dcl"
    assert (pair.mean, pair.low, pair.high) == pytest.approx((d.mean(), d.mean() - half, d.mean() + half))
    assert pair.verdict == "better" and pair.wins == 3
    text = (tmp_path / "out" / "results.md")
    rp.build_report([tmp_path / "runs"], tmp_path / "out")
    md = text.read_text()
    assert "tie: " in md.split("## Against the baseline")[0]  # the main table cannot tell them apart
    assert "| toy | dcl | infonce | +0.0233 [" in md and "| 3/3 seeds | 0.020 | better |" in md


def test_worse_no_difference_direction_and_unpaired_seeds(tmp_path) -> None:
    """Lower-is-better metrics flip the verdict; only seeds both completed are paired; identical runs show no
    difference."""
    write(tmp_path, "infonce", [0.60, 0.70, 0.80, 0.5], seeds=[1, 2, 3, 4])
    write(tmp_path, "dcl", [0.50, 0.61, 0.69])      # 0.1 lower at seeds 1-3; seed 4 missing
    write(tmp_path, "hcl", [0.60, 0.70, 0.80, 0.5], seeds=[1, 2, 3, 4])
    groups = groups_of(tmp_path)
    pairs = {p.column: p for p in pr.compare_to_baseline(groups)}
    assert len(pairs["dcl"].differences) == 3 and pairs["dcl"].verdict == "worse" and pairs["dcl"].wins == 0
    assert pairs["hcl"].p_value == 1.0 and pairs["hcl"].verdict == "no difference shown"
    assert pairs["hcl"].wins == 0  # a seed with the same score is no win
    for g in groups:
        for run in g.runs:
            run.higher_is_better = False
    pairs = {p.column: p for p in pr.compare_to_baseline(groups)}
    assert pairs["dcl"].verdict == "better" and pairs["dcl"].wins == 3


def test_one_seed_has_no_verdict(tmp_path) -> None:
    write(tmp_path, "infonce", [0.6])
    write(tmp_path, "dcl", [0.7])
    (pair,) = pr.compare_to_baseline(groups_of(tmp_path))
    assert pair.verdict == "–" and math.isnan(pair.low)
    assert "| +0.1000 (n=1) | 1/1 seeds | – | – |" in "\n".join(paired_text_lines(groups_of(tmp_path)))


def test_the_baseline_is_infonce_unless_named_and_a_wrong_name_is_one_line(tmp_path) -> None:
    write(tmp_path, "dcl", [0.60, 0.70, 0.80], tau=0.1)
    write(tmp_path, "dcl", [0.62, 0.72, 0.83], tau=0.05)
    groups = groups_of(tmp_path)
    assert pr.compare_to_baseline(groups) == []
    assert "No comparison: no task has exactly one configuration of loss `infonce`" in "\n".join(
        paired_text_lines(groups))
    (pair,) = pr.compare_to_baseline(groups, baseline="dcl tau_plus=0.1")
    assert pair.column == "dcl tau_plus=0.05" and pair.verdict == "better"
    with pytest.raises(ConfigError, match=re.escape("--baseline 'dcl' is not a configuration of this report; "
                                                    "configurations: 'dcl tau_plus=0.05', 'dcl tau_plus=0.1'")):
        rp.build_report([tmp_path / "runs"], tmp_path / "out", baseline="dcl")
    assert not (tmp_path / "out").exists()  # checked before anything is written


def test_platform_report_prints_the_paired_comparison_and_takes_baseline(tmp_path) -> None:
    write(tmp_path, "infonce", [0.60, 0.70, 0.80])
    write(tmp_path, "dcl", [0.62, 0.72, 0.83])
    code, out = run_cli(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    assert code == 0, out
    assert "## Against the baseline, paired by seed" in out and "| toy | dcl | infonce |" in out
    assert "## Per-task IQM" not in out  # the rest stays in results.md
    code, out = run_cli(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--baseline", "dcl"])
    assert code == 0, out
    assert "| toy | infonce | dcl | -0.0233 [" in out and "| worse |" in out
    code, out = run_cli(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "o2"), "--baseline", "hcl"])
    assert code != 0 and "--baseline 'hcl' is not a configuration" in out and "Traceback" not in out


def test_summary_csv_carries_the_paired_comparison(tmp_path) -> None:
    import csv

    write(tmp_path, "infonce", [0.60, 0.70, 0.80])
    write(tmp_path, "dcl", [0.62, 0.72, 0.83])
    rp.build_report([tmp_path / "runs"], tmp_path / "out")
    rows = {r["configuration"]: r for r in csv.DictReader((tmp_path / "out" / "summary.csv").open())}
    dcl, infonce = rows["dcl"], rows["infonce"]
    assert (dcl["baseline"], dcl["paired_n"], dcl["paired_wins"], dcl["paired_verdict"]) == ("infonce", "3", "3",
                                                                                             "better")
    assert float(dcl["paired_diff"]) == pytest.approx(0.07 / 3, rel=1e-5) and float(dcl["paired_p"]) == pytest.approx(
        scipy_stats.ttest_rel([0.62, 0.72, 0.83], [0.60, 0.70, 0.80]).pvalue, rel=1e-5)
    assert float(dcl["paired_ci_low"]) < float(dcl["paired_diff"]) < float(dcl["paired_ci_high"])
    assert all(infonce[k] == "" for k in ("baseline", "paired_n", "paired_diff", "paired_verdict"))


def test_a_baseline_alone_in_its_task_is_not_reported_as_missing(tmp_path) -> None:
    """infonce ran at the smoke preset and dcl at paper, so they are two tasks: the section said no task had an
    infonce configuration (and, with --baseline infonce, no task had 'infonce'), and told to name one."""
    for seed, value in enumerate([0.6, 0.7, 0.8], start=1):
        write_synthetic_run(tmp_path, loss="infonce", seed=seed, final={"score": value}, preset="smoke")
        write_synthetic_run(tmp_path, loss="dcl", seed=seed, final={"score": value + 0.1}, preset="paper")
    groups = groups_of(tmp_path)
    for baseline in (None, "infonce"):
        (line,) = [x for x in paired_text_lines(groups, baseline) if x.startswith("No comparison")]
        assert "no task has" not in line and "--baseline" not in line, line
        assert "no other configuration shares a task with the baseline (the tasks with one: toy preset=smoke)" in line


def test_a_label_with_a_bar_is_escaped_in_the_table_only(tmp_path) -> None:
    """md_cell's ``\\|`` belongs in table cells; in the sentence naming the baseline (a code span) it showed."""
    for loss, values in (("infonce", [0.6, 0.7, 0.8]), ("dcl", [0.62, 0.72, 0.83])):
        for seed, value in enumerate(values, start=1):
            write_synthetic_run(tmp_path, loss=loss, seed=seed, final={"score": value},
                                overrides=["--set data.root=a|b"] if loss == "infonce" else [])
    groups = rs.group_runs([rs.load_run(d) for d in rs.find_run_dirs([tmp_path])], rows=[])
    text = "\n".join(paired_text_lines(groups, "infonce data.root=a|b"))
    assert "(`infonce data.root=a|b`)" in text and "| dcl | infonce data.root=a\\|b |" in text, text


def test_tasks_left_out_of_the_paired_table_are_named(tmp_path) -> None:
    """A task without the baseline was silently missing from the paired table, as if it had been compared."""
    for seed, (a, b) in enumerate([(0.60, 0.62), (0.70, 0.72), (0.80, 0.83)], start=1):
        write_synthetic_run(tmp_path, loss="infonce", seed=seed, overrides=["--set env.task=a"], final={"score": a})
        write_synthetic_run(tmp_path, loss="dcl", seed=seed, overrides=["--set env.task=a"], final={"score": b})
        write_synthetic_run(tmp_path, loss="dcl", seed=seed, overrides=["--set env.task=b"], final={"score": b})
        write_synthetic_run(tmp_path, loss="hcl", seed=seed, overrides=["--set env.task=b"], final={"score": a})
    text = "\n".join(paired_text_lines(groups_of(tmp_path)))
    assert "| toy env.task=a | dcl | infonce |" in text
    assert "Not compared (no `infonce` configuration in the task): toy env.task=b." in text
    write_synthetic_run(tmp_path, loss="infonce", seed=1, overrides=["--set env.task=c"], final={"score": 0.5})
    text = "\n".join(paired_text_lines(groups_of(tmp_path)))  # a task with the baseline alone is not "without" one
    assert "Not compared (no `infonce` configuration in the task): toy env.task=b." in text


def test_p_values_below_one_in_a_thousand_are_shown_as_such(tmp_path) -> None:
    """The p column prints three decimals; only p < 0.001, which would print as 0.000, reads "< 0.001"."""
    write(tmp_path, "infonce", [0.60, 0.70, 0.80])
    write(tmp_path, "dcl", [0.62, 0.72, 0.83])
    groups = groups_of(tmp_path)
    (pair,) = pr.compare_to_baseline(groups)
    for p_value, shown in ((0.0009, "< 0.001"), (0.001, "0.001"), (0.0012, "0.001"), (0.0151, "0.015")):
        text = "\n".join(pr.paired_lines(groups, [replace(pair, p_value=p_value)]))
        assert f"| 3/3 seeds | {shown} | better |" in text, (p_value, text)


@pytest.mark.parametrize(("base", "other", "delta"), [
    ([49.0, 50.0, 51.0], [149.0, 150.0, 152.0], "+100.33 [+98.90, +101.77]"),  # the baseline's 50.00: 2 decimals
    ([1.0, 1.0, 1.0], [0.98, 0.99, 0.985], "-0.015 [-0.027, -0.003]"),  # an accuracy of 1.000: 3 decimals
    ([-1.0, 0.0, 1.0], [99.0, 100.0, 102.0], "+100.3 [+98.9, +101.8]"),  # a baseline mean of 0: the difference's
])  # fmt: skip
def test_the_difference_has_the_decimals_of_the_baselines_cell(tmp_path, base, other, delta) -> None:
    """Δ is printed with as many decimals as the baseline's mean in the main table (decimals of its magnitude:
    1 to 4), or, when that mean is 0, as many as the difference's own magnitude asks for."""
    write(tmp_path, "infonce", base)
    write(tmp_path, "dcl", other)
    d = np.array(other) - np.array(base)
    half = scipy_stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    dec = len(delta.split(" ")[0].split(".")[1])
    assert delta == f"{d.mean():+.{dec}f} [{d.mean() - half:+.{dec}f}, {d.mean() + half:+.{dec}f}]"  # the numbers
    assert f"| toy | dcl | infonce | {delta} |" in "\n".join(paired_text_lines(groups_of(tmp_path)))
