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
