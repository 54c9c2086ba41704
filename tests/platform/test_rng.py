"""Generator states in checkpoints: restored whatever device the checkpoint was loaded to."""

from __future__ import annotations

import io
import random

import numpy as np
import torch

from contrastlab.platform.rng import rng_state, seed_everything, set_rng_state


def draws() -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_a_state_loaded_onto_another_device_restores_the_same_draws() -> None:
    """A GPU run's checkpoint is loaded with map_location=<its device>; torch.set_rng_state takes CPU bytes only.
    ("meta" stands in for a GPU here: it moves every tensor off the CPU, as map_location="cuda" would.)"""
    seed_everything(5)
    buffer = io.BytesIO()
    torch.save({"_rng": rng_state(), "weights": torch.ones(2)}, buffer)
    expected = draws()
    buffer.seek(0)
    loaded = torch.load(buffer, map_location="meta", weights_only=False)
    assert loaded["weights"].device.type == "meta"
    set_rng_state(loaded["_rng"])
    assert draws() == expected


def test_an_older_checkpoints_tensor_states_still_restore() -> None:
    seed_everything(6)
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    expected = draws()
    set_rng_state(state)
    assert draws() == expected


def test_a_checkpoint_from_more_gpus_restores_the_devices_this_process_sees(monkeypatch) -> None:
    """Saved where two GPUs were visible, resumed where one is (a scheduler showing each run one GPU): the state of
    the visible device is restored and the extra one is skipped (``set_rng_state_all`` raised ``IndexError``)."""
    restored: dict[int, bytes] = {}

    def set_state(new_state: torch.Tensor, device: int = 0) -> None:
        if device >= 1:
            raise IndexError("list index out of range")  # what torch.cuda.default_generators[1] does
        restored[device] = bytes(new_state.numpy())

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", set_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: [set_state(s, i) for i, s in enumerate(states)])
    seed_everything(7)
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state().numpy(),
             "cuda": [np.full(16, 3, dtype=np.uint8), np.full(16, 4, dtype=np.uint8)]}
    set_rng_state(state)
    assert restored == {0: bytes([3] * 16)}


def test_the_run_devices_state_follows_it_to_the_device_it_resumes_on(monkeypatch) -> None:
    """Saved by a run on cuda:3 of a 4-GPU machine, resumed with one GPU visible (``--device cuda:0``): the state
    that run's draws came from is device 3's, not device 0's (an unused device, still at the seed's state)."""
    restored: dict[int, bytes] = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all",
                        lambda: [torch.full((16,), i, dtype=torch.uint8) for i in range(4)])
    state = rng_state()
    assert state["cuda_device"] == 3 and len(state["cuda"]) == 4
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_rng_state",
                        lambda new_state, device=0: restored.__setitem__(device, bytes(new_state.numpy())))
    set_rng_state(state)
    assert restored == {0: bytes([3] * 16)}
    restored.clear()
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)                  # same machine: device by device
    set_rng_state(state)
    assert restored == {i: bytes([i] * 16) for i in range(4)}


def test_a_process_that_sees_no_cuda_device_saves_no_device_number(monkeypatch) -> None:
    """``is_available`` true with no device to ask (a stand-in that reports CUDA on a CPU build, as the GPU suite's
    rehearsal does): the list of CUDA states is empty and no device number is asked for (``current_device``
    initialises CUDA and raised in the rehearsal's final checkpoint)."""

    def no_cuda() -> int:
        raise AssertionError("Torch not compiled with CUDA enabled")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [])
    monkeypatch.setattr(torch.cuda, "current_device", no_cuda)
    state = rng_state()
    assert state["cuda"] == [] and "cuda_device" not in state
    set_rng_state(state)


def test_seeds_give_their_own_reproducible_numpy_draws_even_beyond_numpys_range() -> None:
    """Every seed seeds numpy too: different seeds draw differently (0, 1 and 64 are not folded together), the same
    seed draws the same, and a seed numpy's own ``seed`` refuses (>= 2**32) still works."""
    numpy_draws = {}
    for seed in (0, 1, 64, 2**32 + 1, 2**40):
        seed_everything(seed)
        first = draws()
        seed_everything(seed)
        assert draws() == first
        numpy_draws[seed] = first[1]
    assert len({numpy_draws[0], numpy_draws[1], numpy_draws[64]}) == 3


def test_a_gpu_checkpoint_resumed_where_there_is_no_cuda_restores_the_cpu_generators(monkeypatch) -> None:
    """Saved on a GPU machine, resumed on a CPU-only one: the CUDA states are skipped, no CUDA call is made."""

    def no_cuda(*args: object, **kwargs: object) -> None:
        raise AssertionError("Torch not compiled with CUDA enabled")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in ("device_count", "current_device", "set_rng_state"):
        monkeypatch.setattr(torch.cuda, name, no_cuda)
    seed_everything(8)
    state = {**rng_state(), "cuda": [np.full(16, 3, dtype=np.uint8)], "cuda_device": 0}
    expected = draws()
    set_rng_state(state)
    assert draws() == expected
    set_rng_state({k: v for k, v in state.items() if k not in ("cuda", "cuda_device")})  # and CPU-only, as saved
    assert draws() == expected


def test_a_run_saved_on_cuda0_and_resumed_on_cuda1_takes_device_0s_state(monkeypatch) -> None:
    """Four GPUs when saved (the run on cuda:0), two visible on resume with the run on cuda:1: device 1 gets the
    state the run's draws came from (device 0's); a recorded device with no saved state moves nothing."""
    restored: dict[int, bytes] = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state",
                        lambda new_state, device=0: restored.__setitem__(device, bytes(new_state.numpy())))
    seed_everything(9)
    cpu = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state().numpy()}
    saved = [np.full(16, i, dtype=np.uint8) for i in range(4)]
    set_rng_state({**cpu, "cuda": saved, "cuda_device": 0})
    assert restored == {0: bytes([0] * 16), 1: bytes([0] * 16)}
    for odd in (4, -1):  # not a device of the checkpoint: the visible devices keep their own states
        restored.clear()
        set_rng_state({**cpu, "cuda": saved, "cuda_device": odd})
        assert restored == {0: bytes([0] * 16), 1: bytes([1] * 16)}
