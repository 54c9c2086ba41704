"""Shared check for the encoder tests: each hyperparameter's documented default and range are what the code uses."""

from __future__ import annotations

import inspect
import re

import pytest

from contrastlab import ConfigError

_INTERVAL = re.compile(r"^([\[(])\s*(-?[\d.]+),\s*(-?[\d.]+)\s*([\])])$")


def _accepts(hp, value) -> bool:
    try:
        hp.validate(value, "test")
    except ConfigError:
        return False
    return True


def _check_documented_hparams(cls, defaults: dict) -> None:
    """``cls.hyperparameters`` have ``defaults``, the constructor's defaults agree, and each range written as an
    interval (``[4, 512]``, ``(0, 8]``) or a choice list (``a | b``) is exactly what the check enforces."""
    assert {hp.name: hp.default for hp in cls.hyperparameters} == defaults
    params = inspect.signature(cls).parameters
    assert {name: params[name].default for name in defaults} == defaults
    for hp in cls.hyperparameters:
        match = _INTERVAL.match(hp.range)
        if match:
            left, lo, hi, right = match.groups()
            integer = isinstance(hp.default, int) and "." not in lo + hi
            num = int if integer else float
            lo, hi = num(lo), num(hi)
            step = 1 if integer else 1e-6
            assert _accepts(hp, lo) == (left == "[") and _accepts(hp, lo + step) and not _accepts(hp, lo - step)
            assert _accepts(hp, hi) == (right == "]") and _accepts(hp, hi - step) and not _accepts(hp, hi + step)
        else:
            choices = [c.strip() for c in hp.range.split("|")]
            values = [c == "true" for c in choices] if choices == ["true", "false"] else choices
            assert all(_accepts(hp, v) for v in values) and not _accepts(hp, "no-such-choice"), hp.name


@pytest.fixture
def check_documented_hparams():
    """:func:`_check_documented_hparams`."""
    return _check_documented_hparams
