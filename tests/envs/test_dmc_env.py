"""The dm-control pixel environment: gymnasium compliance, determinism, shapes, action repeat, errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import contrastlab.envs as envs
from contrastlab import ConfigError
from contrastlab.envs import DMCPixelEnv, curl_action_repeat


@pytest.fixture(scope="module")
def cartpole() -> DMCPixelEnv:
    env = gym.make("contrastlab/cartpole-swingup-v0", render_size=48).unwrapped
    yield env
    env.close()


def test_check_env_passes(cartpole: DMCPixelEnv) -> None:
    check_env(cartpole, skip_render_check=False)


def test_shapes_and_dtypes(cartpole: DMCPixelEnv) -> None:
    obs, _ = cartpole.reset(seed=0)
    assert obs.shape == (9, 48, 48) and obs.dtype == np.uint8
    assert cartpole.observation_space.contains(obs)
    assert cartpole.action_space.dtype == np.float32
    assert np.all(cartpole.action_space.low == -1) and np.all(cartpole.action_space.high == 1)
    # the reset stack repeats the first frame; a step shifts the stack by one frame
    assert np.array_equal(obs[0:3], obs[3:6]) and np.array_equal(obs[3:6], obs[6:9])
    nxt, reward, terminated, truncated, _ = cartpole.step(np.ones(1, dtype=np.float32))
    assert np.array_equal(nxt[0:6], obs[3:9]) and not np.array_equal(nxt[6:9], obs[6:9])
    assert isinstance(reward, float) and not terminated and not truncated
    assert cartpole.render().shape == (48, 48, 3)


def test_seed_makes_episodes_deterministic() -> None:
    def rollout(seed: int) -> tuple[list[np.ndarray], list[float]]:
        env = DMCPixelEnv("cartpole", "swingup", render_size=32)
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(0)
        observations, rewards = [obs], []
        for _ in range(10):
            obs, r, *_ = env.step(rng.uniform(-1, 1, size=1).astype(np.float32))
            observations.append(obs)
            rewards.append(r)
        env.close()
        return observations, rewards

    a, b, c = rollout(7), rollout(7), rollout(8)
    assert all(np.array_equal(x, y) for x, y in zip(a[0], b[0], strict=True)) and a[1] == b[1]
    assert not np.array_equal(a[0][0], c[0][0])


def test_action_repeat_accounting() -> None:
    assert curl_action_repeat("cartpole") == 8
    assert curl_action_repeat("finger") == curl_action_repeat("walker") == 2
    assert curl_action_repeat("cheetah") == curl_action_repeat("reacher") == 4
    env = DMCPixelEnv("cartpole", "balance", render_size=16)
    env.reset(seed=0)
    steps = frames = 0
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        steps += 1
        frames += info["env_frames"]
        done = terminated or truncated
    env.close()
    assert truncated and not terminated  # dm-control's time limit is a truncation
    assert frames == 1000 and steps == 1000 // 8  # 1000 control steps per episode = 125 agent steps × 8


def test_action_repeat_sums_rewards() -> None:
    one = DMCPixelEnv("cartpole", "balance", render_size=16, action_repeat=1)
    two = DMCPixelEnv("cartpole", "balance", render_size=16, action_repeat=2)
    one.reset(seed=3)
    two.reset(seed=3)
    a = np.full(1, 0.5, dtype=np.float32)
    _, r1a, *_ = one.step(a)
    obs1, r1b, *_ = one.step(a)
    obs2, r2, *_ = two.step(a)
    assert r2 == pytest.approx(r1a + r1b)
    assert np.array_equal(obs1[-3:], obs2[-3:])  # same physics state after 2 control steps
    one.close()
    two.close()


def test_gymnasium_ids_are_registered() -> None:
    assert "contrastlab/cheetah-run-v0" in gym.registry and "contrastlab/cheetah-run-v0" in envs.ENV_IDS
    env = gym.make("contrastlab/cartpole-swingup-v0", render_size=24)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (9, 24, 24)
    assert env.unwrapped.action_repeat == 8
    env.close()


def test_low_cost_render_switch() -> None:
    fast = DMCPixelEnv("cartpole", "swingup", render_size=32)
    full = DMCPixelEnv("cartpole", "swingup", render_size=32, low_cost_render=False)
    assert fast._env.physics.model.vis.quality.shadowsize == 0
    assert full._env.physics.model.vis.quality.shadowsize > 0
    a, _ = fast.reset(seed=1)
    b, _ = full.reset(seed=1)
    assert np.abs(a.astype(int) - b.astype(int)).mean() < 20  # nearly the same picture
    fast.close()
    full.close()


def test_bad_input_errors() -> None:
    with pytest.raises(ConfigError, match=r"valid: .*cheetah"):
        DMCPixelEnv("cheeta", "run")
    with pytest.raises(ConfigError, match="valid: run"):
        DMCPixelEnv("cheetah", "walk")
    with pytest.raises(ConfigError, match="action_repeat"):
        DMCPixelEnv("cheetah", "run", action_repeat=0)


@pytest.mark.parametrize(("domain", "task"), [("cartpole", "swingup"), ("reacher", "easy")])
def test_full_quality_render_is_dm_controls_default(domain: str, task: str) -> None:
    """``low_cost_render=False`` gives exactly ``physics.render`` (what CURL renders through dmc2gym)."""
    env = DMCPixelEnv(domain, task, render_size=40, low_cost_render=False, seed=0)
    obs, _ = env.reset(seed=2)
    rng = np.random.default_rng(0)
    for _ in range(3):
        reference = env._env.physics.render(40, 40, camera_id=0)  # dm-control's own renderer, default quality
        assert np.array_equal(obs[-3:], reference.transpose(2, 0, 1))
        obs, *_ = env.step(rng.uniform(-1, 1, env.action_space.shape))
    env.close()


def test_cheetah_compiles_without_the_settotalmass_notice(caplog: pytest.LogCaptureFixture) -> None:
    """dm-control's cheetah.xml made MuJoCo log `WARNING:absl:compiler attribute 'settotalmass' is deprecated ...`
    at every compile, three times per `platform train --plugin curl --set env.domain=cheetah` run."""
    with caplog.at_level("WARNING"):
        DMCPixelEnv("cheetah", "run", render_size=32).close()
    assert not [r for r in caplog.records if "settotalmass" in r.getMessage()]


def test_a_restored_random_state_outlasts_the_seed_of_the_next_reset() -> None:
    """A resumed run's environment is built and seeded as at the run's start (SB3 passes the seed to its first
    reset); the random state saved in the checkpoint takes over at that reset, so the next episode starts where the
    interrupted run's next one would have, not at the run's first start again."""
    def start(env: DMCPixelEnv, seed: int | None = None) -> np.ndarray:
        env.reset(seed=seed)
        return env._env.physics.get_state().copy()

    env = DMCPixelEnv("cartpole", "swingup", render_size=16, seed=3)
    first = start(env, seed=3)
    env.step(np.zeros(env.action_space.shape))  # a checkpoint in the middle of an episode
    saved = env.random_state()
    second = start(env)
    env.close()
    resumed = DMCPixelEnv("cartpole", "swingup", render_size=16, seed=3)
    resumed.restore_random_state(saved)
    again = start(resumed, seed=3)
    assert np.array_equal(again, second) and not np.array_equal(again, first)
    assert not np.array_equal(start(resumed), again)  # restored once, then drawn from as usual
    resumed.close()


def test_a_checkpoint_at_an_episodes_end_resumes_with_the_episode_just_begun() -> None:
    """SB3 resets the environment as an episode ends, before the callback that checkpoints (periodic checkpoints,
    every 50k frames in the paper preset, fall on the ends of 1000-frame episodes): the state saved there must be
    the one that episode's start was drawn from, or the resumed run skips it and starts the one after."""
    env = DMCPixelEnv("cartpole", "swingup", render_size=16, seed=3)
    env.reset(seed=3)
    env.step(np.zeros(env.action_space.shape))
    env.reset()  # the automatic reset at the episode's end; no step of the new episode yet
    begun = env._env.physics.get_state().copy()
    saved = env.random_state()
    env.close()
    resumed = DMCPixelEnv("cartpole", "swingup", render_size=16, seed=3)
    resumed.restore_random_state(saved)
    assert resumed.random_state() is saved  # a checkpoint before the resumed run's first reset keeps it
    resumed.reset(seed=3)
    assert np.array_equal(resumed._env.physics.get_state(), begun)
    resumed.close()


def test_close_frees_the_rendering_contexts_at_once() -> None:
    """dm-control's Environment.close() is dm_env's no-op: the GL and MuJoCo rendering contexts were freed only when
    garbage collected, in whatever thread that happened (EGL_BAD_ACCESS warnings in the suite)."""
    env = DMCPixelEnv("cartpole", "swingup", render_size=16, seed=0)
    env.reset(seed=0)
    physics = env._env.physics
    assert physics._contexts
    env.close()
    assert not physics._contexts
    env.close()  # closing twice is harmless
