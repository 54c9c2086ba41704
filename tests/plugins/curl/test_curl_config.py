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


def test_a_negative_camera_id_other_than_the_free_camera_is_refused() -> None:
    """MuJoCo camera ids start at -1 (free); -5 was accepted and failed at the first render, after the run was made."""
    with pytest.raises(ConfigError, match=r"env\.camera_id=-5: Input should be greater than or equal to -1"):
        resolve_config(CurlTask(), preset="smoke", sets=["env.camera_id=-5"])
    assert resolve_config(CurlTask(), preset="smoke", sets=["env.camera_id=-1"]).env.camera_id == -1
