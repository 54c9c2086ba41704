"""The tables of ``platform report``: ``results.md``, ``results.csv`` and ``summary.csv``.

The main table's interval of a configuration's mean is a 95 % Student-t interval over its seeds; the IQM and the
aggregate over tasks get 95 % percentile bootstrap intervals with a fixed seed (:mod:`.stats`), so a rebuilt
report prints the same numbers. "Best" is claimed only where the best configuration's interval excludes every other
configuration's interval in the same task; otherwise the task's ``best`` cell says ``tie`` and names the
configurations whose intervals overlap the leader's.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contrastlab.experiments import stats as st
from contrastlab.experiments.formatting import decimals, fmt_interval, fmt_mean_std, md_cell
from contrastlab.experiments.paired import Paired
from contrastlab.experiments.results import Group, is_training_loss_tag

CI_NOTE = (
    "95 % CI: Student-t interval of the mean over seeds (mean ± t·s/√n; undefined for one seed)"
)
"""How the intervals were computed (printed under the tables)."""


# ---------------------------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    """Which configuration of a task (or of the aggregate) is best, if the intervals can tell."""

    winner: str | None
    """The best configuration, set only when its interval excludes every other configuration's."""
    leaders: tuple[str, ...]
    """The winner alone, or the best mean plus every configuration whose interval overlaps it (a tie)."""

    @property
    def text(self) -> str:
        """``dcl tau_plus=0.1``, ``tie: a, b`` or ``–`` (fewer than two configurations to compare)."""
        if self.winner:
            return self.winner
        return f"tie: {', '.join(self.leaders)}" if self.leaders else "–"


def judge(cands: Sequence[tuple[str, float, float, float]], higher_is_better: bool = True) -> Verdict:
    """Decide the best of ``cands`` = ``(name, estimate, low, high)`` from their intervals.

    The leader is the best estimate. It wins only if :func:`.stats.separated` holds against all others; else it
    ties with every candidate whose interval overlaps its own (or is undefined).
    """
    live = [c for c in cands if not math.isnan(c[1])]
    if len(live) < 2:
        return Verdict(None, ())
    sign = 1.0 if higher_is_better else -1.0
    live.sort(key=lambda c: -sign * c[1])
    top, others = live[0], live[1:]
    if st.separated((top[2], top[3]), [(c[2], c[3]) for c in others], higher_is_better):
        return Verdict(top[0], (top[0],))
    tied = [top[0]]
    for name, _, lo, hi in others:
        unknown = any(math.isnan(v) for v in (lo, hi, top[2], top[3]))
        if unknown or not (hi < top[2] or lo > top[3]):
            tied.append(name)
    return Verdict(None, tuple(tied))


def verdicts(groups: Sequence[Group], stat: str = "mean") -> dict[str, Verdict]:
    """One :class:`Verdict` per task row, on the primary metric's ``stat`` intervals."""
    out = {}
    for row in dict.fromkeys(g.row for g in groups):
        mine = [g for g in groups if g.row == row]
        out[row] = judge([(g.column, *g.interval(stat)) for g in mine], mine[0].higher_is_better)
    return out


def _failed_text(g: Group) -> str:
    if all(r.status == "interrupted" for r in g.runs):  # stopped, not broken: `--resume` (or compare again) goes on
        return "interrupted (resumable)"
    err = next((r.error for r in g.runs if r.error), None)
    # e.g. `platform report` while compare runs: some seeds running, the others stopped (all stopped: above)
    if err is None and all(r.status in ("running", "interrupted") for r in g.runs):
        return "running (no result yet)"
    done = sum(r.status == "completed" for r in g.runs)
    if err is None and done:  # completed, but the metric diverged (NaN) or is missing from summary.json
        err = f"no finite {g.primary or 'primary metric'} in {done} completed run{'s' * (done != 1)}"
    return f"failed: {md_cell(str(err or next(iter(sorted({r.status for r in g.runs})), '?'))[:60])}"


def main_cell(g: Group, winner: bool) -> str:
    """``mean ± std [95 % CI]`` of the primary metric, bold for the task's winner, ``(n=k/N)`` when seeds are
    missing, ``failed: <error>`` when none completed (``interrupted (resumable)`` when every run was stopped,
    ``running (no result yet)`` when the others are still running)."""
    mean, std, n = g.stats()
    if n == 0:
        return _failed_text(g)
    _, lo, hi = g.interval("mean")
    dec = decimals(mean)
    if n == 1:  # no std and no interval; `(n=1)`, or `(n=1/N)` below when other seeds did not complete
        text = f"{mean:.{dec}f}" if len(g.runs) > 1 else fmt_mean_std(mean, std, n)
    else:
        text = f"{fmt_mean_std(mean, std, n)} [{lo:.{dec}f}, {hi:.{dec}f}]"
    text = f"**{text}**" if winner else text
    return text if n == len(g.runs) else f"{text} (n={n}/{len(g.runs)})"


# ---------------------------------------------------------------------------------------------- aggregate
def aggregate_columns(groups: Sequence[Group]) -> dict[str, dict[str, list[Group]]]:
    """``{metric: {column: [its group in every task]}}`` for metrics shared by ≥ 2 task rows; a column is kept
    only where it has completed seeds in every one of those tasks (the aggregate needs the same task set)."""
    out: dict[str, dict[str, list[Group]]] = {}
    for metric in dict.fromkeys(g.primary for g in groups):
        mine = [g for g in groups if g.primary == metric]
        rows = list(dict.fromkeys(g.row for g in mine))
        if len(rows) < 2:
            continue
        cols: dict[str, list[Group]] = {}
        for col in dict.fromkeys(g.column for g in mine):
            per_row = [next((g for g in mine if g.row == r and g.column == col and g.values()), None) for r in rows]
            if all(per_row):
                cols[col] = per_row  # type: ignore[assignment]
        if cols:
            out[metric] = cols
    return out


def aggregate_intervals(tasks: Sequence[Group], stat: str) -> tuple[float, float, float]:
    """``stat`` over the pooled (task, seed) final scores with a stratified bootstrap interval (rliable)."""
    est = st.interval([np.array(g.values()) for g in tasks], stat)
    return float(est[0]), float(est[1]), float(est[2])


def _aggregate_lines(groups: Sequence[Group]) -> list[str]:
    lines: list[str] = []
    for metric, cols in aggregate_columns(groups).items():
        higher = next(iter(cols.values()))[0].higher_is_better
        rows = {g.row for gs in cols.values() for g in gs}
        est = {c: (aggregate_intervals(gs, "iqm"), aggregate_intervals(gs, "mean")) for c, gs in cols.items()}
        verdict = judge([(c, *e[0]) for c, e in est.items()], higher)
        seeds = {c: [len(g.values()) for g in gs] for c, gs in cols.items()}
        unequal = len({tuple(n) for n in seeds.values()}) > 1  # pooled scores weight each task by its seeds
        if unequal:
            verdict = Verdict(None, ())
        lines += [
            "",
            f"## Aggregate over {len(rows)} tasks: {metric}",
            "",
            "IQM (mean of the middle 50 % of all task × seed scores) and mean, each with a 95 % stratified bootstrap",
            "interval (seeds resampled within each task), as in rliable (Agarwal et al. 2021). Scores are pooled",
            "unnormalised, so this assumes the tasks share a scale (DMC returns: 0–1000; accuracies: 0–1).",
            "",
            "| configuration | runs | IQM [95 % CI] | mean [95 % CI] |",
            "|---|---|---|---|",
        ]
        for c, (iqm_est, mean_est) in est.items():
            runs = sum(len(g.values()) for g in cols[c])
            name = f"**{md_cell(c)}**" if verdict.winner == c else md_cell(c)
            lines.append(f"| {name} | {runs} | {fmt_interval(*iqm_est)} | {fmt_interval(*mean_est)} |")
        if unequal:
            shown = "; ".join(f"{c}: {', '.join(map(str, n))}" for c, n in seeds.items())
            lines += [
                "",
                f"Best IQM: not judged: the configurations have different numbers of seeds per task ({shown}),",
                "and pooled scores weight each task by its seeds, so a missing seed in a low-scoring task",
                "raises a configuration's aggregate.",
            ]
        else:
            lines += ["", f"Best IQM: {verdict.text}."]
        missing = sorted({g.column for g in groups if g.primary == metric} - set(cols))
        if missing:
            lines.append(f"Not aggregated (missing or failed in some task): {', '.join(missing)}.")
    return lines


# ---------------------------------------------------------------------------------------------- markdown
SMOKE_NOTE = " (a quick check of the pipeline, not a result)"
"""Said after preset ``smoke``: every built-in plugin's smoke preset runs minutes on a CPU, too short to learn."""


def preset_note(groups: Sequence[Group]) -> str:
    """``, preset paper`` (a smoke table and a paper one must not read alike; ``smoke`` adds that it is a quick check,
    not a result); ``, presets paper, smoke (in the task names)`` when they differ, as the rows then name theirs;
    empty when no run recorded one."""
    presets = sorted({r.preset for g in groups for r in g.runs if r.preset})
    if len(presets) > 1:
        return f", presets {', '.join(presets)} (in the task names)"
    return f", preset {presets[0]}{SMOKE_NOTE if presets[0] == 'smoke' else ''}" if presets else ""


def seed_count(groups: Sequence[Group]) -> str:
    """How many seeds the main table's cells average: ``3 seeds`` when every configuration ran the same number,
    else ``2–5 seeds per configuration``; a cell whose seeds did not all complete says ``(n=k/N)`` itself."""
    counts = sorted({len(g.runs) for g in groups}) or [0]
    lo, hi = counts[0], counts[-1]
    if lo == hi:
        return f"{lo} seed{'s' * (lo != 1)}"
    return f"{lo}–{hi} seeds per configuration"


def markdown(groups: Sequence[Group], curve_tags: Mapping[str, str | None] | None = None,
             after_main: Sequence[str] = ()) -> str:
    """The text of ``results.md`` (see the module docstring); ``curve_tags``: the tag plotted per task;
    ``after_main``: lines placed right after the main table (the paired comparison, :mod:`.paired`)."""
    judged = verdicts(groups)
    rows = list(dict.fromkeys(g.row for g in groups))
    cols = list(dict.fromkeys(g.column for g in groups))
    cell = {(g.row, g.column): g for g in groups}
    metrics = list(dict.fromkeys(g.primary for g in groups if g.primary)) or ["?"]
    arrow = {True: "↑", False: "↓"}
    out = [
        "# Results",
        "",
        f"Final {', '.join(metrics)}{preset_note(groups)}: mean ± std over {seed_count(groups)} (sample std, n−1) "
        f"[{CI_NOTE}].",
        "**Bold** marks the best configuration of a task only where its interval excludes every other one's;",
        "otherwise the `best` column says `tie` and names the configurations whose intervals overlap the leader's.",
        "",
        "| task | metric | " + " | ".join(md_cell(c) for c in cols) + " | best |",
        "|---|---|" + "---|" * (len(cols) + 1),
    ]
    for r in rows:
        anyg = next(g for g in groups if g.row == r)
        v = judged[r]
        cells = [main_cell(cell[(r, c)], v.winner == c) if (r, c) in cell else "" for c in cols]
        metric = f"{anyg.primary} ({arrow[anyg.higher_is_better]})"
        out.append(f"| {md_cell(r)} | {metric} | " + " | ".join(cells) + f" | {md_cell(v.text)} |")
    out += list(after_main)
    out += [
        "",
        "## Per-task IQM",
        "",
        "Interquartile mean over seeds [95 % bootstrap CI] (with 3 seeds or fewer the IQM is the mean and has no "
        "interval here: a bootstrap of so few seeds spans about their range; read the main table's t-interval).",
        "",
        "| task | " + " | ".join(md_cell(c) for c in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for r in rows:
        cells = [fmt_interval(*cell[(r, c)].interval("iqm")) if (r, c) in cell else "" for c in cols]
        out.append(f"| {md_cell(r)} | " + " | ".join(cells) + " |")
    out += _aggregate_lines(groups)
    if curve_tags:
        out += ["", "Learning curves (`curves.png`, `aggregate.png`) show, per task:"]
        out += [f"- {r}: `{t or 'nothing logged'}`{LOSS_CURVE_NOTE if is_training_loss_tag(t) else ''}"
                for r, t in curve_tags.items()]
    out += _all_metrics_lines(groups) + _failure_lines(groups)
    return "\n".join(out) + "\n"


LOSS_CURVE_NOTE = " (a training loss: each loss and τ⁺ has its own scale, so compare the curves' shapes, not levels)"
"""Said after a loss curve in results.md (compare.md, "Which curve is drawn")."""


def _all_metrics_lines(groups: Sequence[Group]) -> list[str]:
    names = sorted({m for g in groups for run in g.runs for m in run.metrics})
    out = [
        "",
        "## All final metrics",
        "",
        "Mean ± std over the completed seeds.",
        "",
        "| task | configuration | seeds ok | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for g in groups:
        vals = [fmt_mean_std(*g.stats(m)) for m in names]
        label = f"| {md_cell(g.row)} | {md_cell(g.column)} | {g.stats()[2]}/{len(g.runs)} | "
        out.append(label + " | ".join(vals) + " |")
    return out


def _failure_lines(groups: Sequence[Group]) -> list[str]:
    failed = [(g, r) for g in groups for r in g.runs if r.status != "completed"]
    if not failed:
        return []
    out = [
        "",
        "## Runs not completed",
        "",
        "| task | configuration | seed | status | error | run |",
        "|---|---|---|---|---|---|",
    ]
    for g, r in failed:
        cells = (g.row, g.column, r.seed, r.status, r.error or "", r.run_dir)
        out.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
    return out


# ---------------------------------------------------------------------------------------------- csv
def write_csv(groups: Sequence[Group], path: Path) -> Path:
    """``results.csv``: one row per run with its configuration, status, error and every final metric (a
    metric whose name clashes with a fixed column, e.g. ``loss``, is written as ``metric.<name>``)."""
    metric_names = sorted({m for g in groups for r in g.runs for m in r.metrics})
    fixed = ["task", "configuration", "plugin", "preset", "loss", "seed", "status", "error"]
    fixed += ["primary_metric", "primary_value", "wall_time_s", "overrides", "run_dir"]
    head = [*fixed[:10], *(f"metric.{m}" if m in fixed else m for m in metric_names), *fixed[10:]]
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(head)
        for g in groups:
            for r in g.runs:
                ov = ";".join(f"{k}={v}" for k, v in sorted(r.overrides.items()))
                wall = r.wall_time_s if r.wall_time_s is not None else ""
                row = [g.row, g.column, r.plugin, r.preset or "", r.loss, r.seed, r.status, r.error or ""]
                row += [r.primary, r.metrics.get(r.primary, ""), *(r.metrics.get(m, "") for m in metric_names)]
                writer.writerow([*row, wall, ov, str(r.run_dir)])
    return path


def write_summary_csv(groups: Sequence[Group], path: Path, pairs: Sequence[Paired] = ()) -> Path:
    """``summary.csv``: one row per configuration: n, mean, std, 95 % CI, IQM with its CI, the task's verdict
    (``best``, ``tie`` for a configuration tied with the leader, empty otherwise), and its entry of ``pairs``, the
    paired comparison against the task's baseline (:func:`.paired.compare_to_baseline`; empty for the baseline
    itself and tasks without one)."""
    judged = verdicts(groups)
    paired = {(p.row, p.column): p for p in pairs}
    head = ["task", "configuration", "metric", "higher_is_better", "n", "runs", "mean", "std", "ci_low", "ci_high"]
    head += ["iqm", "iqm_low", "iqm_high", "verdict", "baseline", "paired_n", "paired_diff", "paired_ci_low",
             "paired_ci_high", "paired_wins", "paired_p", "paired_verdict"]
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(head)
        for g in groups:
            mean, std, n = g.stats()
            v = judged[g.row]
            verdict = "best" if v.winner == g.column else ("tie" if g.column in v.leaders else "")
            nums = [mean, std if n > 1 else math.nan, *g.interval("mean")[1:], *g.interval("iqm")]  # no std of 1
            cells = ["" if math.isnan(x) else f"{x:.6g}" for x in nums]
            pair = paired.get((g.row, g.column))
            against: list[object] = [""] * 8
            if pair is not None:
                numbers = ["" if math.isnan(x) else f"{x:.6g}" for x in (pair.mean, pair.low, pair.high)]
                p_value = "" if math.isnan(pair.p_value) else f"{pair.p_value:.6g}"
                against = [pair.baseline, len(pair.differences), *numbers, pair.wins, p_value, pair.verdict]
            writer.writerow([g.row, g.column, g.primary, g.higher_is_better, n, len(g.runs), *cells, verdict,
                             *against])
    return path
