"""The compare grid (:mod:`contrastlab.experiments.grid`): boundaries and naming the broader tests in
``tests/platform/test_compare_grid.py`` leave open (found by a mutation audit)."""

from __future__ import annotations

import hashlib
import json

import pytest

from contrastlab.experiments import grid as cmp
from contrastlab.platform.errors import ConfigError, DeviceError


@pytest.mark.parametrize("value", ["100000", "-12345", "+250000"])
def test_an_integer_value_is_shown_as_typed_however_many_digits_it_has(value):
    """``train.steps=100000`` is a run name's ``steps=100000``, not four significant digits (``1e+05``)."""
    assert cmp.display_value(value) == value


def test_a_grid_of_exactly_the_run_limit_is_planned():
    """``MAX_RUNS`` is the most runs one command plans: that many are accepted, one more is refused."""
    seeds = list(range(1, cmp.MAX_RUNS + 1))
    assert len(cmp.expand_grid("x", ["a"], seeds, hparams_of=lambda loss: set())) == cmp.MAX_RUNS
    with pytest.raises(ConfigError, match="100,001 runs"):
        cmp.expand_grid("x", ["a"], [*seeds, cmp.MAX_RUNS + 1], hparams_of=lambda loss: set())


@pytest.mark.parametrize(("seconds", "text"), [
    (59.4, "59 s"), (59.5, "1 min"),  # rounds to a whole minute: not "60 s"
    (3599.0, "60 min"), (3600.0, "1.0 h"),
    (48 * 3600 - 1, "48.0 h"), (48 * 3600, "2.0 days"),
])  # fmt: skip
def test_durations_change_unit_exactly_at_their_thresholds(seconds, text):
    assert cmp.fmt_duration(seconds) == text


def test_devices_are_checked_against_the_visible_cuda_count(monkeypatch):
    """Without ``available`` the count is torch's (0 only when CUDA is not available)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert cmp.parse_devices("1,0") == ["cuda:1", "cuda:0"]
    with pytest.raises(DeviceError, match=r"1 requested, 2 visible; valid: 0\.\.1"):
        cmp.parse_devices("2")


def test_a_negative_device_index_among_valid_ones_is_refused():
    with pytest.raises(ConfigError, match="distinct and ≥ 0"):
        cmp.parse_devices("0,-1", available=4)


def test_the_eta_is_unknown_when_the_plugin_cannot_estimate_one_run():
    """One configuration without an estimate makes the whole grid's time unknown (the devices are still listed)."""

    class Config:
        device = "cpu"

    class Partial:
        def estimate_seconds(self, config, device):
            return None if config.unknown else 10.0

    points = cmp.expand_grid("x", ["a", "b"], [1], hparams_of=lambda loss: set())
    configs = {p.config_hash: Config() for p in points}
    for p, unknown in zip(points, (False, True), strict=True):
        configs[p.config_hash].unknown = unknown
    assert cmp.estimate_wall_time(points, configs, [None], Partial()) == (None, ["cpu"])


def test_run_names_are_a_60_character_slug_the_six_hex_digit_configuration_hash_and_the_seed():
    """The name must stay the same from one version to the next: a rerun finds its folders by it (resume)."""
    tag = "x" * 80
    point = cmp.GridPoint("toy", "dcl", 3, "smoke", ("train.steps=5",), (("loss.tau_plus", "0.05"), ("train.tag", tag)))
    ident = json.dumps(["toy", "dcl", "smoke", sorted(["train.steps=5", "loss.tau_plus=0.05", f"train.tag={tag}"])])
    digest = hashlib.sha1(ident.encode()).hexdigest()[:6]
    assert point.config_hash == digest
    slug = f"tau_plus=0.05_tag={tag}"[:60]
    assert point.run_name == f"{slug}-{digest}-s3"
