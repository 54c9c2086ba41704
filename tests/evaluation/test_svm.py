"""The cross-validated SVM readout against a hand-written nested cross-validation, and its test-fold isolation."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from contrastlab.evaluation.svm import cross_validated_accuracy

GRID = (0.01, 0.1, 1.0, 10.0)


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three overlapping Gaussian classes (40/30/20 examples) in 6 dimensions with very different scales."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1, 2], [40, 30, 20])
    x = rng.normal(size=(90, 6)) + 0.9 * y[:, None] * rng.normal(size=(1, 6))
    return x * np.array([1.0, 10.0, 0.1, 100.0, 1.0, 5.0]), y


def _fit_score(x_tr, y_tr, x_te, y_te, c: float, kernel: str, standardize: bool) -> float:
    if standardize:
        scaler = StandardScaler().fit(x_tr)                                # statistics of the training part only
        x_tr, x_te = scaler.transform(x_tr), scaler.transform(x_te)
    clf = SVC(C=c, kernel=kernel, max_iter=100_000, random_state=0).fit(x_tr, y_tr)
    return float((clf.predict(x_te) == y_te).mean())


def _reference(x, y, folds: int, inner: int, kernel: str, standardize: bool, seed: int):
    """Outer stratified folds; per outer training part, the C with the best mean inner accuracy (first on ties)."""
    accs, chosen = [], []
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, y):
        means = []
        for c in GRID:
            scores = [_fit_score(x[tr][a], y[tr][a], x[tr][b], y[tr][b], c, kernel, standardize)
                      for a, b in StratifiedKFold(inner, shuffle=True, random_state=seed).split(x[tr], y[tr])]
            means.append(np.mean(scores))
        best = GRID[int(np.argmax(means))]
        chosen.append(best)
        accs.append(_fit_score(x[tr], y[tr], x[te], y[te], best, kernel, standardize))
    return accs, chosen


@pytest.mark.parametrize(("kernel", "standardize"), [("linear", True), ("rbf", False)])
def test_nested_cross_validation_matches_a_hand_written_one(kernel: str, standardize: bool) -> None:
    x, y = _data()
    got = cross_validated_accuracy(x, y, folds=5, inner_folds=3, c_grid=GRID, kernel=kernel,
                                   standardize=standardize, seed=3)
    accs, chosen = _reference(x, y, 5, 3, kernel, standardize, 3)
    assert got.fold_accuracies == pytest.approx(accs, abs=1e-12)
    assert got.chosen_c == tuple(chosen)
    assert got.mean == pytest.approx(np.mean(accs)) and got.std == pytest.approx(np.std(accs))  # ddof 0
    assert 0.4 < got.mean < 1.0                     # overlapping classes: neither chance nor perfect


def test_the_test_fold_never_influences_c_or_the_scaling() -> None:
    """Replacing the rows of one outer test fold by garbage changes nothing that was learnt without them."""
    x, y = _data(1)
    base = cross_validated_accuracy(x, y, folds=5, inner_folds=3, c_grid=GRID, seed=7)
    folds = list(StratifiedKFold(5, shuffle=True, random_state=7).split(x, y))   # the folds depend on y only
    spoiled = x.copy()
    spoiled[folds[0][1]] = 1e6 * np.random.default_rng(0).normal(size=(len(folds[0][1]), x.shape[1]))
    other = cross_validated_accuracy(spoiled, y, folds=5, inner_folds=3, c_grid=GRID, seed=7)
    assert other.chosen_c[0] == base.chosen_c[0]                           # C of fold 0 is chosen without its test rows
    assert other.fold_accuracies[0] != base.fold_accuracies[0]              # ... which it is then tested on



def test_without_an_inner_split_c_falls_back_to_the_grid_value_nearest_one() -> None:
    """A class of 2 examples gives 2 outer folds whose training parts hold it once: no inner search is possible.
    C was then the grid's first (smallest) value, 10^-3 here, which underfits to the majority class."""
    x, y = _data()
    keep = np.r_[0:40, 40:70, 70:72]                                        # classes of 40, 30 and 2 examples
    result = cross_validated_accuracy(x[keep], y[keep], folds=10, c_grid=[1e-3, 0.1, 10.0, 1e3], seed=0)
    assert result.folds == 2 and result.chosen_c == (0.1, 0.1)
