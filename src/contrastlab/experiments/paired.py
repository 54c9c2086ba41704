"""The paired comparison of ``results.md``: each configuration against a baseline, seed by seed.

The question contrastlab answers is whether correcting negative-sampling bias helps, that is whether a debiased
loss beats the standard InfoNCE on the same task. The main table's verdict compares intervals of means, which
ignores that the runs are *paired*: a seed fixes the data split, the initialisation and the environment seeds of
every configuration alike, so much of the seed-to-seed spread is shared. Differencing per seed removes it.

For each task and each configuration other than the baseline, over the seeds both completed (finite primary
metric):

* ``d_s = x_s − b_s``, the per-seed difference, and its mean ``d̄`` with the Student-t 95 % interval
  ``d̄ ± t_{0.975, n−1} · s_d / √n`` (:func:`.stats.t_interval`);
* the two-sided paired t-test's p-value, ``p = 2 · (1 − F_{n−1}(|d̄| / (s_d / √n)))``;
* a verdict that holds the task's comparisons together at 5 %: Holm's step-down correction (Holm 1979) over the
  task's ``m`` comparisons (the k-th smallest p-value is tested at ``0.05 / (m − k + 1)``, stopping at the first
  that fails), so with several debiased losses against one baseline the chance of any false "better" stays at
  most 5 %.

With fewer than two pairs there is no interval and no verdict. Equal differences at every seed (``s_d = 0``, which
a discrete metric such as accuracy on a small test set gives by chance) have no t statistic: p = 1 when they are
zero, else the exact two-sided sign test's ``2 · 0.5ⁿ`` (all ``n`` seeds in one direction), so two or three such
seeds are not called ``better``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from contrastlab.experiments import stats as st
from contrastlab.experiments.formatting import decimals, md_cell
from contrastlab.experiments.results import Group
from contrastlab.platform.errors import ConfigError

ALPHA = 0.05
"""Family-wise error rate of the verdicts of one task (Holm)."""

DEFAULT_BASELINE_LOSS = "infonce"
"""The loss whose configuration is the baseline when none is named: the standard, biased InfoNCE."""


@dataclass(frozen=True)
class Paired:
    """One configuration against the baseline of its task."""

    row: str
    """Task label."""
    column: str
    """Configuration label."""
    baseline: str
    """The baseline's configuration label."""
    differences: tuple[float, ...]
    """``x_s − b_s`` over the seeds both completed, by seed."""
    mean: float
    """Mean difference (nan without pairs)."""
    low: float
    """Lower bound of its 95 % Student-t interval (nan below two pairs)."""
    high: float
    """Upper bound (nan below two pairs)."""
    p_value: float
    """Two-sided paired t-test p-value (nan below two pairs)."""
    higher_is_better: bool
    """Direction of the metric: whether a positive difference is better."""
    verdict: str = ""
    """``better``, ``worse``, ``no difference shown`` or ``–`` (set per task by :func:`compare_to_baseline`)."""

    @property
    def wins(self) -> int:
        """Seeds where the configuration beat the baseline (strictly)."""
        sign = 1.0 if self.higher_is_better else -1.0
        return sum(1 for d in self.differences if sign * d > 0)


def paired_p_value(differences: Sequence[float]) -> float:
    """The two-sided paired t-test's p-value of ``differences`` (nan below two; equal differences: the sign test's,
    see the module docstring)."""
    from scipy.stats import t as student_t

    d = np.asarray(differences, float)
    if d.size < 2:
        return math.nan
    centre, spread = float(d.mean()), float(d.std(ddof=1))
    if spread == 0.0 or not math.isfinite(spread):  # no t statistic: the exact sign test, all n in one direction
        return 1.0 if centre == 0.0 else min(1.0, 2.0 * 0.5**d.size)
    statistic = abs(centre) / (spread / math.sqrt(d.size))
    return float(2.0 * student_t.sf(statistic, d.size - 1))


def holm_rejections(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down test over ``p_values`` (nan: never rejected, and not counted in ``m``): which null
    hypotheses are rejected with family-wise error at most ``alpha``."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    rejected = [False] * len(p_values)
    m = len(tested)
    for k, (p, i) in enumerate(tested):
        if p > alpha / (m - k):
            break
        rejected[i] = True
    return rejected


def choose_baseline(groups: Sequence[Group], row: str, baseline: str | None) -> Group | None:
    """The baseline group of task ``row``: the column named ``baseline``, else the only configuration of loss
    ``infonce`` (none when there are several, e.g. two temperatures, or none)."""
    mine = [g for g in groups if g.row == row]
    if baseline is not None:
        return next((g for g in mine if g.column == baseline), None)
    standard = [g for g in mine if g.runs and all(r.loss == DEFAULT_BASELINE_LOSS for r in g.runs)]
    return standard[0] if len(standard) == 1 else None


def baselines(groups: Sequence[Group], baseline: str | None) -> dict[str, Group | None]:
    """Every task row's :func:`choose_baseline`, in the rows' order."""
    return {row: choose_baseline(groups, row, baseline) for row in dict.fromkeys(g.row for g in groups)}


def check_baseline(groups: Sequence[Group], baseline: str | None) -> None:
    """A named ``--baseline`` must be a configuration label of the report (one-line error listing them)."""
    if baseline is None:
        return
    labels = list(dict.fromkeys(g.column for g in groups))
    if baseline not in labels:
        raise ConfigError(f"--baseline {baseline!r} is not a configuration of this report; configurations: "
                          f"{', '.join(repr(label) for label in labels)}")


def _pair(group: Group, base: Group) -> Paired:
    mine = {r.seed: r.metrics[group.primary] for r in group.scored_runs()}
    theirs = {r.seed: r.metrics[base.primary] for r in base.scored_runs()}
    differences = tuple(mine[s] - theirs[s] for s in sorted(set(mine) & set(theirs)))
    centre, low, high = st.t_interval(differences)
    return Paired(group.row, group.column, base.column, differences, float(centre), float(low), float(high),
                  paired_p_value(differences), group.higher_is_better)


def _verdict(pair: Paired, rejected: bool) -> str:
    if math.isnan(pair.p_value):
        return "–"
    if not rejected:
        return "no difference shown"
    better = (pair.mean > 0) == pair.higher_is_better
    return "better" if better else "worse"


def compare_to_baseline(groups: Sequence[Group], baseline: str | None = None) -> list[Paired]:
    """Every configuration against its task's baseline (:func:`choose_baseline`), with Holm verdicts per task;
    tasks without a baseline are left out."""
    out: list[Paired] = []
    for row, base in baselines(groups, baseline).items():
        if base is None or base.primary == "":
            continue
        pairs = [_pair(g, base) for g in groups if g.row == row and g is not base and g.primary == base.primary]
        rejected = holm_rejections([p.p_value for p in pairs])
        out += [replace(p, verdict=_verdict(p, r)) for p, r in zip(pairs, rejected, strict=True)]
    return out


def _signed(value: float, dec: int) -> str:
    return f"{value:+.{dec}f}"


def _fmt_p(p: float) -> str:
    if math.isnan(p):
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _in_text(label: str) -> str:
    """``label`` on one line of running text: ``|`` needs no escape outside a table, and in a code span the
    backslash of :func:`md_cell` would show."""
    return " ".join(label.split())


def _why_none(alone: Sequence[str]) -> str:
    """Why :func:`compare_to_baseline` found nothing to compare: no task has a baseline, or the tasks that have
    one (``alone``) hold no other configuration of its metric (e.g. infonce ran at one preset and dcl at another,
    which makes two tasks)."""
    if alone:
        return (f"no other configuration shares a task with the baseline (the tasks with one: "
                f"{', '.join(_in_text(row) for row in alone)}); only configurations of one task are paired")
    return (f"no task has exactly one configuration of loss `{DEFAULT_BASELINE_LOSS}`; name the baseline with "
            "`platform report DIR --baseline LABEL`")


def paired_lines(groups: Sequence[Group], pairs: Sequence[Paired], baseline: str | None = None) -> list[str]:
    """The ``results.md`` section showing ``pairs``, :func:`compare_to_baseline` of ``groups`` against ``baseline``
    (nothing with fewer than two configurations)."""
    if len({g.column for g in groups}) < 2:
        return []
    which = f"`{_in_text(baseline)}`" if baseline is not None else f"the task's `{DEFAULT_BASELINE_LOSS}` configuration"
    lines = [
        "",
        "## Against the baseline, paired by seed",
        "",
        f"Each configuration minus the baseline ({which}) on the seeds both completed: mean difference [95 % "
        "Student-t CI of the per-seed differences], the seeds where it did better, the paired t-test's p-value, and "
        f"a verdict at {ALPHA * 100:g} % family-wise error over the task's comparisons (Holm's correction). One "
        "seed starts every configuration from the same data split, initial weights and environment seeds, so "
        "differencing per seed removes the spread they share: this test finds effects the main table's "
        "non-overlapping intervals cannot.",
        "",
    ]
    bases = baselines(groups, baseline)
    if not pairs:
        return [*lines, f"No comparison: {_why_none([row for row, base in bases.items() if base is not None])}."]
    lines += ["| task | configuration | baseline | Δ mean [95 % CI] | better in | p | verdict |",
              "|---|---|---|---|---|---|---|"]
    for p in pairs:
        scale = next((g.stats()[0] for g in groups if g.row == p.row and g.column == p.baseline), math.nan)
        dec = decimals(scale if math.isfinite(scale) and scale != 0 else p.mean)
        if not p.differences:
            delta = "– (no seed completed by both)"
        elif math.isnan(p.low):
            delta = f"{_signed(p.mean, dec)} (n=1)"
        else:
            delta = f"{_signed(p.mean, dec)} [{_signed(p.low, dec)}, {_signed(p.high, dec)}]"
        lines.append(f"| {md_cell(p.row)} | {md_cell(p.column)} | {md_cell(p.baseline)} | {delta} | "
                     f"{p.wins}/{len(p.differences)} seeds | {_fmt_p(p.p_value)} | {p.verdict} |")
    left = [row for row, base in bases.items() if base is None]
    if left:
        name = f"`{_in_text(baseline)}`" if baseline is not None else f"`{DEFAULT_BASELINE_LOSS}`"
        lines += ["", f"Not compared (no {name} configuration in the task): {', '.join(map(_in_text, left))}."]
    return lines
