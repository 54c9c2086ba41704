"""PU split construction: exact n_L, SCAR, no labeled negatives, the exact prior, bad input."""

from __future__ import annotations

import pytest
import torch

from contrastlab import ConfigError
from contrastlab.data.pu import (
    LABELED_POSITIVE,
    UNLABELED,
    binarize,
    check_prior,
    check_test_set,
    exact_prior,
    make_pu_split,
    resolve_n_labeled,
)


def _labels(n_per_class: int = 100, k: int = 10) -> torch.Tensor:
    return torch.arange(k).repeat_interleave(n_per_class)  # [k * n_per_class]


def test_exact_prior_on_known_counts() -> None:
    # puNCE A.1.1 on PU-CIFAR10: 20k positives of 50k.
    assert exact_prior(20_000, 50_000, 1_000) == pytest.approx(19 / 49)
    assert exact_prior(20_000, 50_000, 3_000) == pytest.approx(17 / 47)
    assert exact_prior(20_000, 50_000, 10_000) == pytest.approx(0.25)
    assert exact_prior(40, 100, 0) == pytest.approx(0.4)


@pytest.mark.parametrize("scenario", ["case_control", "single_training_set"])
def test_split_counts_and_coding(scenario: str) -> None:
    labels = _labels()
    split = make_pu_split(labels, [0, 2, 4, 6], n_labeled=37, seed=3, scenario=scenario)
    assert split.n == 1000 and split.n_positive == 400 and split.n_labeled == 37
    assert set(split.observed.unique().tolist()) == {LABELED_POSITIVE, UNLABELED}
    assert int((split.observed == LABELED_POSITIVE).sum()) == 37
    # no labeled negatives
    assert bool((split.y_true[split.observed == LABELED_POSITIVE] == 1).all())
    assert torch.equal(split.labeled_idx, torch.nonzero(split.observed == 1).flatten())
    assert split.unlabeled_pool_prior == pytest.approx((400 - 37) / (1000 - 37))
    # the exact prior equals the empirical positive fraction of the unlabeled pool
    pool = split.y_true[split.observed == UNLABELED].float().mean().item()
    assert split.unlabeled_pool_prior == pytest.approx(pool)
    assert split.label_frequency == pytest.approx(37 / 400)
    assert split.population_prior == pytest.approx(0.4)
    if scenario == "case_control":
        assert split.unlabeled_idx.numel() == 1000 - 37
        assert split.risk_prior == pytest.approx(split.unlabeled_pool_prior)
        assert not bool(torch.isin(split.unlabeled_idx, split.labeled_idx).any())
    else:
        assert split.unlabeled_idx.numel() == 1000
        assert split.risk_prior == pytest.approx(0.4)
        # α(1 − c)/(1 − αc) is the pool prior under the single-training-set model
        a, c = split.population_prior, split.label_frequency
        assert a * (1 - c) / (1 - a * c) == pytest.approx(split.unlabeled_pool_prior)


def test_fraction_and_seed_determinism() -> None:
    labels = _labels()
    a = make_pu_split(labels, [1, 3, 5, 7, 9], labeled_fraction=0.1, seed=7)
    b = make_pu_split(labels, [1, 3, 5, 7, 9], labeled_fraction=0.1, seed=7)
    c = make_pu_split(labels, [1, 3, 5, 7, 9], labeled_fraction=0.1, seed=8)
    assert a.n_labeled == 50
    assert torch.equal(a.labeled_idx, b.labeled_idx)
    assert not torch.equal(a.labeled_idx, c.labeled_idx)


def test_scar_labeling_is_uniform_over_positive_classes() -> None:
    # SCAR: every positive is equally likely to be labeled, whatever its class (and so whatever x).
    labels = _labels(n_per_class=200, k=4)  # positives: classes 0 and 1 (400 examples)
    counts = torch.zeros(4)
    hits = torch.zeros(800)
    for seed in range(200):
        split = make_pu_split(labels, [0, 1], n_labeled=40, seed=seed)
        counts += torch.bincount(labels[split.labeled_idx], minlength=4).float()
        hits[split.labeled_idx] += 1
    assert counts[2] == 0 and counts[3] == 0
    share = counts[0] / counts[:2].sum()
    assert abs(share.item() - 0.5) < 0.03  # 8000 draws: sd ≈ 0.006
    rate = hits[:400] / 200  # per-example labeling rate, expectation c = 0.1
    assert abs(rate.mean().item() - 0.1) < 1e-6
    assert rate.std().item() < 0.05  # binomial(200, 0.1)/200 sd ≈ 0.021: no example is favoured


def test_binarize() -> None:
    y = binarize(torch.tensor([0, 1, 2, 3, 2]), [2, 3])
    assert y.tolist() == [0, 0, 1, 1, 1]


def test_a_subset_without_negatives_names_its_size_not_the_positive_classes() -> None:
    """``data.train_size=1`` said the positive classes 'cover every class in the data' (they cover 4 of 10)."""
    with pytest.raises(ConfigError, match=r"the 1 training example holds only class \[2\], all positive .*"
                                          r"larger data.train_size") as info:
        binarize(torch.tensor([2]), [0, 2, 4, 6], num_classes=10)
    assert "cover every class" not in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"positive_classes": [], "n_labeled": 5}, "empty"),
        ({"positive_classes": list(range(10)), "n_labeled": 5}, "cover every class"),
        ({"positive_classes": [0, 12], "n_labeled": 5}, "unknown class"),
        ({"positive_classes": [-1], "n_labeled": 5}, "unknown class"),
        ({"positive_classes": [0], "n_labeled": 101}, "larger than the number of positives"),
        ({"positive_classes": [0], "n_labeled": 0}, ">= 1"),
        ({"positive_classes": [0]}, "exactly one"),
        ({"positive_classes": [0], "n_labeled": 5, "labeled_fraction": 0.1}, "exactly one"),
        ({"positive_classes": [0], "labeled_fraction": 1.5}, "labeled_fraction"),
        ({"positive_classes": [0], "n_labeled": 5, "scenario": "pnu"}, "scenario"),
    ],
)
def test_bad_input_is_a_clear_config_error(kwargs: dict, match: str) -> None:
    labels = _labels()
    kwargs = dict(kwargs)
    classes = kwargs.pop("positive_classes")
    with pytest.raises(ConfigError, match=match):
        make_pu_split(labels, classes, num_classes=10, **kwargs)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.2, 1.7, "x"])
def test_prior_outside_unit_interval_is_rejected(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"\(0, 1\)"):
        check_prior(bad)  # type: ignore[arg-type]
    assert check_prior(0.3) == 0.3


def test_priors_from_pool_inverts_the_exact_prior() -> None:
    from contrastlab.data.pu import priors_from_pool

    split = make_pu_split(_labels(), [0, 2, 4, 6], n_labeled=37, seed=0)
    alpha, c = priors_from_pool(split.unlabeled_pool_prior, split.n_labeled, split.n)
    assert alpha == pytest.approx(split.population_prior)
    assert c == pytest.approx(split.label_frequency)


def test_every_default_positive_class_set_belongs_to_a_loadable_dataset() -> None:
    # an entry for a dataset without a loader (it listed "mnist") documents a default no run can use
    from contrastlab.data import dataset_names
    from contrastlab.data.pu import DEFAULT_POSITIVE_CLASSES

    assert set(DEFAULT_POSITIVE_CLASSES) <= set(dataset_names())


@pytest.mark.parametrize(("labels", "size", "missing"), [([0, 1, 1], 3, "positive"), ([2, 3], None, "negative")])
def test_a_test_set_needs_both_classes(labels: list[int], size: int | None, missing: str) -> None:
    """From a bad-input sweep: ``data.test_size=1`` trained to the end and reported auc NaN and f1 0."""
    with pytest.raises(ConfigError, match=f"has no {missing} example") as info:
        check_test_set(torch.tensor(labels), [2, 3], size)
    assert ("data.test_size=3: " in str(info.value)) == (size is not None)
    # the whole test set (no test_size) is not made larger by a larger data.test_size: the classes are the remedy
    assert ("use a larger data.test_size" in str(info.value)) == (size is not None)
    assert ("data.positive_classes" in str(info.value)) == (size is None)
    check_test_set(torch.tensor([0, 2]), [2, 3], 2)  # one of each: fine


@pytest.mark.parametrize(
    ("counts", "match"),
    [
        ((10, 100, -1), "need 0 <= n_labeled"),  # n_L < 0
        ((10, 100, 11), "need 0 <= n_labeled"),  # n_L > n₊
        ((101, 100, 5), "need 0 <= n_labeled"),  # n₊ > n
        ((5, 5, 5), "unlabeled pool is empty"),  # n_L = n
    ],
)
def test_exact_prior_refuses_impossible_counts(counts: tuple[int, int, int], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        exact_prior(*counts)
    assert exact_prior(10, 100, 10) == 0.0 and exact_prior(100, 100, 0) == 1.0  # the closed ends


@pytest.mark.parametrize(("fraction", "n_labeled"), [(1.0, 100), (0.001, 1), (0.255, 26), (0.5, 50)])
def test_a_labeled_fraction_rounds_to_at_least_one_positive(fraction: float, n_labeled: int) -> None:
    """n_L = round(c · n₊), at least 1 and at most n₊; a fraction of 1 (every positive) is valid."""
    assert resolve_n_labeled(100, None, fraction) == n_labeled
    assert resolve_n_labeled(100, 100, None) == 100 and resolve_n_labeled(100, 1, None) == 1
    for bad in (0.0, -0.1, 1.01):
        with pytest.raises(ConfigError, match="labeled_fraction"):
            resolve_n_labeled(100, None, bad)


def test_binarize_refuses_positive_classes_absent_from_the_data() -> None:
    with pytest.raises(ConfigError, match="match no example"):
        binarize(torch.tensor([0, 1, 1]), [3], num_classes=4)
    assert binarize(torch.tensor([0, 1, 3]), [3]).tolist() == [0, 0, 1]  # num_classes defaults to max + 1


def test_the_observed_coding_is_one_and_minus_one() -> None:
    """DESIGN.md's PU coding, which the samplers and the label-aware losses read: 1 labeled positive, −1 unlabeled."""
    split = make_pu_split(_labels(), [0], n_labeled=5, seed=0)
    assert (LABELED_POSITIVE, UNLABELED) == (1, -1)
    assert sorted(split.observed.unique().tolist()) == [-1, 1] and int((split.observed == -1).sum()) == 995


def test_the_default_positive_classes_are_those_docs_pu_md_lists() -> None:
    """docs/pu.md §1's table (PU-CIFAR10 = vehicles 0, 1, 8, 9 as in puNCE; the Fashion-MNIST tops 0, 2, 4, 6;
    synthetic class 0) is what a run without data.positive_classes uses."""
    import re
    from pathlib import Path

    from contrastlab.data.pu import DEFAULT_POSITIVE_CLASSES

    text = (Path(__file__).resolve().parents[2] / "docs" / "pu.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9_]+)`(?: \(default\))? \| ([0-9, ]+) \|", text, flags=re.MULTILINE)
    assert {name: tuple(int(c) for c in ids.split(",")) for name, ids in rows} == DEFAULT_POSITIVE_CLASSES
    assert DEFAULT_POSITIVE_CLASSES["cifar10"] == (0, 1, 8, 9)


def test_the_class_count_defaults_to_the_largest_id_plus_one() -> None:
    """Without ``num_classes`` the ids 0..max(labels) are the classes: an id past them is unknown, and positive
    classes naming all of them leave no negative."""
    with pytest.raises(ConfigError, match=r"unknown class id\(s\) \[3\]; valid ids: 0..2"):
        binarize(torch.tensor([0, 1, 2]), [3])
    with pytest.raises(ConfigError, match="cover every class"):
        binarize(torch.tensor([0, 1, 1]), [0, 1])
    assert binarize(torch.tensor([0, 1, 2]), [2]).tolist() == [0, 0, 1]  # a single positive example is fine
