"""curl evaluation helpers: a progress callback per episode, and --video checked before any episode runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import contrastlab as cl
from contrastlab.plugins.curl.evaluate import check_video_path, run_episodes


class _Env:
    """Episodes of three steps with reward 1 each."""

    def __init__(self) -> None:
        self.t = 0

    def reset(self, seed=None):
        self.t = 0
        return np.zeros(2), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2), 1.0, self.t >= 3, False, {}

    def render_rgb(self, size):
        return np.zeros((size, size, 3), np.uint8)


class _Agent:
    class policy:  # noqa: N801 (mirrors SB3's agent.policy.predict)
        @staticmethod
        def predict(obs, deterministic=True):
            return np.zeros(1), None


def test_on_episode_is_called_after_every_episode() -> None:
    seen: list[float] = []
    frames: list[np.ndarray] = []
    returns = run_episodes(_Agent(), _Env(), 4, seed=0, record=frames, video_size=8, on_episode=seen.append)
    assert returns == seen == [3.0, 3.0, 3.0, 3.0]
    assert len(frames) == 4  # the first episode only: reset + 3 steps


def test_video_file_type_is_checked_first(tmp_path: Path) -> None:
    check_video_path(tmp_path / "e.gif")
    check_video_path(tmp_path / "e.MP4")
    with pytest.raises(cl.ConfigError, match=r"use \.gif or \.mp4"):
        check_video_path(tmp_path / "e.avi")
