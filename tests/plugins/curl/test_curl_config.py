"""The curl config refuses, before anything runs, values that would fail only after the run is created."""

from __future__ import annotations

import pytest

from contrastlab.platform.config import resolve_config
from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.curl.task import CurlTask


def test_a_huge_hidden_width_is_refused_before_the_run_is_created() -> None:
    with pytest.raises(ConfigError, match=r"agent\.hidden_dim=100000000000: Input should be less than or equal to"):
        resolve_config(CurlTask(), preset="smoke", sets=["agent.hidden_dim=100000000000"])
    assert resolve_config(CurlTask(), preset="paper").agent.hidden_dim == 1024
