"""How the report prints numbers: decimals from the magnitude, mean ± std, intervals, Markdown cells."""

from __future__ import annotations

import math


def decimals(value: float) -> int:
    """1 to 4 decimals, fewer for larger magnitudes (``0.8123``, ``812.3``)."""
    if math.isnan(value) or value == 0:
        return 4 if value == 0 else 1
    return min(4, max(1, 3 - math.floor(math.log10(abs(value)))))


def fmt_mean_std(mean: float, std: float, n: int = 2) -> str:
    """``0.8123 ± 0.0130`` with decimals chosen from the magnitude of the mean; one seed shows ``0.8123 (n=1)``
    because a sample std is undefined there."""
    if math.isnan(mean):
        return "–"
    dec = decimals(mean)
    if n == 1:
        return f"{mean:.{dec}f} (n=1)"
    return f"{mean:.{dec}f} ± {std:.{dec}f}"


def fmt_interval(estimate: float, lo: float, hi: float, dec: int | None = None) -> str:
    """``812.3 [795.0, 826.1]``; ``812.3`` alone when the interval is undefined; ``–`` without an estimate."""
    if math.isnan(estimate):
        return "–"
    dec = decimals(estimate) if dec is None else dec
    if math.isnan(lo) or math.isnan(hi):
        return f"{estimate:.{dec}f}"
    return f"{estimate:.{dec}f} [{lo:.{dec}f}, {hi:.{dec}f}]"


def md_cell(text: object) -> str:
    """``text`` as one Markdown table cell: line breaks and runs of whitespace become one space and ``|`` is
    escaped (a multi-line error, e.g. torch's ``Error(s) in loading state_dict``, broke the table's rows)."""
    return " ".join(str(text).split()).replace("|", "\\|")
