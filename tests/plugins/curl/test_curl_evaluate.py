"""curl evaluation helpers: a progress callback per episode, and --video checked before any episode runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import contrastlab as cl
from contrastlab.plugins.curl.evaluate import check_video_path, run_episodes, save_video


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


class _CountingEnv(_Env):
    """Records the seed of every reset and renders frames that name the episode and step they show."""

    def __init__(self) -> None:
        super().__init__()
        self.seeds: list[int | None] = []
        self.episode = -1

    def reset(self, seed=None):
        self.seeds.append(seed)
        self.episode += 1
        return super().reset(seed)

    def render_rgb(self, size):
        frame = np.zeros((size, size, 3), np.uint8)
        frame[0, 0] = (self.episode, self.t, 0)
        return frame


class _RecordingAgent:
    """Remembers the ``deterministic`` flag of every prediction."""

    def __init__(self) -> None:
        self.flags: list[bool] = []
        agent = self

        class policy:  # noqa: N801
            @staticmethod
            def predict(obs, deterministic=False):
                agent.flags.append(deterministic)
                return np.zeros(1), None

        self.policy = policy


def test_episodes_use_the_mean_action_and_only_the_first_reset_is_seeded() -> None:
    """CURL evaluates with the deterministic (mean) action; the seed makes the first episode's start repeatable and
    the later episodes go on from it (re-seeding each would replay one start ``episodes`` times)."""
    env, agent = _CountingEnv(), _RecordingAgent()
    run_episodes(agent, env, 3, seed=7)
    assert env.seeds == [7, None, None]
    assert agent.flags == [True] * 9


def test_the_recorded_frames_are_the_first_episodes_reset_and_steps() -> None:
    frames: list[np.ndarray] = []
    run_episodes(_Agent(), _CountingEnv(), 2, seed=0, record=frames, video_size=4)
    assert [tuple(f[0, 0, :2]) for f in frames] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert all(f.shape == (4, 4, 3) and f.dtype == np.uint8 for f in frames)


def _frames() -> list[np.ndarray]:
    return [np.full((16, 16, 3), 60 * i, np.uint8) for i in range(4)]


def test_save_video_writes_a_looping_gif_at_the_given_frame_rate(tmp_path: Path) -> None:
    from PIL import Image

    path = save_video(_frames(), tmp_path / "new" / "dir" / "episode.GIF", fps=10)  # parents made
    save_video(_frames(), tmp_path / "new" / "dir" / "again.gif", fps=10)  # the folder exists now
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == 4
        assert gif.info["duration"] == 100 and gif.info["loop"] == 0  # 1000/fps ms per frame; 0 = loop forever


def test_save_video_writes_an_mp4_and_refuses_other_types(tmp_path: Path) -> None:
    pytest.importorskip("imageio_ffmpeg")
    path = save_video(_frames(), tmp_path / "episode.mp4")
    assert path.read_bytes()[4:8] == b"ftyp"  # an ISO media file, not a GIF under an .mp4 name
    with pytest.raises(cl.ConfigError, match=r"unsupported file type '\.avi'"):
        save_video(_frames(), tmp_path / "episode.avi")
    assert not (tmp_path / "episode.avi").exists()
