"""Interval estimates of the report: IQM, percentile bootstrap, stratification over tasks, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contrastlab.experiments import stats as st


def test_iqm_matches_a_quarter_trimmed_mean():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 4, 5, 8, 10, 17):
        x = rng.normal(size=n)
        assert st.iqm(x) == pytest.approx(scipy_stats.trim_mean(x, 0.25))
    assert st.iqm(np.array([1.0, 2.0, 3.0, 100.0])) == 2.5
    assert st.iqm(np.array([[1.0, 2.0, 3.0, 100.0], [0.0, 0.0, 1.0, 1.0]])).tolist() == [2.5, 0.5]  # last axis


def test_interval_is_deterministic_and_brackets_the_estimate():
    x = np.array([0.61, 0.72, 0.70, 0.65, 0.80])
    a, b = st.interval(x), st.interval(x)
    assert a == b
    est, lo, hi = a
    assert est == pytest.approx(x.mean()) and x.min() <= lo < est < hi <= x.max()
    reps = [st.stratified_replicates([x], st.mean, reps=100, seed=s) for s in (0, 0, 1)]
    assert np.array_equal(reps[0], reps[1]) and not np.array_equal(reps[0], reps[2])
    assert st.interval(list(x), "iqm")[0] == pytest.approx(st.iqm(x))


def test_interval_undefined_for_one_seed_and_empty():
    est, lo, hi = st.interval(np.array([3.0]))
    assert est == 3.0 and math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(v) for v in st.interval([]))


def test_bootstrap_is_stratified_by_task():
    """Seeds are resampled within each task, so every replicate keeps each task's share of the pool."""
    zeros, ones = np.zeros(2), np.ones(3)
    est, lo, hi = st.interval([zeros, ones], "mean")
    assert est == lo == hi == pytest.approx(0.6)  # 3 of 5 pooled scores are 1 in every replicate
    curves = [np.array([[0.0, 1.0], [0.0, 3.0]]), np.array([[10.0, 10.0], [20.0, 20.0]])]  # [seeds, S] per task
    est, lo, hi = st.interval(curves, "mean")
    assert est.tolist() == [7.5, 8.5] and (lo <= est).all() and (est <= hi).all()


def test_percentile_interval_covers_the_mean_about_95_percent():
    rng = np.random.default_rng(0)
    hits = 0
    for trial in range(200):
        x = rng.normal(10.0, 2.0, size=30)
        _, lo, hi = st.interval(x, reps=2000, seed=trial)
        hits += lo <= 10.0 <= hi
    assert 0.88 <= hits / 200 <= 0.99


def test_separated():
    assert st.separated((0.9, 1.0), [(0.5, 0.8), (0.1, 0.2)], higher_is_better=True)
    assert not st.separated((0.8, 1.0), [(0.5, 0.8)], higher_is_better=True)  # touching is overlap
    assert st.separated((0.1, 0.2), [(0.3, 0.4)], higher_is_better=False)
    assert not st.separated((0.1, 0.2), [(0.3, 0.4)], higher_is_better=True)
    assert not st.separated((float("nan"), float("nan")), [(0.0, 0.1)], higher_is_better=True)
    assert not st.separated((0.9, 1.0), [(float("nan"), float("nan"))], higher_is_better=True)
    assert not st.separated((0.2, 0.3), [(0.3, 0.4)], higher_is_better=False)  # touching, lower is better
    nan = float("nan")  # one undefined bound is enough to leave the interval undefined, on either side
    assert not st.separated((nan, 1.0), [(0.0, 0.1)], higher_is_better=True)
    assert not st.separated((0.9, nan), [(0.0, 0.1)], higher_is_better=True)
    assert not st.separated((0.9, 1.0), [(nan, 0.1)], higher_is_better=True)
    assert not st.separated((0.9, 1.0), [(0.0, nan)], higher_is_better=True)


def test_t_interval_matches_scipy_and_its_edges():
    from scipy import stats as scipy_stats

    from contrastlab.experiments.stats import t_interval

    for values in ([0.2, 0.3], [0.6, 0.7, 0.8], [1.0, 2.0, 4.0, 8.0, 16.0]):
        x = np.asarray(values)
        low, high = scipy_stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=scipy_stats.sem(x))
        assert t_interval(values) == pytest.approx((x.mean(), low, high))
    centre, low, high = t_interval([0.5])
    assert centre == 0.5 and np.isnan(low) and np.isnan(high)  # one seed: no interval
    assert t_interval([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)  # equal seeds: zero width
    assert all(np.isnan(v) for v in t_interval([]))


def bootstrap_means(x: np.ndarray, reps: int, seed: int) -> np.ndarray:
    """Textbook bootstrap of the mean: ``reps`` resamples of the n seeds with replacement, drawn as the docstring
    says (one ``default_rng(seed)``, an ``[reps, n]`` table of indices)."""
    idx = np.random.default_rng(seed).integers(0, len(x), size=(reps, len(x)))
    return x[idx].mean(axis=1)


@pytest.mark.parametrize("level", [0.95, 0.8])
def test_interval_is_the_central_percentiles_of_the_bootstrap_replicates(level):
    """The 95 % percentile interval is the 2.5th and 97.5th percentiles of the replicates (for level L: the
    (1−L)/2 and (1+L)/2 quantiles), not a wider or lopsided pair."""
    x = np.array([0.61, 0.72, 0.70, 0.65, 0.80, 0.58])
    replicates = bootstrap_means(x, 4000, 7)
    tail = (1 - level) / 2
    lo, hi = np.quantile(replicates, [tail, 1 - tail])
    assert st.interval(x, reps=4000, seed=7, level=level) == pytest.approx((x.mean(), lo, hi), rel=1e-12)


def test_one_task_with_one_seed_still_has_an_interval_from_the_others():
    """Only when *every* task has a single score is the interval undefined; a one-seed task beside a three-seed
    one is resampled as a constant, and the interval comes from the other task's seeds."""
    est, lo, hi = st.interval([np.array([1.0]), np.array([0.0, 1.0, 2.0])])
    assert est == pytest.approx(1.0) and lo < est < hi and not (math.isnan(lo) or math.isnan(hi))


def test_single_seed_results_keep_their_shape():
    """A final score gives plain floats; a curve per seed gives arrays of nan bounds, one per step (the learning
    curve of single-seed runs)."""
    for scores in (np.array([3.0]), [3.0]):
        est, lo, hi = st.interval(scores)
        assert type(est) is float and est == 3.0 and math.isnan(lo) and math.isnan(hi)
    curves = [np.array([[0.0, 1.0, 2.0]]), np.array([[2.0, 3.0, 4.0]])]  # two tasks, one seed each, 3 steps
    est, lo, hi = st.interval(curves, "mean")
    assert est.tolist() == [1.0, 2.0, 3.0] and lo.shape == hi.shape == (3,)
    assert np.isnan(lo).all() and np.isnan(hi).all()
