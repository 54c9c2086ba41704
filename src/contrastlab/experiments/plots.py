"""Plots of ``platform report``: learning curves (mean ± std band) and final metrics, one panel per task, and
aggregate curves over tasks (IQM with a stratified bootstrap band, as rliable).

The curve of a task is the curve of its primary metric (:func:`choose_tag`): ``eval/episode_return`` is logged as
``eval/episode_return_vs_env_frames`` by RL plugins, and its ``..._std_...`` sibling is never drawn in its place.

matplotlib runs with the non-interactive Agg backend, so reports render on headless machines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contrastlab.experiments import stats as st
from contrastlab.experiments.results import AXIS_SUFFIX, Group, RunRecord, is_training_loss_tag, load_curves
from contrastlab.experiments.tables import verdicts


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def is_metric_tag(tag: str, metric: str) -> bool:
    """Whether ``tag`` is the curve of final metric ``metric``: the same name, optionally with an x-axis suffix
    (``_vs_env_frames``) and, for a metric named without a group, under any group (``eval/top1`` for ``top1``).

    ``eval/episode_return_std_vs_env_frames`` is *not* a curve of ``eval/episode_return``.
    """
    if not metric:
        return False
    base = AXIS_SUFFIX.sub("", tag)
    return base == metric or ("/" not in metric and base.split("/")[-1] == metric)


def _is_spread(tag: str) -> bool:
    """A dispersion tag (``..._std``), never a fallback curve."""
    return AXIS_SUFFIX.sub("", tag).endswith(("_std", "_var"))


def choose_tag(tags: Iterable[str], primary: str, points: dict[str, int] | None = None) -> str | None:
    """The curve to plot for ``primary``: the tag that carries it (:func:`is_metric_tag`; the exact name, then
    ``eval/`` tags first). Without such a tag: the first ``eval/`` tag, else ``train/loss`` (or another ``…/loss``
    such as pu's ``pretrain/loss``), else the first tag.

    With ``points`` (logged points per tag), a primary metric logged only once (e.g. a final linear probe) cannot
    make a curve and gives way to the ``eval/`` tag with the most points (e.g. a kNN monitor), then to
    ``train/loss`` (or another ``…/loss``). Dispersion tags (``*_std``) are never chosen in its place.
    """
    tags = sorted(set(tags))
    rank = lambda t: (t != primary, not t.startswith("eval/"), t)  # noqa: E731
    named = sorted((t for t in tags if is_metric_tag(t, primary)), key=rank)
    if named and (points is None or points.get(named[0], 0) >= 2):
        return named[0]
    candidates = [t for t in tags if not _is_spread(t) and t not in named]
    if points is not None:
        curves = sorted((t for t in candidates if t.startswith("eval/") and points.get(t, 0) >= 3),
                        key=lambda t: (-points[t], t))
        if curves:
            return curves[0]
        losses = [t for t in _loss_tags(candidates) if points.get(t, 0) >= 3]
        if losses:
            return losses[0]
        if named:
            return named[0]
    evals = [t for t in candidates if t.startswith("eval/")]
    if evals:
        return evals[0]
    losses = _loss_tags(candidates)
    if losses:
        return losses[0]
    return candidates[0] if candidates else (tags[0] if tags else None)


def _loss_tags(tags: Iterable[str]) -> list[str]:
    """The training-loss curves among ``tags``: ``train/loss`` first, then a plugin's own (pu's ``pretrain/loss``)."""
    found = [t for t in tags if is_training_loss_tag(t)]
    return sorted(found, key=lambda t: (t != "train/loss", t))


def mean_band(curves: Sequence[Sequence[tuple[int, float]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Align seeds on the steps they all cover (linear interpolation) → ``(steps, mean, std)``.

    The std is the sample std (n−1) and 0 for a single seed; shapes are all ``[S]``.
    """
    arrays = [(np.array([s for s, _ in c], float), np.array([v for _, v in c], float)) for c in curves if c]
    if not arrays:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    lo, hi = max(a[0][0] for a in arrays), min(a[0][-1] for a in arrays)
    steps = np.unique(np.concatenate([a[0] for a in arrays]))
    steps = steps[(steps >= lo) & (steps <= hi)] if lo <= hi else steps
    stack = np.stack([np.interp(steps, s, v) for s, v in arrays])  # [seeds, S]
    std = stack.std(axis=0, ddof=1) if len(arrays) > 1 else np.zeros(len(steps))
    return steps, stack.mean(axis=0), std


def _panels(groups: Sequence[Group], title: str) -> tuple[Any, Any, list[str], dict[str, Any]]:
    plt = _pyplot()
    rows = list(dict.fromkeys(g.row for g in groups))
    cols = list(dict.fromkeys(g.column for g in groups))
    ncols = min(3, len(rows))
    nrows = math.ceil(len(rows) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 4.0 * nrows), squeeze=False)
    for ax in axes.flat[len(rows) :]:
        ax.set_visible(False)
    cmap = plt.get_cmap("tab10" if len(cols) <= 10 else "tab20")
    colors = {c: cmap(i % cmap.N) for i, c in enumerate(cols)}
    fig.suptitle(title, fontsize=_fitting_fontsize(title, 5.5 * ncols))
    return fig, axes.flat, rows, colors


def _fitting_fontsize(text: str, width_inches: float, largest: float = 12.0) -> float:
    """The largest font size up to ``largest`` points at which ``text`` fits in 95 % of ``width_inches`` (a
    character is about 0.55 em wide): a one-panel figure's title was cut off at both ends."""
    return min(largest, 0.95 * width_inches * 72 / (0.55 * max(len(text), 1)))


def _points(curves: Iterable[dict[str, list[tuple[int, float]]]]) -> dict[str, int]:
    """Most points any run logged, per tag."""
    points: dict[str, int] = {}
    for c in curves:
        for t, pts in c.items():
            points[t] = max(points.get(t, 0), len(pts))
    return points


def curve_tags(groups: Sequence[Group], tag: str | None = None) -> dict[str, str | None]:
    """The tag plotted in each task row: ``tag`` (``--curve``) if given, else :func:`choose_tag` for the row's
    primary metric over the tags its runs logged."""
    out: dict[str, str | None] = {}
    for row in dict.fromkeys(g.row for g in groups):
        mine = [g for g in groups if g.row == row]
        points = _points(load_curves(r.run_dir) for g in mine for r in g.runs)
        out[row] = tag or choose_tag(points, mine[0].primary, points)
    return out


def curve_runs(g: Group) -> list[RunRecord]:
    """The runs whose curves are drawn: the seeds the tables count (completed, finite final metric), so that a
    crashed or diverged seed neither cuts the others' curves short (seeds are aligned on the steps they all cover)
    nor pulls the mean; every run when no seed counts (what the failed runs logged is still shown)."""
    return g.scored_runs() or list(g.runs)


def _xlabel(tag: str | None) -> str:
    return "environment frames" if tag and "frames" in tag else "step"


def plot_curves(groups: Sequence[Group], path: Path, tags: dict[str, str | None] | None = None) -> Path:
    """``curves.png``: per task panel, the mean ± std band over seeds of each configuration's curve of the tag
    ``tags[row]`` (default :func:`curve_tags`)."""
    tags = tags if tags is not None else curve_tags(groups)
    fig, axes, rows, colors = _panels(groups, "learning curves (mean ± std over seeds)")
    for ax, row in zip(axes, rows, strict=False):
        use, drawn = tags.get(row), 0
        for g in (g for g in groups if g.row == row):
            curves = [c for c in (load_curves(r.run_dir).get(use or "", []) for r in curve_runs(g)) if c]
            steps, mean, std = mean_band(curves) if use else ([], [], [])
            if len(steps) == 0:
                continue
            marker = "o" if len(steps) < 5 else None  # a single evaluation is still visible
            done = "" if g.scored_runs() else ", not completed"
            label = f"{g.column} (n={len(curves)}{done})"
            ax.plot(steps, mean, color=colors[g.column], label=label, lw=1.8, marker=marker)
            ax.fill_between(steps, mean - std, mean + std, color=colors[g.column], alpha=0.2, lw=0)
            drawn += 1
        ax.set_title(row)
        ax.set_xlabel(_xlabel(use))
        ax.set_ylabel(use or "")
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no curves logged", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return Path(path)


CURVE_REPS = 2000
"""Bootstrap replicates per point of an aggregate curve (the bands are drawn, not tabulated)."""
CURVE_POINTS = 200
"""At most this many x positions per aggregate curve."""


def aggregate_curve(tasks: Sequence[Sequence[Sequence[tuple[int, float]]]]) -> tuple[np.ndarray, ...]:
    """IQM over (task, seed) of one configuration's curves with a 95 % stratified bootstrap band.

    ``tasks[t][s]`` is the curve of seed s in task t. Every curve is interpolated on the steps all of them cover.
    Returns ``(steps, iqm, low, high)``, each ``[S]`` (empty without a common range).
    """
    flat = [c for runs in tasks for c in runs if c]
    if not flat:
        return np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0)
    lo = max(c[0][0] for c in flat)
    hi = min(c[-1][0] for c in flat)
    steps = np.unique(np.concatenate([np.array([s for s, _ in c], float) for c in flat]))
    steps = steps[(steps >= lo) & (steps <= hi)]
    if len(steps) > CURVE_POINTS:
        steps = steps[np.linspace(0, len(steps) - 1, CURVE_POINTS).round().astype(int)]
    if len(steps) == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0)
    per_task = [
        np.stack([np.interp(steps, [s for s, _ in c], [v for _, v in c]) for c in runs if c])  # [seeds, S]
        for runs in tasks
        if any(runs)
    ]
    est, low, high = st.interval(per_task, "iqm", reps=CURVE_REPS)
    return steps, np.asarray(est), np.asarray(low), np.asarray(high)


def plot_aggregate(groups: Sequence[Group], path: Path, tags: dict[str, str | None] | None = None) -> Path:
    """``aggregate.png``: per primary metric, the IQM over every task × seed of each configuration's curve, with
    its 95 % stratified bootstrap band (rliable's sample-efficiency curves). A configuration is drawn only if it
    has curves in every task of that metric; with one task this is the IQM over seeds."""
    plt = _pyplot()
    tags = tags if tags is not None else curve_tags(groups)
    metrics = list(dict.fromkeys(g.primary for g in groups))
    cols = list(dict.fromkeys(g.column for g in groups))
    cmap = plt.get_cmap("tab10" if len(cols) <= 10 else "tab20")
    colors = {c: cmap(i % cmap.N) for i, c in enumerate(cols)}
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.5), squeeze=False)
    fig.suptitle("aggregate over tasks: IQM over task × seed, 95 % stratified bootstrap band")
    for ax, metric in zip(axes.flat, metrics, strict=True):
        mine = [g for g in groups if g.primary == metric]
        rows = list(dict.fromkeys(g.row for g in mine))
        drawn = 0
        for col in dict.fromkeys(g.column for g in mine):
            per_row = [next((g for g in mine if g.row == r and g.column == col and g.values()), None) for r in rows]
            if not all(per_row):  # as the aggregate table: only a configuration that completed in every task
                continue
            tasks = [[load_curves(r.run_dir).get(tags.get(g.row) or "", []) for r in g.scored_runs()] for g in per_row]
            if not all(any(runs) for runs in tasks):
                continue
            steps, est, low, high = aggregate_curve(tasks)
            if len(steps) == 0:
                continue
            marker = "o" if len(steps) < 5 else None
            ax.plot(steps, est, color=colors[col], label=col, lw=1.8, marker=marker)
            if not np.isnan(low).all():
                ax.fill_between(steps, low, high, color=colors[col], alpha=0.2, lw=0)
            drawn += 1
        used = sorted({t for r, t in tags.items() if r in rows and t})
        shown = ", ".join(used) or metric or "metric"  # what is drawn: a loss curve where the metric has none
        ax.set_title(f"{shown} over {len(rows)} task{'s' * (len(rows) != 1)}")
        ax.set_xlabel(_xlabel(used[0] if used else None))
        ax.set_ylabel(f"IQM of {shown}")
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no curves in every task", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


FINAL_TITLE = "final metric: mean, 95 % t-interval over seeds; ★ = separated best"
"""``final.png``'s title (the whisker is the main table's interval, :meth:`Group.interval`)."""


def plot_final(groups: Sequence[Group], path: Path) -> Path:
    """``final.png``: per task panel, mean final primary metric (bar) with its 95 % Student-t interval over seeds
    (whisker, the main table's), seeds as dots. A ★ and a thick outline mark the best only where its interval
    excludes the others'."""
    fig, axes, rows, colors = _panels(groups, FINAL_TITLE)
    judged = verdicts(groups)
    for ax, row in zip(axes, rows, strict=False):
        mine = [g for g in groups if g.row == row]
        winner = judged[row].winner
        for i, g in enumerate(mine):
            mean, _, n = g.stats()
            if n == 0:
                ax.text(i, 0, "failed", ha="center", va="bottom", color="red", rotation=90)
                continue
            _, lo, hi = g.interval("mean")
            err = None if np.isnan(lo) else [[mean - lo], [hi - mean]]
            ax.bar(i, mean, yerr=err, color=colors[g.column], capsize=4, alpha=0.85, edgecolor="black",
                   linewidth=2.5 if g.column == winner else 0.5)
            vals = g.values()
            ax.scatter(
                [i + (k - (len(vals) - 1) / 2) * 0.08 for k in range(len(vals))], vals, color="black", s=12, zorder=3
            )
        ax.set_xticks(range(len(mine)))
        ax.set_xticklabels(
            [("★ " if g.column == winner else "") + g.column for g in mine], rotation=30, ha="right", fontsize=8
        )
        direction = "↑" if mine[0].higher_is_better else "↓"
        ax.set_ylabel(f"{mine[0].primary or 'metric'} {direction}")
        ax.set_title(f"{row}  (best: {judged[row].text})", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return Path(path)
