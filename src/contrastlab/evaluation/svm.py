"""Cross-validated SVM / logistic-regression readout of frozen embeddings (the InfoGraph / GraphCL protocol).

InfoGraph (Sun et al., ICLR 2020, §4.2) and GraphCL (You et al., NeurIPS 2020, §4.2) evaluate unsupervised graph
embeddings by 10-fold cross-validation of an SVM trained on the frozen embeddings, with ``C`` chosen from
``{10^-3, …, 10^3}``; PUCL (Wang et al. 2024, Table 2) reports that SVM readout. Here every outer fold picks
``C`` by an inner stratified cross-validation on its training part only (no test fold is seen), features are
standardised with training-fold statistics unless ``standardize=False`` (the InfoGraph/GraphCL script's
``SVC()`` sees raw embeddings), and the result is the mean and standard deviation (``ddof = 0``) of the
outer-fold accuracies. scikit-learn is imported on first use.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from contrastlab.platform.errors import ConfigError

C_GRID = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)
"""The ``C`` values searched (InfoGraph/GraphCL: ``{10^-3, …, 10^3}``)."""

Readout = Literal["svm", "logreg"]


@dataclass(frozen=True)
class CVResult:
    """Outer-fold accuracies of one readout."""

    mean: float
    """Mean accuracy over the outer folds, in ``[0, 1]``."""
    std: float
    """Standard deviation (``ddof = 0``) of the outer-fold accuracies."""
    folds: int
    """Number of outer folds actually used (fewer than requested when a class is smaller than that)."""
    fold_accuracies: tuple[float, ...]
    """Accuracy of every outer fold."""
    chosen_c: tuple[float, ...]
    """``C`` picked by the inner search in every outer fold."""


def _estimator(readout: Readout, kernel: str, c: float, seed: int, standardize: bool, max_iter: int):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    if readout == "svm":
        clf = SVC(C=c, kernel=kernel, max_iter=max_iter, random_state=seed)
    elif readout == "logreg":
        clf = LogisticRegression(C=c, max_iter=max(max_iter, 100))
    else:
        raise ConfigError(f"unknown readout '{readout}'; valid: svm, logreg")
    return make_pipeline(StandardScaler(), clf) if standardize else make_pipeline(clf)


def cross_validated_accuracy(features: torch.Tensor | np.ndarray, labels: torch.Tensor | np.ndarray, *,
                             readout: Readout = "svm", folds: int = 10, c_grid: Sequence[float] = C_GRID,
                             inner_folds: int = 5, kernel: str = "linear", standardize: bool = True,
                             max_iter: int = 100_000, seed: int = 0) -> CVResult:
    """Stratified ``folds``-fold accuracy of ``readout`` on ``features [N, d]`` with class ``labels [N]``.

    ``C`` is searched over ``c_grid`` by an inner stratified ``inner_folds``-fold cross-validation of each outer
    training part (a single value skips the search). When a training part holds a single example of some class,
    no inner split is possible and the grid value nearest ``C = 1`` (scikit-learn's default) is used. Folds are
    shuffled with ``seed``, so results are deterministic. Classes smaller than ``folds`` reduce the number of
    folds; fewer than 2 examples in some class raise :class:`ConfigError`.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    x = features.detach().cpu().double().numpy() if isinstance(features, torch.Tensor) else np.asarray(features, float)
    y = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if x.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ConfigError(f"readout needs features [N, d] and labels [N]; got {tuple(x.shape)} and {tuple(y.shape)}")
    if not np.isfinite(x).all():
        raise ConfigError("readout got non-finite embeddings (the encoder diverged); lower train.lr")
    _, counts = np.unique(y, return_counts=True)
    if counts.size < 2 or counts.min() < 2:
        raise ConfigError(f"cross-validation needs >= 2 classes with >= 2 examples each; class sizes {counts.tolist()}")
    k = int(min(folds, counts.min()))
    grid = [float(c) for c in c_grid]
    if not grid or min(grid) <= 0:
        raise ConfigError(f"eval.c_grid must list positive values, got {list(c_grid)}")
    outer = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    fallback = min(grid, key=lambda c: abs(np.log10(c)))    # no inner search possible: the value nearest C = 1
    accs, chosen = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for train_idx, test_idx in outer.split(x, y):
            model = _estimator(readout, kernel, fallback, seed, standardize, max_iter)
            if len(grid) > 1:
                inner_k = int(min(inner_folds, np.unique(y[train_idx], return_counts=True)[1].min()))
                if inner_k >= 2:
                    inner = StratifiedKFold(n_splits=inner_k, shuffle=True, random_state=seed)
                    step = model.steps[-1][0]
                    model = GridSearchCV(model, {f"{step}__C": grid}, cv=inner, n_jobs=1)
            model.fit(x[train_idx], y[train_idx])
            best = model.best_params_ if isinstance(model, GridSearchCV) else {"C": fallback}
            chosen.append(float(next(iter(best.values()))))
            accs.append(float((model.predict(x[test_idx]) == y[test_idx]).mean()))
    arr = np.array(accs)
    return CVResult(float(arr.mean()), float(arr.std()), k, tuple(accs), tuple(chosen))
