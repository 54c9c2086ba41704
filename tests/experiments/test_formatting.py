"""How the report prints numbers (:mod:`contrastlab.experiments.formatting`), against the rule its docstrings state:
1 to 4 decimals, ``3 - floor(log10 |x|)`` clamped, 4 for zero (found by a mutation audit)."""

from __future__ import annotations

import math

import pytest

from contrastlab.experiments.formatting import decimals, fmt_interval, fmt_mean_std, md_cell


def reference_decimals(value: float) -> int:
    if value == 0:
        return 4
    if math.isnan(value):
        return 1
    return min(4, max(1, 3 - math.floor(math.log10(abs(value)))))


@pytest.mark.parametrize("value", [0.0, -0.0, 1e-5, 0.05, 0.8123, 1.0, 5.0, 9.99, 10.0, 12.3, 99.9, 100.0, 812.3,
                                   12345.0, -0.05, -812.3, -5.0])
def test_decimals_follow_the_magnitude(value):
    assert decimals(value) == reference_decimals(value)


def test_decimals_of_the_boundaries_and_nan():
    assert [decimals(v) for v in (0.0, 0.5, 5.0, 50.0, 500.0, 5000.0, -50.0)] == [4, 4, 3, 2, 1, 1, 2]
    assert decimals(float("nan")) == 1


def test_mean_std_uses_the_means_decimals_and_says_n_for_one_seed():
    assert fmt_mean_std(0.81234, 0.01299) == "0.8123 ± 0.0130"
    assert fmt_mean_std(812.34, 5.67, n=3) == "812.3 ± 5.7"
    assert fmt_mean_std(0.81234, float("nan"), n=1) == "0.8123 (n=1)"
    assert fmt_mean_std(float("nan"), 0.1) == "–"


def test_interval_with_its_estimates_decimals_or_the_ones_given():
    assert fmt_interval(812.34, 795.04, 826.06) == "812.3 [795.0, 826.1]"
    assert fmt_interval(0.5, 0.41234, 0.6, dec=2) == "0.50 [0.41, 0.60]"
    assert fmt_interval(0.5, float("nan"), 0.6) == "0.5000"
    assert fmt_interval(0.5, 0.4, float("nan")) == "0.5000"
    assert fmt_interval(float("nan"), 0.4, 0.6) == "–"


def test_a_markdown_cell_is_one_line_with_its_pipes_escaped():
    assert md_cell("Error(s) in loading\n\tstate_dict  a|b ") == "Error(s) in loading state_dict a\\|b"
    assert md_cell(3) == "3"
