"""The base classes a task plugin builds on (``platform.task``): TaskConfig's defaults and bounds, the plugin
defaults a third-party plugin inherits."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contrastlab.platform.task import TaskConfig, TaskPlugin


def test_task_config_defaults() -> None:
    config = TaskConfig()
    assert (config.seed, config.device, config.checkpoint_every, config.keep_checkpoints) == (1, "auto", 1000, 2)
    assert (config.loss.name, config.sampler.name, config.encoder.name) == ("infonce", "two_view", "mlp")


@pytest.mark.parametrize(("key", "good", "bad"), [("seed", [0, 2**32 - 1], [-1, 2**32]),
                                                  ("checkpoint_every", [1], [0]),
                                                  ("keep_checkpoints", [1], [0])])
def test_task_config_bounds(key: str, good: list[int], bad: list[int]) -> None:
    """A seed is any unsigned 32-bit integer (numpy's limit); a checkpoint every step and keeping only the latest
    (the least disk) are allowed."""
    for value in good:
        assert getattr(TaskConfig(**{key: value}), key) == value
    for value in bad:
        with pytest.raises(ValidationError):
            TaskConfig(**{key: value})


def test_a_section_validates_assignments() -> None:
    """``prepare_config`` and the tuner assign to validated configs: a bad value must not slip in that way."""
    config = TaskConfig()
    with pytest.raises(ValidationError):
        config.seed = -1
    with pytest.raises(ValidationError):
        config.keep_checkpoints = "many"


def test_plugin_defaults_a_third_party_plugin_inherits() -> None:
    """Higher primary metrics are better, a Ctrl-C stops without a checkpoint unless the plugin opts in, the loss
    is used, and the sampler inputs are the declared ones."""

    class Plain(TaskPlugin):
        name = "plain"

    plugin = Plain()
    assert Plain.higher_is_better is True and Plain.checkpoint_on_stop is False
    assert plugin.uses_loss(TaskConfig()) is True and plugin.sampler_inputs_for(TaskConfig()) is None
    assert plugin.label_kinds(TaskConfig()) == frozenset() and plugin.estimate_seconds(TaskConfig(), "cpu") is None
