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
