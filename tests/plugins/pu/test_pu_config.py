"""The pu config refuses sizes, seeds and step counts that mean nothing."""

from __future__ import annotations

import pytest

from contrastlab.platform.config import resolve_config
from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.pu.task import PUTask


@pytest.mark.parametrize(("item", "message"), [
    ("data.train_size=-1", "data.train_size=-1: Input should be greater than or equal to 1"),
    ("data.test_size=0", "data.test_size=0: Input should be greater than or equal to 1"),
    ("data.split_seed=-1", "data.split_seed=-1: Input should be greater than or equal to 0"),
    ("classifier.end_to_end_steps=0", "classifier.end_to_end_steps=0: Input should be greater than or equal to 1"),
])
def test_bad_sizes_seeds_and_steps_are_refused(item: str, message: str) -> None:
    """They were accepted: 0 end-to-end steps silently meant the default budget, a size of -1 a subset of n - 1."""
    with pytest.raises(ConfigError, match=message):
        resolve_config(PUTask(), preset="smoke", sets=[item])


def test_the_presets_stay_valid() -> None:
    for preset in PUTask.presets:
        resolve_config(PUTask(), preset=preset)


@pytest.mark.parametrize("key", ["pretrain.projection_hidden", "pretrain.projection_dim", "prior.estimator_hidden"])
def test_a_huge_width_is_refused_before_the_run_is_created(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"{key}=100000000000: Input should be less than or equal to 65536"):
        resolve_config(PUTask(), preset="smoke", sets=[f"{key}=100000000000"])


def test_an_unknown_dataset_is_named_as_such() -> None:
    """It was refused by the label check, blaming the positive classes: "loss 'punce' needs pu labels, but plugin
    'pu' provides no labels with this config; set data.positive_classes for dataset 'fashion_mnst'"."""
    with pytest.raises(ConfigError, match=r"^invalid config value data\.dataset='fashion_mnst': unknown dataset "
                                          r"'fashion_mnst'; valid: .*Did you mean 'fashion_mnist'\?$"):
        resolve_config(PUTask(), preset="smoke", sets=["data.dataset=fashion_mnst"])
    assert resolve_config(PUTask(), preset="smoke", sets=["data.dataset=synthetic"]).data.dataset == "synthetic"
