"""A replay buffer that stores every rendered frame once and rebuilds frame stacks when sampling.

SB3's ``ReplayBuffer`` (and CURL's) keep the full ``obs`` and ``next_obs`` stacks of every transition: 2·k frames
per transition where one new frame would do (≈18 GB for CURL's 100k × 9×100×100 buffer). This buffer keeps a ring
of single frames ``[3, H, W]`` and, per transition, the position of its newest frame and of its episode's first
frame. A stack of ``k`` frames ending at frame ``p`` is ``frames[p-k+1 .. p]`` with positions before the episode
start clamped to it, which reproduces the "repeat the first frame" stacking of the environment at reset.

It implements SB3's replay-buffer interface (``add``, ``sample``, ``size``, ``reset``) so it plugs into any
off-policy algorithm through ``replay_buffer_class``. One environment (``n_envs=1``) is supported.

On a CUDA device the frame ring is mirrored in GPU memory as uint8 (≈3 GiB for 100k transitions at 100 px) when it
fits (``frames_on_device``): each new frame is copied once, and ``sample`` gathers the stacks on the GPU, so no
frame stack crosses the PCIe bus and the host does no per-sample copying. ``obs`` and ``next_obs`` share ``k − 1``
frames, so the ``k + 1`` frames of a transition are gathered once and both stacks are slices of them. The
samples are identical to the host path (same indices, same frames).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from numpy.lib.stride_tricks import sliding_window_view
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize


class FrameStackReplayBuffer(BaseBuffer):
    """Replay buffer over ``[C·k, H, W]`` uint8 frame stacks that stores each frame once (``C`` = 3 for RGB).

    ``sample`` returns uint8 observation tensors on ``device`` (augment, then convert to float there).
    Timeouts (``info["TimeLimit.truncated"]``) are not terminal, as in SB3's ``handle_timeout_termination``.
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Box,
        action_space: spaces.Space,
        device: torch.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        frame_channels: int = 3,
        handle_timeout_termination: bool = True,
        frames_on_device: bool | None = None,
    ) -> None:
        """Allocate ``buffer_size`` transitions and ``buffer_size + k`` frames (``k`` = stack depth).

        ``frames_on_device``: mirror the frames in the memory of ``device`` and gather stacks there; ``None``
        (default) = on a CUDA device when the mirror takes at most half of the free GPU memory.
        """
        super().__init__(buffer_size, observation_space, action_space, device, n_envs=n_envs)
        if n_envs != 1:
            raise ValueError("FrameStackReplayBuffer supports n_envs=1 only")
        shape = observation_space.shape
        if len(shape) != 3 or shape[0] % frame_channels != 0:
            raise ValueError(f"observation shape {shape} is not a [{frame_channels}·k, H, W] frame stack")
        self.frame_channels = frame_channels
        self.stack = shape[0] // frame_channels
        self.frame_capacity = buffer_size + self.stack
        self.handle_timeout_termination = handle_timeout_termination
        self.frames = np.zeros((self.frame_capacity, frame_channels, *shape[1:]), dtype=observation_space.dtype)
        self.next_frame = np.zeros(buffer_size, dtype=np.int64)  # absolute position of next_obs' newest frame
        self.episode_start = np.zeros(buffer_size, dtype=np.int64)  # absolute position of the episode's 1st frame
        self.actions = np.zeros((buffer_size, self.action_dim), dtype=np.float32)
        self.rewards = np.zeros(buffer_size, dtype=np.float32)
        self.dones = np.zeros(buffer_size, dtype=np.float32)
        self.timeouts = np.zeros(buffer_size, dtype=np.float32)
        if frames_on_device is None:
            frames_on_device = self.device.type == "cuda" and self.frames.nbytes <= _free_device_bytes(self.device) / 2
        self.device_frames: torch.Tensor | None = (
            torch.zeros(self.frames.shape, dtype=torch.uint8, device=self.device) if frames_on_device else None
        )
        """uint8 mirror of :attr:`frames` on ``device`` (or ``None``: stacks are gathered on the host)."""
        self.reset()

    # ------------------------------------------------------------------ bookkeeping
    def reset(self) -> None:
        """Forget every transition."""
        super().reset()
        self.frames_written = 0  # absolute count of frames ever written
        self.transitions = 0  # absolute count of transitions ever added
        self.oldest = 0  # absolute index of the oldest transition whose frames are all still stored
        self._episode_open = False
        self._current_start = 0

    def size(self) -> int:
        """Number of transitions that can be sampled."""
        return self.transitions - self.oldest

    def nbytes(self) -> int:
        """Bytes held by the arrays of this buffer."""
        arrays = (self.frames, self.next_frame, self.episode_start, self.actions, self.rewards, self.dones,
                  self.timeouts)
        return int(sum(a.nbytes for a in arrays))

    def _write_frame(self, frame: np.ndarray) -> int:
        position = self.frames_written
        self.frames[position % self.frame_capacity] = frame
        if self.device_frames is not None:
            self.device_frames[position % self.frame_capacity].copy_(torch.from_numpy(np.ascontiguousarray(frame)))
        self.frames_written += 1
        return position

    def _stack_positions(self, newest: np.ndarray, start: np.ndarray) -> np.ndarray:
        """``[n, k]`` absolute frame positions of the stacks ending at ``newest``, clamped to ``start``."""
        offsets = np.arange(-self.stack + 1, 1)  # [k]
        return np.maximum(newest[:, None] + offsets[None, :], start[:, None])

    def _gather(self, positions: np.ndarray) -> np.ndarray:
        """``[n, k]`` positions → ``[n, C·k, H, W]`` stacks."""
        frames = self.frames[positions % self.frame_capacity]  # [n, k, C, H, W]
        return frames.reshape(positions.shape[0], -1, *frames.shape[3:])

    def _last_stack(self) -> np.ndarray:
        newest = np.array([self.frames_written - 1])
        return self._gather(self._stack_positions(newest, np.array([self._current_start])))[0]

    # ------------------------------------------------------------------ SB3 interface
    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one transition (arrays with a leading ``n_envs = 1`` axis, as SB3 passes them)."""
        obs = np.asarray(obs).reshape(self.obs_shape)
        next_obs = np.asarray(next_obs).reshape(self.obs_shape)
        C = self.frame_channels
        # A transition continues the open episode only if obs is exactly the last stored next_obs stack.
        if not (self._episode_open and np.array_equal(obs, self._last_stack())):
            frames = obs.reshape(self.stack, C, *obs.shape[1:])
            repeated = all(np.array_equal(frames[0], f) for f in frames[1:])
            self._current_start = self._write_frame(frames[0])
            if not repeated:  # a stack that is not a reset stack: keep all its frames
                for f in frames[1:]:
                    self._write_frame(f)
        newest = self._write_frame(next_obs[-C:])
        i = self.transitions % self.buffer_size
        self.next_frame[i] = newest
        self.episode_start[i] = self._current_start
        self.actions[i] = np.asarray(action).reshape(self.action_dim)
        self.rewards[i] = float(np.asarray(reward).reshape(-1)[0])
        self.dones[i] = float(np.asarray(done).reshape(-1)[0])
        if self.handle_timeout_termination:
            self.timeouts[i] = float(infos[0].get("TimeLimit.truncated", False)) if infos else 0.0
        self.transitions += 1
        self.pos = self.transitions % self.buffer_size
        self.full = self.transitions >= self.buffer_size
        self._episode_open = not bool(self.dones[i])
        self._evict()

    def _evict(self) -> None:
        """Advance ``oldest`` past transitions that were overwritten or whose first frame was overwritten."""
        self.oldest = max(self.oldest, self.transitions - self.buffer_size)
        first_kept = self.frames_written - self.frame_capacity
        while self.oldest < self.transitions:
            i = self.oldest % self.buffer_size
            needed = max(self.next_frame[i] - self.stack, self.episode_start[i])  # oldest frame of obs
            if needed >= first_kept:
                break
            self.oldest += 1

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> ReplayBufferSamples:
        """``batch_size`` transitions drawn uniformly (with replacement) from the stored ones."""
        if self.size() == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        absolute = np.random.randint(self.oldest, self.transitions, size=batch_size)
        return self._get_samples(absolute % self.buffer_size, env)

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> ReplayBufferSamples:
        """Rebuild the obs/next_obs stacks of the transitions at ring indices ``batch_inds``."""
        newest, start = self.next_frame[batch_inds], self.episode_start[batch_inds]
        if self.device_frames is not None:
            obs_t, next_t = self._gather_on_device(newest, start)
        else:  # k + 1 frames gathered once; obs and next_obs are views of them
            window = self._gather(self._window_positions(newest, start))  # [n, C·(k+1), H, W]
            C = self.frame_channels
            obs_t = self._to_device(torch.from_numpy(window[:, :-C]))
            next_t = self._to_device(torch.from_numpy(window[:, C:]))
        actions, dones, rewards = self._scalars(batch_inds)
        return ReplayBufferSamples(obs_t, actions, next_t, dones, rewards)

    def _window_positions(self, newest: np.ndarray, start: np.ndarray) -> np.ndarray:
        """``[n, k+1]`` absolute positions of the frames of obs (``[:, :-1]``) and next_obs (``[:, 1:]``)."""
        return np.maximum(newest[:, None] + np.arange(-self.stack, 1)[None, :], start[:, None])

    def _to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """Copy a host tensor to ``device``; through pinned memory without blocking on CUDA (every upload of a
        sample goes through here)."""
        if self.device.type == "cuda":
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor.to(self.device)

    def _scalars(self, batch_inds: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(actions [n, A], dones [n, 1], rewards [n, 1])`` on ``device``; timeouts are not terminal."""
        not_timeout = 1.0 - self.timeouts[batch_inds]
        return (self._to_device(torch.from_numpy(self.actions[batch_inds])),
                self._to_device(torch.from_numpy((self.dones[batch_inds] * not_timeout)[:, None])),
                self._to_device(torch.from_numpy(self.rewards[batch_inds][:, None])))

    def sample_crops(self, batch_size: int, crop: int, views: int,
                     generator: torch.Generator | None = None) -> tuple[list[torch.Tensor], ReplayBufferSamples]:
        """``views`` random crops of each sampled ``obs`` and one of its ``next_obs``, copied from the frame ring.

        Returns ``([obs crop 1, …, obs crop views], samples)`` with ``samples.next_observations`` the cropped
        ``next_obs`` (uint8 ``[n, C·k, crop, crop]`` each). It draws the same random numbers in the same order as
        ``sample`` followed by ``random_crops(obs, crop, views)`` and ``random_crop(next_obs, crop)`` on the CPU,
        and returns the same tensors; only the ``crop``² pixels of each view are copied (one fancy index of a
        strided window view, as CURL's numpy crop does, but straight from the frame ring).
        """
        from contrastlab.plugins.curl.augment import check_crop, crop_offsets

        if self.size() == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        inds = np.random.randint(self.oldest, self.transitions, size=batch_size) % self.buffer_size
        window = self._window_positions(self.next_frame[inds], self.episode_start[inds]) % self.frame_capacity
        check_crop(self.frames, crop)
        height, size = self.frames.shape[-2:]
        top, left = (t.numpy() for t in crop_offsets(batch_size * views, size, crop, "cpu", generator, height))
        next_top, next_left = (t.numpy() for t in crop_offsets(batch_size, size, crop, "cpu", generator, height))
        top = np.concatenate([top, next_top]).reshape(views + 1, batch_size, 1)
        left = np.concatenate([left, next_left]).reshape(views + 1, batch_size, 1)
        patches = sliding_window_view(self.frames, (crop, crop), axis=(2, 3))  # [N, C, H-c+1, W-c+1, c, c] view
        out = np.empty((views + 1, batch_size, self.stack, self.frame_channels, crop, crop), dtype=self.frames.dtype)

        def copy_rows(rows: slice) -> None:  # numpy releases the GIL while it copies: threads share the work
            for v in range(views + 1):
                positions = window[rows, 1:] if v == views else window[rows, :-1]  # [r, k]
                out[v, rows] = patches[positions, :, top[v, rows], left[v, rows]]  # [r, k, C, c, c]

        parallel_rows(copy_rows, batch_size)
        crops = self._to_device(torch.from_numpy(out.reshape(views + 1, batch_size, -1, crop, crop))).unbind(0)
        actions, dones, rewards = self._scalars(inds)
        return list(crops[:views]), ReplayBufferSamples(crops[0], actions, crops[views], dones, rewards)

    def _gather_on_device(self, newest: np.ndarray, start: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs`` and ``next_obs`` stacks ``[n, C·k, H, W]`` from the device mirror, ``k + 1`` frames each."""
        assert self.device_frames is not None
        positions = np.maximum(newest[:, None] + np.arange(-self.stack, 1)[None, :], start[:, None])  # [n, k+1]
        # through pinned memory: a non-blocking copy from pageable memory makes the CUDA driver wait for the stream
        # first, a host synchronisation per update that torch.cuda.set_sync_debug_mode does not report
        index = self._to_device(torch.from_numpy(positions % self.frame_capacity))
        frames = self.device_frames[index]  # [n, k+1, C, H, W]
        n = frames.shape[0]
        return frames[:, :-1].reshape(n, -1, *frames.shape[3:]), frames[:, 1:].reshape(n, -1, *frames.shape[3:])

    # ------------------------------------------------------------------ checkpoints
    _ARRAYS = ("next_frame", "episode_start", "actions", "rewards", "dones", "timeouts")
    _COUNTERS = ("frames_written", "transitions", "oldest", "_episode_open", "_current_start")

    def state_dict(self) -> dict[str, Any]:
        """A compact copy of the contents (only the frames written so far) for checkpoints."""
        state: dict[str, Any] = {name: getattr(self, name) for name in self._COUNTERS}
        n = min(self.transitions, self.buffer_size)
        state.update({name: getattr(self, name)[:n].copy() for name in self._ARRAYS})
        state["frames"] = self.frames[: min(self.frames_written, self.frame_capacity)].copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into a buffer of the same capacity and shapes."""
        frames = state["frames"]
        if frames.shape[1:] != self.frames.shape[1:] or len(frames) > self.frame_capacity:
            raise ValueError("replay buffer state does not match this buffer's shapes/capacity")
        self.frames[: len(frames)] = frames
        if self.device_frames is not None:
            self.device_frames[: len(frames)].copy_(torch.from_numpy(frames))
        for name in self._ARRAYS:
            values = state[name]
            getattr(self, name)[: len(values)] = values
        for name in self._COUNTERS:
            setattr(self, name, state[name])
        self.pos = self.transitions % self.buffer_size
        self.full = self.transitions >= self.buffer_size


_POOL: tuple[ThreadPoolExecutor, int] | None = None
"""The crop threads and their count (created on first use, grown when torch's thread count grows)."""


def parallel_rows(work: Callable[[slice], None], rows: int, min_rows: int = 16) -> None:
    """Run ``work(slice)`` over ``rows`` split into one contiguous block per torch intra-op thread.

    For copies in numpy (which releases the GIL): the replay crops of a batch are written by as many threads as
    the update's convolutions use, which sit idle while the batch is gathered. Runs inline with one thread or
    fewer than ``2 * min_rows`` rows. The blocks write disjoint rows, so the result does not depend on the split.
    """
    global _POOL
    workers = min(torch.get_num_threads(), rows // min_rows)
    if workers < 2:
        work(slice(0, rows))
        return
    if _POOL is None or _POOL[1] < workers:
        _POOL = (ThreadPoolExecutor(max_workers=workers, thread_name_prefix="replay-crop"), workers)
    bounds = np.linspace(0, rows, workers + 1).astype(int)
    futures = [_POOL[0].submit(work, slice(a, b)) for a, b in itertools.pairwise(bounds)]
    for future in futures:
        future.result()


def _free_device_bytes(device: torch.device) -> int:
    """Free memory of a CUDA ``device`` in bytes (0 when it cannot be queried)."""
    try:
        return int(torch.cuda.mem_get_info(device)[0])
    except (RuntimeError, AssertionError, ValueError):
        return 0
