"""The frame-deduplicating replay buffer equals a naive obs/next_obs buffer, at a fraction of the bytes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from contrastlab.plugins.curl.buffer import FrameStackReplayBuffer

K, C, H = 3, 3, 6


def episode_stream(rng: np.random.Generator, lengths: list[int]):
    """(obs, next_obs, action, reward, done, infos) tuples of frame-stacked episodes, as SB3 passes them."""
    for length in lengths:
        frames = [rng.integers(0, 256, (C, H, H), dtype=np.uint8) for _ in range(length + 1)]
        stack = [frames[0]] * K
        for t in range(length):
            obs = np.concatenate(stack)
            stack = [*stack[1:], frames[t + 1]]
            nxt = np.concatenate(stack)
            done = t == length - 1
            truncated = done and length % 2 == 0  # even-length episodes end by time limit
            yield obs[None], nxt[None], rng.uniform(-1, 1, (1, 2)), np.array([rng.normal()]), \
                np.array([done]), [{"TimeLimit.truncated": truncated}]


def make(capacity: int, device: str = "cpu", frames_on_device: bool | None = None) -> FrameStackReplayBuffer:
    obs_space = spaces.Box(0, 255, (C * K, H, H), np.uint8)
    return FrameStackReplayBuffer(capacity, obs_space, spaces.Box(-1, 1, (2,), np.float32), device=device,
                                  frames_on_device=frames_on_device)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("capacity", [1000, 23])
def test_device_mirror_samples_equal_host_gather(capacity: int, device: str) -> None:
    host, mirrored = make(capacity, device, frames_on_device=False), make(capacity, device, frames_on_device=True)
    assert host.device_frames is None and mirrored.device_frames is not None
    for item in episode_stream(np.random.default_rng(1), [5, 1, 8, 3, 12, 2, 7, 30]):
        host.add(*item)
        mirrored.add(*item)
    idx = np.random.default_rng(2).integers(mirrored.oldest, mirrored.transitions, 64) % capacity
    a, b = host._get_samples(idx), mirrored._get_samples(idx)
    for field in ("observations", "next_observations", "actions", "rewards", "dones"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.device == y.device and torch.equal(x, y), field
    restored = make(capacity, device, frames_on_device=True)
    restored.load_state_dict(mirrored.state_dict())
    assert torch.equal(restored._get_samples(idx).observations, b.observations)


def test_the_device_gather_uploads_its_index_through_the_pinned_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mirror's gather index went up with ``.to(device, non_blocking=True)`` from pageable memory: on CUDA the
    driver then waits for the stream before copying, a host synchronisation in every update that
    ``torch.cuda.set_sync_debug_mode`` (the GPU suite's no-host-sync test) does not report. Every tensor a sample
    sends to the device must go through ``_to_device`` (pinned memory, non-blocking, on CUDA)."""
    buf = make(100, frames_on_device=True)
    for item in episode_stream(np.random.default_rng(3), [6, 9]):
        buf.add(*item)
    uploads: list[torch.Tensor] = []
    to_device = buf._to_device
    monkeypatch.setattr(buf, "_to_device", lambda t: uploads.append(t) or to_device(t))
    idx = np.arange(buf.oldest, buf.transitions) % 100
    got = buf._get_samples(idx)
    index = [t for t in uploads if t.dtype == torch.int64]
    assert len(index) == 1 and tuple(index[0].shape) == (len(idx), K + 1)
    assert len(uploads) == 4  # the gather index, actions, dones, rewards; the frames are already on the device
    assert got.observations.shape == (len(idx), C * K, H, H)


def test_device_mirror_is_off_by_default_on_cpu() -> None:
    assert make(50).device_frames is None


@pytest.mark.parametrize("capacity", [1000, 23])
def test_sampled_stacks_equal_naive_buffer(capacity: int) -> None:
    rng = np.random.default_rng(0)
    buf = make(capacity)
    naive = []
    for item in episode_stream(rng, [5, 1, 8, 3, 12, 2, 7]):
        buf.add(*item)
        naive.append(item)
    naive = naive[-capacity:]
    assert buf.size() <= len(naive)
    assert buf.size() >= min(len(naive), capacity) - K - 1  # at most a few of the oldest evicted
    kept = naive[len(naive) - buf.size():]
    start = buf.transitions - buf.size()
    idx = np.arange(start, buf.transitions) % capacity
    got = buf._get_samples(idx)
    for j, (obs, nxt, act, rew, done, infos) in enumerate(kept):
        assert np.array_equal(got.observations[j].numpy(), obs[0])
        assert np.array_equal(got.next_observations[j].numpy(), nxt[0])
        assert np.allclose(got.actions[j].numpy(), act[0])
        assert got.rewards[j, 0].item() == pytest.approx(float(rew[0]))
        expected_done = float(done[0] and not infos[0]["TimeLimit.truncated"])
        assert got.dones[j, 0].item() == expected_done


def test_sample_shapes_and_memory_ratio() -> None:
    rng = np.random.default_rng(1)
    buf = make(500)
    for item in episode_stream(rng, [125, 125, 125, 125]):
        buf.add(*item)
    batch = buf.sample(16)
    assert batch.observations.shape == (16, 9, H, H) and batch.observations.dtype.is_floating_point is False
    assert batch.rewards.shape == (16, 1) and batch.dones.shape == (16, 1)
    naive_bytes = 2 * 9 * H * H * 500
    assert buf.frames.nbytes / naive_bytes <= 0.2


def test_non_reset_stack_starts_a_new_episode() -> None:
    buf = make(10)
    rng = np.random.default_rng(2)
    frames = [rng.integers(0, 256, (C, H, H), dtype=np.uint8) for _ in range(4)]
    obs = np.concatenate(frames[:3])[None]  # three different frames (not a reset stack)
    nxt = np.concatenate(frames[1:])[None]
    buf.add(obs, nxt, np.zeros((1, 2)), np.zeros(1), np.array([False]), [{}])
    got = buf._get_samples(np.array([0]))
    assert np.array_equal(got.observations[0].numpy(), obs[0])
    assert np.array_equal(got.next_observations[0].numpy(), nxt[0])


def test_state_dict_round_trip() -> None:
    rng = np.random.default_rng(3)
    a, b = make(50), make(50)
    for item in episode_stream(rng, [9, 4, 30]):
        a.add(*item)
    b.load_state_dict(a.state_dict())
    idx = np.arange(a.oldest, a.transitions) % 50
    x, y = a._get_samples(idx), b._get_samples(idx)
    assert b.size() == a.size()
    assert np.array_equal(x.observations.numpy(), y.observations.numpy())
    assert np.array_equal(x.next_observations.numpy(), y.next_observations.numpy())


@pytest.mark.parametrize("shape", [(C * K, H), (8, H, H)])
def test_observation_space_that_is_not_a_frame_stack_is_refused(shape: tuple[int, ...]) -> None:
    """A 2-D space, or a channel count that is not a multiple of the frame's 3 channels, is no RGB frame stack."""
    with pytest.raises(ValueError, match="frame stack"):
        FrameStackReplayBuffer(10, spaces.Box(0, 255, shape, np.uint8), spaces.Box(-1, 1, (2,), np.float32),
                               device="cpu")


def test_black_first_frames_start_an_episode() -> None:
    """A first observation of black frames (an all-zero render) is a reset stack, not a continuation of the
    zero-filled ring: its sample is that black stack, and the buffer holds exactly that one transition."""
    buf = make(10)
    frame = np.full((C, H, H), 7, dtype=np.uint8)
    obs = np.zeros((1, C * K, H, H), dtype=np.uint8)
    nxt = np.concatenate([obs[0, C:], frame])[None]
    buf.add(obs, nxt, np.zeros((1, 2)), np.zeros(1), np.array([False]), [{}])
    assert buf.size() == 1
    got = buf._get_samples(np.array([0]))
    assert np.array_equal(got.observations[0].numpy(), obs[0])
    assert np.array_equal(got.next_observations[0].numpy(), nxt[0])


def test_reset_forgets_everything_and_refills_like_a_new_buffer() -> None:
    items = list(episode_stream(np.random.default_rng(4), [6, 9]))
    buf = make(8)
    for item in items:
        buf.add(*item)
    buf.reset()
    assert buf.size() == 0 and buf.pos == 0 and not buf.full
    with pytest.raises(ValueError, match="empty"):
        buf.sample(1)
    fresh = make(8)
    for item in items[:5]:
        buf.add(*item)
        fresh.add(*item)
    idx = np.arange(5)
    a, b = buf._get_samples(idx), fresh._get_samples(idx)
    assert torch.equal(a.observations, b.observations) and torch.equal(a.next_observations, b.next_observations)
    assert np.array_equal(a.observations[0].numpy(), items[0][0][0])


def test_sb3_position_and_full_flag_follow_the_ring() -> None:
    """SB3's ``pos`` is the ring slot of the next transition and ``full`` turns true once ``buffer_size``
    transitions were added (not one later)."""
    buf = make(5)
    for n, item in enumerate(episode_stream(np.random.default_rng(5), [12]), start=1):
        buf.add(*item)
        assert buf.pos == n % 5 and buf.full == (n >= 5), n


@pytest.mark.parametrize("capacity", [23, 40])
def test_eviction_keeps_every_transition_whose_frames_survive(capacity: int) -> None:
    """``oldest`` is tight: the transition just before it has lost a frame of its obs stack (or was overwritten),
    and every kept one rebuilds exactly. Checked after every add, so the ring wraps at every phase."""
    items = list(episode_stream(np.random.default_rng(6), [5, 1, 8, 3, 12, 2, 7, 30, 4]))
    buf = make(capacity)
    for n, item in enumerate(items, start=1):
        buf.add(*item)
        assert 0 <= buf.oldest < buf.transitions == n
        kept = np.arange(buf.oldest, n)
        got = buf._get_samples(kept % capacity)
        for j, a in enumerate(kept):
            assert np.array_equal(got.observations[j].numpy(), items[a][0][0])
            assert np.array_equal(got.next_observations[j].numpy(), items[a][1][0])
        before = buf.oldest - 1
        if before >= max(0, n - capacity):  # still in the transition ring: must have lost a frame
            stale = buf._get_samples(np.array([before % capacity]))
            assert not np.array_equal(stale.observations[0].numpy(), items[before][0][0])


def test_sample_draws_only_and_all_stored_transitions() -> None:
    """``sample`` draws uniformly from ``[oldest, transitions)``: every draw is a kept transition (never an
    evicted or overwritten one) and, over many draws, each kept one appears."""
    items = list(episode_stream(np.random.default_rng(7), [5, 1, 8, 3, 12, 2, 7]))
    buf = make(23)
    for item in items:
        buf.add(*item)
    kept = {items[a][1][0].tobytes(): items[a][0][0] for a in range(buf.oldest, buf.transitions)}
    np.random.seed(0)
    batch = buf.sample(400)
    seen = set()
    for obs, nxt in zip(batch.observations.numpy(), batch.next_observations.numpy(), strict=True):
        assert nxt.tobytes() in kept and np.array_equal(kept[nxt.tobytes()], obs)
        seen.add(nxt.tobytes())
    assert seen == set(kept)


def test_state_dict_restores_sb3_position_and_refuses_a_mismatched_buffer() -> None:
    src = make(20)
    for item in episode_stream(np.random.default_rng(8), [9, 4, 30]):
        src.add(*item)
    dst = make(20)
    dst.load_state_dict(src.state_dict())
    assert (dst.pos, dst.full, dst.size()) == (src.pos, src.full, src.size()) and dst.full
    exact = make(10)
    for item in list(episode_stream(np.random.default_rng(8), [10]))[:10]:
        exact.add(*item)
    again = make(10)
    again.load_state_dict(exact.state_dict())
    assert again.full and again.pos == 0  # exactly buffer_size transitions fill it
    with pytest.raises(ValueError, match="does not match"):
        make(10).load_state_dict(src.state_dict())  # more frames than the ring holds
    other = FrameStackReplayBuffer(20, spaces.Box(0, 255, (C * K, H + 1, H + 1), np.uint8),
                                   spaces.Box(-1, 1, (2,), np.float32), device="cpu")
    with pytest.raises(ValueError, match="does not match"):
        other.load_state_dict(src.state_dict())  # other frame size, same count


def test_sample_crops_refuses_an_empty_buffer_and_a_crop_taller_than_the_frames() -> None:
    with pytest.raises(ValueError, match="empty"):
        make(10).sample_crops(4, 4, 1)
    wide = FrameStackReplayBuffer(30, spaces.Box(0, 255, (C * K, H, H + 4), np.uint8),
                                  spaces.Box(-1, 1, (2,), np.float32), device="cpu")
    frames = np.zeros((C * K, H, H + 4), dtype=np.uint8)
    wide.add(frames[None], frames[None], np.zeros((1, 2)), np.zeros(1), np.array([False]), [{}])
    with pytest.raises(ValueError, match=rf"crop {H + 1} is larger"):
        wide.sample_crops(4, H + 1, 1)  # fits the width, not the height


def test_sample_crops_of_the_full_frame_size_are_the_stacks() -> None:
    """``crop`` equal to the frame size is allowed and leaves nothing to choose: the crops are the stacks."""
    buf = make(30)
    for item in episode_stream(np.random.default_rng(11), [6, 5]):
        buf.add(*item)
    np.random.seed(4)
    views, got = buf.sample_crops(8, H, 2)
    np.random.seed(4)
    full = buf.sample(8)
    assert all(torch.equal(v, full.observations) for v in views)
    assert torch.equal(got.next_observations, full.next_observations)


@pytest.mark.parametrize("pattern", [(0, 0, 1), (0, 1, 1), (0, 1, 0)])
def test_a_first_stack_with_some_repeated_frames_is_kept_whole(pattern: tuple[int, int, int]) -> None:
    """Only a stack whose frames are ALL equal is a reset stack; one such as ``[f0, f0, f1]`` (the second step
    of an episode, e.g. the first transition stored after a resume) keeps each of its frames."""
    rng = np.random.default_rng(9)
    frames = [rng.integers(0, 256, (C, H, H), dtype=np.uint8) for _ in range(3)]
    obs = np.concatenate([frames[p] for p in pattern])[None]
    nxt = np.concatenate([obs[0, C:], frames[2]])[None]
    buf = make(10)
    buf.add(obs, nxt, np.zeros((1, 2)), np.zeros(1), np.array([False]), [{}])
    got = buf._get_samples(np.array([0]))
    assert np.array_equal(got.observations[0].numpy(), obs[0])
    assert np.array_equal(got.next_observations[0].numpy(), nxt[0])


@pytest.mark.parametrize("infos", [[{}], [], [{"TimeLimit.truncated": False}]])
def test_a_done_without_a_truncation_flag_is_terminal(infos: list[dict]) -> None:
    frame = np.ones((1, C * K, H, H), dtype=np.uint8)
    buf = make(10)
    buf.add(frame, frame, np.zeros((1, 2)), np.ones(1), np.array([True]), infos)
    assert buf._get_samples(np.array([0])).dones[0, 0].item() == 1.0


def test_no_device_mirror_on_cpu_even_with_memory_to_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    import contrastlab.plugins.curl.buffer as module

    monkeypatch.setattr(module, "_free_device_bytes", lambda device: 1 << 40)
    assert make(50).device_frames is None


def test_state_dict_holds_only_what_was_written() -> None:
    """Checkpoints stay small: only the transitions added and frames written so far, not the empty ring."""
    buf = make(100)
    for item in episode_stream(np.random.default_rng(10), [4, 3]):
        buf.add(*item)
    state = buf.state_dict()
    assert len(state["frames"]) == buf.frames_written == 5 + 4
    assert all(len(state[name]) == 7 for name in FrameStackReplayBuffer._ARRAYS)


@pytest.mark.parametrize("views", [1, 2])
def test_sample_crops_observations_are_the_first_view(views: int) -> None:
    """``samples.observations`` (the critic's anchor) is obs crop 1, never the next_obs crop or another view."""
    buf = make(30)
    for item in episode_stream(np.random.default_rng(12), [6, 5]):
        buf.add(*item)
    np.random.seed(5)
    crops, got = buf.sample_crops(8, 3, views, generator=torch.Generator().manual_seed(6))
    assert got.observations is crops[0] or torch.equal(got.observations, crops[0])
    assert not torch.equal(got.observations, got.next_observations)
    if views > 1:
        assert not torch.equal(crops[0], crops[1])


def test_sample_crops_of_non_square_frames_draw_the_top_from_the_height() -> None:
    """Frames H high and H + 4 wide, crop H − 2: the top lies in 0..2 and the left in 0..6. Both were drawn from
    the width, so about half the samples failed (a top past the height); the crop is its window of the stack."""
    wide = FrameStackReplayBuffer(30, spaces.Box(0, 255, (C * K, H, H + 4), np.uint8),
                                  spaces.Box(-1, 1, (2,), np.float32), device="cpu")
    frames = np.arange(C * K * H * (H + 4)).reshape(C * K, H, H + 4).astype(np.uint8)
    wide.add(frames[None], frames[None], np.zeros((1, 2)), np.zeros(1), np.array([False]), [{}])
    stack = torch.from_numpy(frames)
    next_stack = torch.cat([stack[C:], stack[-C:]])  # obs shifted by one frame; the new frame is next_obs's last
    corners = set()
    for seed in range(40):
        views, got = wide.sample_crops(4, H - 2, 1, generator=torch.Generator().manual_seed(seed))
        for crops, whole in ((views[0], stack), (got.next_observations, next_stack)):
            for row in crops:
                where = [(t, lf) for t in range(3) for lf in range(7)
                         if torch.equal(row, whole[:, t:t + H - 2, lf:lf + H - 2])]
                assert len(where) == 1
                corners.add(where[0])
    assert {t for t, _ in corners} == {0, 1, 2} and {lf for _, lf in corners} == set(range(7))
