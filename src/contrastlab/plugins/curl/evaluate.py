"""Evaluation of a CURL agent: deterministic episodes on the centre crop, and episode videos.

CURL evaluates 10 episodes with the mean action of the policy on the centre 84×84 crop of the 100×100 frames
(Srinivas et al. 2020, appendix A). The centre crop happens inside the policy's features extractor, so the
policy takes raw environment observations.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from contrastlab.platform.errors import ConfigError


def run_episodes(agent: Any, env: Any, episodes: int, seed: int | None = None,
                 record: list[np.ndarray] | None = None, video_size: int = 256,
                 on_episode: Callable[[float], None] | None = None) -> list[float]:
    """Returns of ``episodes`` deterministic episodes; the first reset uses ``seed``.

    When ``record`` is a list, the frames of the first episode are appended to it (``[S, S, 3]`` uint8).
    ``on_episode(return)`` is called after each episode (progress display).
    """
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        done, total = False, 0.0
        if record is not None and episode == 0:
            record.append(env.render_rgb(video_size))
        while not done:
            action, _ = agent.policy.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
            if record is not None and episode == 0:
                record.append(env.render_rgb(video_size))
        returns.append(total)
        if on_episode is not None:
            on_episode(total)
    return returns


def check_video_path(path: Path) -> None:
    """Refuse a ``--video`` file type :func:`save_video` cannot write, before any episode runs."""
    if Path(path).suffix.lower() not in {".gif", ".mp4"}:
        raise ConfigError(f"--video: unsupported file type '{Path(path).suffix}'; use .gif or .mp4")


def save_video(frames: list[np.ndarray], path: Path, fps: int = 30) -> Path:
    """Write ``frames`` as a GIF or an MP4, chosen by the suffix of ``path``."""
    import imageio.v2 as imageio

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in {".gif", ".mp4"}:
        raise ConfigError(f"--video: unsupported file type '{suffix}'; use .gif or .mp4")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".gif":
        imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
        return path
    try:
        imageio.mimsave(path, frames, fps=fps)
    except (ImportError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"--video: cannot write MP4 ({exc}); pip install imageio-ffmpeg, or use .gif") from exc
    return path
