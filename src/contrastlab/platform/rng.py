"""Seeding, and the random-number generators' states saved in checkpoints (Python, numpy, torch CPU and CUDA)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """Every generator's state, for a checkpoint. torch's states are numpy byte arrays: a checkpoint loaded with
    ``map_location="cuda"`` moves tensors to the GPU, and ``torch.set_rng_state`` takes CPU bytes only."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state().numpy(),
    }
    if torch.cuda.is_available():
        state["cuda"] = [s.numpy() for s in torch.cuda.get_rng_state_all()]
        if state["cuda"]:  # asking for the device initialises CUDA: only where there is one
            state["cuda_device"] = int(torch.cuda.current_device())  # the run's device (Run sets it for cuda:K)
    return state


def _rng_bytes(saved: Any) -> torch.Tensor:
    """A saved generator state as the CPU byte tensor torch wants (numpy, or a tensor on any device: older
    checkpoints stored tensors)."""
    return saved.cpu() if isinstance(saved, torch.Tensor) else torch.from_numpy(np.asarray(saved, dtype=np.uint8))


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore :func:`rng_state` (or an older checkpoint's, with torch tensors on whatever device it was loaded to);
    the CUDA states only where CUDA is available, and only of the devices this process sees (a checkpoint written
    where more GPUs were visible, e.g. resumed under a scheduler that shows each run one GPU, still loads).

    When fewer GPUs are visible than were saved, device numbers no longer match, so the state of the device the
    run used when it saved goes to the device it uses now (``--resume RUN --device cuda:0`` after ``cuda:3``)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(_rng_bytes(state["torch"]))
    if "cuda" in state and torch.cuda.is_available():
        saved, count = list(state["cuda"]), torch.cuda.device_count()
        for index, device_state in enumerate(saved[:count]):
            torch.cuda.set_rng_state(_rng_bytes(device_state), index)
        used = state.get("cuda_device")
        if used is not None and len(saved) > count and 0 <= int(used) < len(saved):
            torch.cuda.set_rng_state(_rng_bytes(saved[int(used)]), torch.cuda.current_device())
