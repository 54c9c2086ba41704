"""LogWindow: per-step scalars averaged between two logs, and carried through a checkpoint."""

from __future__ import annotations

import io

import pytest
import torch

from contrastlab.losses.floors import ClampMeter
from contrastlab.platform.logwindow import LogWindow


def test_pop_averages_each_name_over_the_steps_it_was_added_then_empties() -> None:
    window = LogWindow()
    for step, value in enumerate([1.0, 2.0, 4.0]):
        window.add("loss", torch.tensor(value))
        window.add("clamp", torch.tensor(0.5) if step == 1 else None)  # reported on one step only
        window.add("count", step)
    assert window.count("loss") == 3 and window.count("clamp") == 1 and window.count("missing") == 0
    assert window.pop() == pytest.approx({"loss": 7 / 3, "clamp": 0.5, "count": 1.0})
    assert window.pop() == {} and window.count("loss") == 0


def test_added_tensors_are_copied_so_later_in_place_changes_do_not_leak_in() -> None:
    window, value = LogWindow(), torch.tensor(2.0, requires_grad=True)
    window.add("loss", value)
    with torch.no_grad():
        value.add_(100.0)
    assert window.pop() == {"loss": 2.0}


def test_a_window_restored_from_a_checkpoint_continues_the_same_means() -> None:
    straight, first = LogWindow(), LogWindow()
    for v in (1.0, 3.0):
        straight.add("loss", torch.tensor(v))
        first.add("loss", torch.tensor(v))
    buffer = io.BytesIO()
    torch.save({"log_window": first.state_dict()}, buffer)
    buffer.seek(0)
    resumed = LogWindow()
    resumed.load_state_dict(torch.load(buffer)["log_window"], "cpu")
    for window in (straight, resumed):
        window.add("loss", torch.tensor(8.0))
    assert resumed.pop() == straight.pop() == {"loss": 4.0}


def test_an_old_checkpoint_without_a_window_starts_empty() -> None:
    window = LogWindow()
    window.add("loss", 1.0)
    window.load_state_dict(None)
    assert window.pop() == {}


def test_clamp_meter_is_a_window_of_the_clamp_fraction() -> None:
    class Loss:
        last_stats = {"clamped_frac": torch.tensor(0.25)}

    meter = ClampMeter()
    meter.update(Loss())
    meter.update(object())  # a loss without the statistic adds nothing
    state = meter.state_dict()
    other = ClampMeter()
    other.load_state_dict(state)
    assert meter.pop() == other.pop("train/clamped_frac") == {"train/clamped_frac": 0.25}
    assert meter.pop() == {}


def test_the_window_keeps_no_autograd_graph() -> None:
    """A step's loss still carries its graph; a sum that kept it would hold every step's activations until the log."""
    window, weight = LogWindow(), torch.tensor(3.0, requires_grad=True)
    for _ in range(2):
        window.add("loss", weight * 2.0)
    assert not window.sums["loss"].requires_grad and window.sums["loss"].grad_fn is None
    assert window.pop() == {"loss": 6.0}


def test_add_all_prefixes_every_name() -> None:
    window = LogWindow()
    window.add_all({"clamped_frac": torch.tensor(0.5), "missing": None}, prefix="train/")
    window.add_all({"clamped_frac": 1.5}, prefix="train/")
    assert window.pop() == {"train/clamped_frac": 1.0}


def test_a_restored_window_moves_its_tensor_sums_to_the_device_and_keeps_number_sums() -> None:
    saved = LogWindow()
    saved.add("loss", torch.tensor(2.0))
    saved.add("episodes", 3)
    restored = LogWindow()
    restored.load_state_dict(saved.state_dict(), device="meta")
    assert restored.sums["loss"].device.type == "meta" and restored.sums["episodes"] == 3.0
    assert restored.counts == {"loss": 1, "episodes": 1}
    kept = LogWindow()
    kept.load_state_dict(saved.state_dict())  # no device: as saved
    assert kept.sums["loss"].device.type == "cpu" and kept.pop() == {"loss": 2.0, "episodes": 3.0}
