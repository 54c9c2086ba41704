"""DeepMind Control Suite pixel environments with the gymnasium API.

Importing this package sets ``MUJOCO_GL=egl`` when it is unset (before dm-control or MuJoCo load) and registers a
gymnasium id for every suite task, e.g. ``contrastlab/cheetah-run-v0``::

    import gymnasium as gym
    import contrastlab.envs  # noqa: F401  (registers the ids)
    env = gym.make("contrastlab/cartpole-swingup-v0", render_size=100)
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from contrastlab.envs.dmc import (
    CURL_ACTION_REPEAT,
    DEFAULT_ACTION_REPEAT,
    DMCPixelEnv,
    check_camera,
    check_rendering,
    curl_action_repeat,
    env_id,
    register_envs,
    suite_tasks,
    validate_task,
)

__all__ = [
    "CURL_ACTION_REPEAT",
    "DEFAULT_ACTION_REPEAT",
    "DMCPixelEnv",
    "check_camera",
    "check_rendering",
    "curl_action_repeat",
    "env_id",
    "register_envs",
    "suite_tasks",
    "validate_task",
]

ENV_IDS: list[str] = register_envs()
"""Every registered gymnasium id."""
