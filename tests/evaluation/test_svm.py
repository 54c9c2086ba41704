"""The cross-validated SVM readout against a hand-written nested cross-validation, and its test-fold isolation."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
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


def _fit_score(x_tr, y_tr, x_te, y_te, c: float, kernel: str, standardize: bool, readout: str = "svm",
               seed: int = 0) -> float:
    if standardize:
        scaler = StandardScaler().fit(x_tr)                                # statistics of the training part only
        x_tr, x_te = scaler.transform(x_tr), scaler.transform(x_te)
    if readout == "svm":
        clf = SVC(C=c, kernel=kernel, max_iter=100_000, random_state=seed).fit(x_tr, y_tr)
    else:
        clf = LogisticRegression(C=c, max_iter=100_000).fit(x_tr, y_tr)
    return float((clf.predict(x_te) == y_te).mean())


def _reference(x, y, folds: int, inner: int, kernel: str, standardize: bool, seed: int, grid=GRID,
               readout: str = "svm"):
    """Outer stratified folds; per outer training part, the C with the best mean inner accuracy (first on ties)."""
    accs, chosen = [], []
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, y):
        means = []
        for c in grid:
            scores = [_fit_score(x[tr][a], y[tr][a], x[tr][b], y[tr][b], c, kernel, standardize, readout, seed)
                      for a, b in StratifiedKFold(inner, shuffle=True, random_state=seed).split(x[tr], y[tr])]
            means.append(np.mean(scores))
        best = grid[int(np.argmax(means))]
        chosen.append(best)
        accs.append(_fit_score(x[tr], y[tr], x[te], y[te], best, kernel, standardize, readout, seed))
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


def test_the_defaults_are_the_infograph_protocol() -> None:
    """10 outer folds, 5 inner folds, C in {10^-3, …, 10^3}, a linear SVM on standardised features, seed 0; torch
    tensors (even ones that require grad) give the same as numpy arrays."""
    import torch

    from contrastlab.evaluation.svm import C_GRID

    assert pytest.approx(tuple(10.0 ** e for e in range(-3, 4)), rel=1e-12) == C_GRID
    x, y = _data(2)
    got = cross_validated_accuracy(torch.tensor(x, dtype=torch.float64, requires_grad=True), torch.tensor(y))
    accs, chosen = _reference(x, y, 10, 5, "linear", True, 0, grid=C_GRID)
    assert got.folds == 10 and got.fold_accuracies == pytest.approx(accs, abs=1e-12)
    assert got.chosen_c == tuple(chosen) and got.mean == pytest.approx(np.mean(accs))


@pytest.mark.parametrize("standardize", [True, False])
def test_the_logistic_regression_readout_matches_a_hand_written_one(standardize: bool) -> None:
    """Raw features need far more than 100 L-BFGS iterations: the readout runs to convergence like the reference."""
    x, y = _data(0)
    got = cross_validated_accuracy(x, y, readout="logreg", folds=4, inner_folds=3, c_grid=GRID, seed=5,
                                   standardize=standardize)
    accs, chosen = _reference(x, y, 4, 3, "linear", standardize, 5, readout="logreg")
    assert got.fold_accuracies == pytest.approx(accs, abs=1e-12) and got.chosen_c == tuple(chosen)
    assert got.mean == pytest.approx(np.mean(accs)) and got.std == pytest.approx(np.std(accs))


def test_two_classes_of_two_examples_are_enough() -> None:
    """The smallest valid input: 2 folds, no inner search (the grid value nearest C = 1)."""
    x = np.array([[0.0, 1.0], [0.1, 0.9], [1.0, 0.0], [0.9, 0.1]])
    result = cross_validated_accuracy(x, np.array([0, 0, 1, 1]), c_grid=[1e-2, 2.0, 1e3])
    assert result.folds == 2 and result.chosen_c == (2.0, 2.0) and len(result.fold_accuracies) == 2


@pytest.mark.parametrize("case", ["1-d features", "fewer labels", "non-finite", "one class", "a class of one",
                                  "empty grid", "zero in grid", "negative in grid", "unknown readout"])
def test_bad_input_is_a_config_error(case: str) -> None:
    from contrastlab.platform.errors import ConfigError

    x, y = _data()
    kwargs: dict = {"folds": 3, "inner_folds": 2, "c_grid": GRID}
    if case == "1-d features":
        x = x[:, 0]
    elif case == "fewer labels":
        y = y[:-1]
    elif case == "non-finite":
        x = x.copy()
        x[5, 2] = np.nan
    elif case == "one class":
        y = np.zeros_like(y)
    elif case == "a class of one":
        y = y.copy()
        y[0] = 7
    elif case == "empty grid":
        kwargs["c_grid"] = []
    elif case == "zero in grid":
        kwargs["c_grid"] = [1.0, 0.0]
    elif case == "negative in grid":
        kwargs["c_grid"] = [-1.0, 1.0]
    else:
        kwargs["readout"] = "knn"
    with pytest.raises(ConfigError):
        cross_validated_accuracy(x, y, **kwargs)


@pytest.mark.parametrize(("grid", "inner"), [((0.01, 1000.0), 3), (GRID, 2)])
def test_a_two_value_grid_and_two_inner_folds_still_search_c(grid: tuple[float, ...], inner: int) -> None:
    """Only a single value (or a class seen once in a training part) skips the inner search."""
    x, y = _data()
    got = cross_validated_accuracy(x, y, folds=5, inner_folds=inner, c_grid=grid, seed=1)
    accs, chosen = _reference(x, y, 5, inner, "linear", True, 1, grid=grid)
    assert got.chosen_c == tuple(chosen) and got.fold_accuracies == pytest.approx(accs, abs=1e-12)
