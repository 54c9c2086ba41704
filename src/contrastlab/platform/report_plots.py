"""Plots of ``platform report``: learning curves (mean ± std band) and final metrics, one panel per task.

matplotlib runs with the non-interactive Agg backend, so reports render on headless machines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contrastlab.platform.report import Group, best_by_row, load_curves


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def choose_tag(tags: Iterable[str], primary: str, points: dict[str, int] | None = None) -> str | None:
    """The curve to plot for ``primary``: the tag itself, else ``<group>/<primary>`` (``eval/`` first), else
    the first ``eval/`` tag, else ``train/loss``, else the first tag.

    With ``points`` (logged points per tag), a primary metric logged fewer than 3 times (e.g. a final linear probe)
    gives way to the ``eval/`` tag with the most points (e.g. a kNN monitor), then to ``train/loss``.
    """
    tags = sorted(set(tags))
    if points is not None and points.get(primary, 0) < 3:
        curves = sorted((t for t in tags if t.startswith("eval/") and points.get(t, 0) >= 3),
                        key=lambda t: (-points[t], t))
        if curves:
            return curves[0]
        if points.get("train/loss", 0) >= 3:
            return "train/loss"
    if primary in tags:
        return primary
    named = [t for t in tags if primary and t.split("/")[-1] == primary]
    if named:
        return sorted(named, key=lambda t: (not t.startswith("eval/"), t))[0]
    evals = [t for t in tags if t.startswith("eval/")]
    if evals:
        return evals[0]
    return "train/loss" if "train/loss" in tags else (tags[0] if tags else None)


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
    fig.suptitle(title)
    return fig, axes.flat, rows, colors


def plot_curves(groups: Sequence[Group], path: Path, tag: str | None = None) -> Path:
    """``curves.png``: per task panel, the mean ± std band over seeds of each configuration's curve."""
    fig, axes, rows, colors = _panels(groups, "learning curves (mean ± std over seeds)")
    for ax, row in zip(axes, rows, strict=False):
        mine = [g for g in groups if g.row == row]
        curves = {id(g): [load_curves(r.run_dir) for r in g.runs] for g in mine}
        points: dict[str, int] = {}
        for runs in curves.values():
            for c in runs:
                for t, pts in c.items():
                    points[t] = max(points.get(t, 0), len(pts))
        use = tag or choose_tag(points, mine[0].primary, points)
        drawn = 0
        for g in mine:
            steps, mean, std = mean_band([c.get(use, []) for c in curves[id(g)]]) if use else ([], [], [])
            if len(steps) == 0:
                continue
            marker = "o" if len(steps) < 5 else None  # a single evaluation is still visible
            ax.plot(steps, mean, color=colors[g.column], label=f"{g.column} (n={len(g.runs)})", lw=1.8, marker=marker)
            ax.fill_between(steps, mean - std, mean + std, color=colors[g.column], alpha=0.2, lw=0)
            drawn += 1
        ax.set_title(row)
        ax.set_xlabel("step" if not use or "frames" not in use else "environment frames")
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


def plot_final(groups: Sequence[Group], path: Path) -> Path:
    """``final.png``: per task panel, mean final primary metric (bar) ± std (whisker), seeds as dots; the best
    configuration has a thick outline and a ★."""
    fig, axes, rows, colors = _panels(groups, "final metric (mean ± std over seeds)")
    best = best_by_row(groups)
    for ax, row in zip(axes, rows, strict=False):
        mine = [g for g in groups if g.row == row]
        for i, g in enumerate(mine):
            mean, std, n = g.stats()
            if n == 0:
                ax.text(i, 0, "failed", ha="center", va="bottom", color="red", rotation=90)
                continue
            is_best = best.get(row) is g
            ax.bar(
                i,
                mean,
                yerr=std,
                color=colors[g.column],
                capsize=4,
                alpha=0.85,
                edgecolor="black",
                linewidth=2.5 if is_best else 0.5,
            )
            vals = g.values()
            ax.scatter(
                [i + (k - (len(vals) - 1) / 2) * 0.08 for k in range(len(vals))], vals, color="black", s=12, zorder=3
            )
        ax.set_xticks(range(len(mine)))
        ax.set_xticklabels(
            [("★ " if best.get(row) is g else "") + g.column for g in mine], rotation=30, ha="right", fontsize=8
        )
        direction = "↑" if mine[0].higher_is_better else "↓"
        ax.set_ylabel(f"{mine[0].primary or 'metric'} {direction}")
        ax.set_title(row)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return Path(path)
