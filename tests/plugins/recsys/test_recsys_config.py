"""The recsys config refuses, before anything runs, a generated dataset that cannot fit in memory."""

from __future__ import annotations

import pytest

from contrastlab.platform.config import resolve_config
from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.recsys.task import RecsysTask


@pytest.mark.parametrize(("items", "message"), [
    (["data.synthetic.users=100000000"], "data.synthetic.users=100000000: Input should be less than or equal to"),
    (["data.synthetic.factors=100000000"], "data.synthetic.factors=100000000: Input should be less than or equal"),
    (["data.synthetic.users=200000", "data.synthetic.items=1000"],
     r"^invalid config section data.synthetic: users × items = 200000 × 1000 is more than 50,000,000"),
])
def test_a_generated_dataset_too_large_to_build_is_refused(items: list[str], message: str) -> None:
    """The pre-flight check built it: a traceback from the allocator, or minutes of swapping."""
    with pytest.raises(ConfigError, match=message):
        resolve_config(RecsysTask(), preset="smoke", sets=items)


def test_the_presets_stay_valid() -> None:
    for preset in RecsysTask.presets:
        resolve_config(RecsysTask(), preset=preset)
