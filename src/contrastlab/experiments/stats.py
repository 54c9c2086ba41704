"""Interval estimates for reports: percentile bootstrap over seeds, IQM, and stratified bootstrap over tasks.

The method follows Agarwal et al., "Deep Reinforcement Learning at the Edge of the Statistical Precipice"
(NeurIPS 2021), the paper behind the ``rliable`` library:

* the **IQM** (interquartile mean) is the mean of the middle 50 % of the scores: ``⌊n/4⌋`` values are cut
  from each end of the sorted scores, as in ``scipy.stats.trim_mean(x, 0.25)``;
* a **95 % percentile bootstrap interval** resamples the seeds with replacement, recomputes the statistic,
  and takes the 2.5 and 97.5 percentiles of the replicates;
* the **mean of one configuration's seeds** gets a Student-t interval instead (:func:`t_interval`): with the 2-5
  seeds a comparison usually has, the percentile bootstrap is far too narrow (with 2 seeds it is exactly
  ``[min, max]`` and covers the true mean about half the time, so two identical configurations were called
  different in about 1 run of 3; with 3 seeds, about 1 in 10), while the t interval keeps its 95 % for normal
  seed noise at any n ≥ 2;
* an **aggregate over tasks** pools the scores of every (task, seed); its bootstrap is **stratified**: the seeds
  are resampled within each task, so every replicate still holds every task with its own number of seeds.

Everything is vectorised numpy and seeded with a fixed :data:`SEED`, so a report rebuilt from the same runs
prints the same intervals. (``rliable`` itself would pull in pandas, statsmodels, arch and seaborn, and its
per-replicate Python loop is too slow for interval bands at every step of a learning curve.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

SEED = 0
"""Seed of every bootstrap: the same runs give the same intervals."""
REPS = 10_000
"""Bootstrap replicates (rliable's default is 50,000 for final scores; 10,000 moves the bounds < 1 % here)."""
LEVEL = 0.95
"""Coverage of the intervals."""

Stat = Callable[[np.ndarray], np.ndarray]
"""A statistic over the last axis: ``[..., n] → [...]``."""


def mean(x: np.ndarray) -> np.ndarray:
    """Mean over the last axis."""
    return np.asarray(x, float).mean(axis=-1)


def iqm(x: np.ndarray) -> np.ndarray:
    """Interquartile mean over the last axis: cut ``⌊n/4⌋`` sorted values from each end, average the rest.

    For n ≤ 3 nothing is cut and the IQM is the mean.
    """
    x = np.sort(np.asarray(x, float), axis=-1)
    cut = int(0.25 * x.shape[-1])
    return x[..., cut : x.shape[-1] - cut].mean(axis=-1)


STATS: dict[str, Stat] = {"mean": mean, "iqm": iqm}
"""Statistics by name."""


def _percentiles(replicates: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over the first axis of ``replicates`` (``[R, ...]`` → two ``[...]``)."""
    tail = (1.0 - level) / 2 * 100
    lo, hi = np.percentile(replicates, [tail, 100 - tail], axis=0)
    return lo, hi


def stratified_replicates(
    tasks: Sequence[np.ndarray], stat: Stat, *, reps: int = REPS, seed: int = SEED
) -> np.ndarray:
    """Bootstrap replicates of ``stat`` over the pooled scores of several tasks, resampling seeds per task.

    ``tasks[t]`` is ``[n_t]`` (final scores) or ``[n_t, S]`` (a curve of S points per seed). Returns ``[reps]``
    or ``[reps, S]``. With one task this is the ordinary bootstrap over seeds.
    """
    rng = np.random.default_rng(seed)
    pooled = []
    for scores in tasks:
        scores = np.asarray(scores, float)
        idx = rng.integers(0, scores.shape[0], size=(reps, scores.shape[0]))  # [R, n_t]
        pooled.append(scores[idx])  # [R, n_t] or [R, n_t, S]
    stacked = np.concatenate(pooled, axis=1)  # [R, Σn_t(, S)]
    if stacked.ndim == 3:
        stacked = np.moveaxis(stacked, 1, -1)  # [R, S, Σn_t]
    return stat(stacked)


def interval(
    tasks: Sequence[np.ndarray] | np.ndarray,
    stat: str | Stat = "mean",
    *,
    reps: int = REPS,
    seed: int = SEED,
    level: float = LEVEL,
) -> tuple[float, float, float] | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(point estimate, lower, upper)`` of ``stat`` with a ``level`` stratified percentile bootstrap interval.

    ``tasks``: one array of per-seed scores (``[n]``, or ``[n, S]`` for curves), or a list of them (one per task,
    pooled as in rliable). With a single score in every task the interval is undefined: ``(x, nan, nan)``.
    """
    fn = STATS[stat] if isinstance(stat, str) else stat
    if isinstance(tasks, np.ndarray) or (len(tasks) and np.isscalar(tasks[0])):
        tasks = [np.asarray(tasks, float)]
    arrays = [np.asarray(t, float) for t in tasks if len(t)]
    if not arrays:
        return (np.nan, np.nan, np.nan)
    point = fn(np.moveaxis(np.concatenate(arrays, axis=0), 0, -1))
    if all(a.shape[0] < 2 for a in arrays):
        nan = np.full_like(point, np.nan)
        return (float(point), np.nan, np.nan) if np.ndim(point) == 0 else (point, nan, nan.copy())
    lo, hi = _percentiles(stratified_replicates(arrays, fn, reps=reps, seed=seed), level)
    if np.ndim(point) == 0:
        return float(point), float(lo), float(hi)
    return point, lo, hi


def t_interval(scores: Sequence[float] | np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """``(mean, lower, upper)``: the Student-t interval ``mean ± t_{(1+level)/2, n−1} · s / √n`` of the mean of
    ``scores`` (``s``: sample standard deviation). Bounds are nan below two scores; equal scores give a zero-width
    interval. Exact coverage when seed scores are normal; see the module docstring for why it replaces the
    bootstrap for one configuration's mean."""
    from scipy.stats import t as student_t

    x = np.asarray(scores, float)
    if x.size == 0:
        return (np.nan, np.nan, np.nan)
    centre = float(x.mean())
    if x.size < 2:
        return (centre, np.nan, np.nan)
    half = float(student_t.ppf((1.0 + level) / 2, x.size - 1)) * float(x.std(ddof=1)) / np.sqrt(x.size)
    return (centre, centre - half, centre + half)


def separated(best: tuple[float, float], others: Sequence[tuple[float, float]], higher_is_better: bool) -> bool:
    """Whether interval ``best = (lo, hi)`` lies strictly beyond every interval in ``others`` (no overlap).

    An undefined (nan) interval, on either side, never separates: the winner is then a tie.
    """
    lo, hi = best
    if np.isnan(lo) or np.isnan(hi):
        return False
    for o_lo, o_hi in others:
        if np.isnan(o_lo) or np.isnan(o_hi):
            return False
        if (higher_is_better and lo <= o_hi) or (not higher_is_better and hi >= o_lo):
            return False
    return True
