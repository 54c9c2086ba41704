"""DeepMind Control Suite tasks as gymnasium pixel environments, arranged as in CURL.

CURL (Srinivas, Laskin & Abbeel 2020, appendix A) trains from a stack of the 3 most recent 100×100 renders of
camera 0 (the agent crops them to 84×84), repeats each action a task-dependent number of times (PlaNet's
convention: cartpole 8, finger and walker 2, every other domain 4) and counts *environment* frames, i.e. agent
steps × action repeat.

Rendering is the expensive part of a pixel environment. This module keeps one persistent MuJoCo camera per
environment (dm-control's ``physics.render`` rebuilds a scene on every call) and, by default, renders without
shadows and multi-sample anti-aliasing (``low_cost_render=True``, ≈5× faster). The low-cost images differ from
dm-control's (on average 1-5 of 255 per pixel on most tasks, 23 on reacher-easy, almost all from the shadows);
``low_cost_render=False`` renders exactly what ``physics.render`` (and so CURL, through dmc2gym) renders.
"""

from __future__ import annotations

import functools
import logging
import os
from collections import deque
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # before dm_control/mujoco pick a GL backend

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from contrastlab.platform.errors import ConfigError, DeviceError


def _not_settotalmass_notice(record: logging.LogRecord) -> bool:
    """False for MuJoCo's deprecation notice of ``<compiler settotalmass>``, which dm-control's own cheetah.xml
    uses and which dm-control relays through absl at every compile: three ``WARNING:absl:`` lines per cheetah run
    (checks, training env, evaluation env) that no user can act on."""
    return "settotalmass" not in record.getMessage()


logging.getLogger("absl").addFilter(_not_settotalmass_notice)

CURL_ACTION_REPEAT: dict[str, int] = {"cartpole": 8, "finger": 2, "walker": 2}
"""Per-domain action repeat of the CURL paper (Table 3 / PlaNet convention); other domains use 4."""
DEFAULT_ACTION_REPEAT = 4
"""Action repeat of every domain not listed in :data:`CURL_ACTION_REPEAT`."""


def curl_action_repeat(domain: str) -> int:
    """CURL's action repeat for ``domain``: cartpole 8, finger and walker 2, others 4."""
    return CURL_ACTION_REPEAT.get(domain, DEFAULT_ACTION_REPEAT)


def suite_tasks() -> dict[str, tuple[str, ...]]:
    """Every dm-control suite domain with its task names (``{"cheetah": ("run",), ...}``)."""
    from dm_control import suite

    return {domain: tuple(tasks) for domain, tasks in suite.TASKS_BY_DOMAIN.items()}


def validate_task(domain: str, task: str) -> None:
    """Raise :class:`ConfigError` listing the valid names when ``domain``/``task`` is not a suite task."""
    tasks = suite_tasks()
    if domain not in tasks:
        raise ConfigError(f"env.domain: unknown dm-control domain '{domain}'; valid: {', '.join(sorted(tasks))}")
    if task not in tasks[domain]:
        raise ConfigError(
            f"env.task: unknown task '{task}' for domain '{domain}'; valid: {', '.join(sorted(tasks[domain]))}"
        )


@functools.cache
def _camera_limits(domain: str, task: str) -> tuple[int, int, int]:
    """``(cameras, largest width, largest height)`` an offscreen frame of ``domain``/``task`` may have."""
    from dm_control import suite

    env = suite.load(domain, task, task_kwargs={"random": 0})
    model = env.physics.model
    limits = int(model.ncam), int(model.vis.global_.offwidth), int(model.vis.global_.offheight)
    env.physics.free()
    return limits


def check_camera(domain: str, task: str, camera_id: int, render_size: int) -> None:
    """Raise :class:`ConfigError` naming ``env.camera_id`` or ``env.render_size`` when ``domain``/``task`` has no
    such camera or cannot render frames that large (its model's offscreen buffer; 640 × 480 for most domains).
    Either failed at the first frame, with a dm-control traceback after the run directory was made."""
    cameras, width, height = _camera_limits(domain, task)
    if not -1 <= camera_id < cameras:
        raise ConfigError(f"env.camera_id={camera_id}: {domain} has {cameras} fixed camera(s); valid: -1 (the free "
                          f"camera) to {cameras - 1}")
    if render_size > min(width, height):
        raise ConfigError(f"env.render_size={render_size}: {domain} renders offscreen frames of at most "
                          f"{width} × {height} pixels; valid: render_size <= {min(width, height)}")


def check_rendering() -> str:
    """Render one tiny frame headless; return the GL backend or raise :class:`DeviceError` saying what to install."""
    backend = os.environ.get("MUJOCO_GL", "egl")
    try:
        from dm_control import suite

        env = suite.load("cartpole", "balance", task_kwargs={"random": 0})
        env.reset()
        env.physics.render(8, 8, camera_id=0)
        env.physics.free()  # its GL context now, not when garbage collected (dm-control's close() frees nothing)
    except Exception as exc:  # the GL stack raises many types (ImportError, RuntimeError, OSError, ...)
        raise DeviceError(
            f"MuJoCo cannot render headless with MUJOCO_GL={backend} ({type(exc).__name__}: {exc}); install EGL "
            "(apt-get install libegl1 libgl1) or OSMesa (apt-get install libosmesa6 and set MUJOCO_GL=osmesa)"
        ) from exc
    return backend


class DMCPixelEnv(gym.Env):
    """A dm-control suite task from pixels: ``[3·k, H, W]`` uint8 frame stacks, float32 actions in ``[-1, 1]``.

    Each :meth:`step` applies the action ``action_repeat`` times (summing rewards) and renders once.
    ``info["env_frames"]`` counts the physics control steps taken (the paper's "environment steps").
    dm-control's time limit ends an episode as *truncated*; a zero discount ends it as *terminated*.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(
        self,
        domain: str,
        task: str,
        render_size: int = 100,
        frame_stack: int = 3,
        action_repeat: int | None = None,
        camera_id: int = 0,
        low_cost_render: bool = True,
        seed: int | None = None,
        render_mode: str | None = "rgb_array",
    ) -> None:
        """Load ``domain``/``task``; ``action_repeat=None`` takes CURL's value for the domain."""
        validate_task(domain, task)
        action_repeat = curl_action_repeat(domain) if action_repeat is None else int(action_repeat)
        if action_repeat < 1:
            raise ConfigError(f"env.action_repeat: must be >= 1, got {action_repeat}")
        if frame_stack < 1:
            raise ConfigError(f"env.frame_stack: must be >= 1, got {frame_stack}")
        if render_size < 1:
            raise ConfigError(f"env.render_size: must be >= 1, got {render_size}")
        from dm_control import suite
        from dm_control.mujoco.engine import Camera

        self.domain, self.task = domain, task
        self.render_size, self.frame_stack, self.action_repeat = render_size, frame_stack, action_repeat
        self.camera_id, self.low_cost_render, self.render_mode = camera_id, low_cost_render, render_mode
        self._env = suite.load(domain, task, task_kwargs={"random": seed})
        if low_cost_render:  # must be set before the first render creates the GL context
            self._env.physics.model.vis.quality.shadowsize = 0
            self._env.physics.model.vis.quality.offsamples = 0
        self._camera = Camera(self._env.physics, render_size, render_size, camera_id)
        spec = self._env.action_spec()
        self._act_low = spec.minimum.astype(np.float64)
        self._act_high = spec.maximum.astype(np.float64)
        self.action_space = spaces.Box(-1.0, 1.0, shape=spec.shape, dtype=np.float32)
        self.observation_space = spaces.Box(
            0, 255, shape=(3 * frame_stack, render_size, render_size), dtype=np.uint8
        )
        self._frames: deque[np.ndarray] = deque(maxlen=frame_stack)
        self._last_frame: np.ndarray | None = None
        self._restored_random: tuple[Any, ...] | None = None
        self._episode_random: tuple[Any, ...] | None = None  # the state the last reset drew its start from, until
        # the episode's first step

    def random_state(self) -> tuple[Any, ...]:
        """The state of the task's initial-state randomness (numpy ``RandomState.get_state()``), for checkpoints:
        the state the episode just begun drew its start from while it has taken no step (a checkpoint at an
        episode's end comes after the automatic reset, and a resume would skip that episode), the state pending
        for the next reset (:meth:`restore_random_state`), else the current one."""
        if self._restored_random is not None:
            return self._restored_random
        if self._episode_random is not None:
            return self._episode_random
        return self._env.task.random.get_state()

    def restore_random_state(self, state: tuple[Any, ...]) -> None:
        """Restore :meth:`random_state` at the next reset, after any seed that reset is given: a resumed run's
        environment is seeded from the config like the run's first one, and would otherwise start its episodes
        where the run's first episodes started."""
        self._restored_random = state

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        """Start an episode; a ``seed`` reseeds the task's initial-state randomness (deterministic episodes)."""
        super().reset(seed=seed)
        if seed is not None:
            self._env.task.random.seed(seed)
        if self._restored_random is not None:
            self._env.task.random.set_state(self._restored_random)
            self._restored_random = None
        self._episode_random = self._env.task.random.get_state()
        self._env.reset()
        frame = self._render_frame()
        for _ in range(self.frame_stack):
            self._frames.append(frame)
        return self._observation(), {"env_frames": 0}

    def step(self, action: np.ndarray):  # type: ignore[override]
        """Apply ``action`` ``action_repeat`` times; return the new stack, summed reward and the flags."""
        action = np.asarray(action, dtype=np.float64).reshape(self.action_space.shape)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action contains non-finite values: {action}")
        action = np.clip(action, -1.0, 1.0)
        self._episode_random = None  # the episode has begun: the current state draws the next one
        scaled = self._act_low + (action + 1.0) * 0.5 * (self._act_high - self._act_low)
        reward, frames, terminated, truncated = 0.0, 0, False, False
        for _ in range(self.action_repeat):
            ts = self._env.step(scaled)
            reward += float(ts.reward or 0.0)
            frames += 1
            if ts.last():
                terminated = ts.discount is not None and float(ts.discount) == 0.0
                truncated = not terminated
                break
        self._frames.append(self._render_frame())
        return self._observation(), reward, terminated, truncated, {"env_frames": frames}

    def render(self) -> np.ndarray:  # type: ignore[override]
        """The latest rendered frame as ``[H, W, 3]`` uint8."""
        if self._last_frame is None:
            raise RuntimeError("call reset() before render()")
        return self._last_frame

    def render_rgb(self, size: int) -> np.ndarray:
        """Render the current state at ``size``×``size`` (e.g. for videos), ``[size, size, 3]`` uint8."""
        return self._env.physics.render(size, size, camera_id=self.camera_id)

    def close(self) -> None:
        """Release the renderer and the physics' rendering contexts now (dm-control's own ``close`` is dm_env's no-op:
        the GL context was freed whenever it was garbage collected, from whichever thread that happened in)."""
        self._camera = None  # type: ignore[assignment]
        self._env.close()
        if getattr(self._env.physics, "_contexts", None):
            self._env.physics.free()

    # ------------------------------------------------------------------ helpers
    def _render_frame(self) -> np.ndarray:
        self._last_frame = self._camera.render()  # [H, W, 3] uint8
        return np.ascontiguousarray(self._last_frame.transpose(2, 0, 1))  # [3, H, W]

    def _observation(self) -> np.ndarray:
        return np.concatenate(list(self._frames), axis=0)  # [3k, H, W]


def env_id(domain: str, task: str) -> str:
    """The gymnasium id of a suite task, e.g. ``contrastlab/cheetah-run-v0``."""
    return f"contrastlab/{domain}-{task}-v0"


def register_envs() -> list[str]:
    """Register every suite task with gymnasium (idempotent); return the ids."""
    from dm_control import suite

    ids = []
    for domain, task in suite.ALL_TASKS:
        name = env_id(domain, task)
        if name not in gym.registry:
            gym.register(id=name, entry_point=DMCPixelEnv, kwargs={"domain": domain, "task": task})
        ids.append(name)
    return ids
