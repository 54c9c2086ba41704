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


@pytest.mark.parametrize(("sets", "needle"), [
    (["env.camera_id=99"], r"env\.camera_id=99: cartpole has 2 fixed camera\(s\); valid: -1 \(the free camera\) to 1"),
    (["env.render_size=2000", "agent.crop=84"],
     r"env\.render_size=2000: cartpole renders offscreen frames of at most 640 × 480 pixels"),
])
def test_a_camera_or_frame_size_the_task_cannot_render_is_refused_before_training(sets, needle) -> None:
    """Both failed at the first frame with a dm-control traceback, after the run directory was made."""
    from contrastlab.platform.preflight import preflight

    task = CurlTask()
    config = resolve_config(task, preset="smoke", sets=sets)
    with pytest.raises(ConfigError, match=needle):
        preflight(task, config)
    preflight(task, resolve_config(task, preset="smoke", sets=["env.camera_id=-1", "env.render_size=480"]))


def test_a_replay_buffer_larger_than_memory_is_refused_before_training() -> None:
    """agent.buffer_size=10^7 at 100 px keeps 279 GiB of frames: it trained until memory ran out."""
    from contrastlab.platform.preflight import preflight

    task = CurlTask()
    config = resolve_config(task, preset="smoke", sets=["agent.buffer_size=10000000", "train.env_frames=100000000"])
    with pytest.raises(ConfigError, match=r"agent\.buffer_size=10000000 with env\.render_size=100 keeps 279\.4 GiB"):
        preflight(task, config)
    with pytest.raises(ConfigError, match=r"env\.frame_stack=100000: Input should be less than or equal to 32"):
        resolve_config(task, preset="smoke", sets=["env.frame_stack=100000"])


def test_the_replay_memory_message_says_the_share_of_memory_it_refuses(monkeypatch) -> None:
    """A buffer of 95 % of memory is refused (over 90 %): the message said its 22.4 GiB were 'more than this
    machine's 23.5 GiB of memory can hold'."""
    import os

    from contrastlab.plugins.curl.task import check_replay_memory

    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 2**20}[name])  # 4 GiB
    frames = int(0.95 * 2**32 / (3 * 100 * 100))
    long_run = [f"agent.buffer_size={frames}", "train.env_frames=2000000"]
    config = resolve_config(CurlTask(), preset="smoke", sets=long_run)
    with pytest.raises(ConfigError, match=r"keeps 3\.8 GiB of frames over train\.env_frames=2000000, more than 90 % "
                                          r"of this machine's 4\.0 GiB"):
        check_replay_memory(config)
    # the ring fills lazily: a short run with that buffer writes a few hundred frames, and was refused
    check_replay_memory(resolve_config(CurlTask(), preset="smoke", sets=[f"agent.buffer_size={frames}"]))


BOUNDS = [  # (key, the values at the documented bounds, accepted; the values just past them, refused)
    ("env.render_size", ["1"], ["0"]),
    ("env.frame_stack", ["1", "32"], ["0", "33"]),
    ("env.camera_id", ["-1"], ["-2"]),
    ("agent.crop", ["1"], ["0"]),
    ("agent.batch_size", ["2"], ["1"]),  # a contrastive batch needs a negative
    ("agent.buffer_size", ["1"], ["0"]),
    ("agent.init_steps", ["1"], ["0"]),
    ("agent.hidden_dim", ["1", "65536"], ["0", "65537"]),
    ("agent.lr", ["1e-6"], ["0"]),
    ("agent.alpha_lr", ["1e-6"], ["0"]),
    ("agent.alpha_beta", ["0", "0.9"], ["-0.1", "1"]),  # Adam's β₁ ∈ [0, 1)
    ("agent.init_temperature", ["1e-3"], ["0"]),
    ("agent.gamma", ["1e-3", "1"], ["0", "1.5"]),  # a discount in (0, 1]
    ("agent.critic_tau", ["1e-3", "1"], ["0", "1.5"]),  # EMA rates in (0, 1]
    ("agent.encoder_tau", ["1e-3", "1"], ["0", "1.5"]),
    ("agent.actor_update_freq", ["1"], ["0"]),
    ("agent.target_update_freq", ["1"], ["0"]),
    ("agent.num_positives", ["1"], ["0"]),
    ("agent.contrastive_encoder_steps", ["1"], ["0"]),
    ("train.env_frames", ["1"], ["0"]),
    ("train.eval_every_frames", ["1"], ["0"]),
    ("train.log_every_frames", ["1"], ["0"]),
    ("train.eval_episodes", ["1"], ["0"]),
    ("checkpoint_every", ["1"], ["0"]),
]


@pytest.mark.parametrize(("key", "accepted", "refused"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_every_bound_accepts_its_edge_and_refuses_past_it(key: str, accepted: list[str], refused: list[str]) -> None:
    for value in accepted:
        resolved = resolve_config(CurlTask(), preset="smoke", sets=[f"{key}={value}"])
        section, _, name = key.rpartition(".")
        assert float(getattr(getattr(resolved, section) if section else resolved, name)) == float(value)
    for value in refused:
        with pytest.raises(ConfigError, match=rf"{key}={value}: Input should be"):
            resolve_config(CurlTask(), preset="smoke", sets=[f"{key}={value}"])


def test_the_learning_rate_is_curls_per_domain_value_unless_set() -> None:
    agent = resolve_config(CurlTask(), preset="paper").agent
    assert (agent.learning_rate("cheetah"), agent.learning_rate("cartpole")) == (2e-4, 1e-3)
    agent = resolve_config(CurlTask(), preset="paper", sets=["agent.lr=3e-3"]).agent
    assert (agent.learning_rate("cheetah"), agent.learning_rate("cartpole")) == (3e-3, 3e-3)
