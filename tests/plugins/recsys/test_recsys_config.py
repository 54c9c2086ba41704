"""The recsys config refuses, before anything runs, a generated dataset that cannot fit in memory."""

from __future__ import annotations

import re

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


def test_the_documented_defaults() -> None:
    """The defaults docs/recsys.md and the option docstrings state (without a preset)."""
    from contrastlab.plugins.recsys.config import RecsysConfig

    c = RecsysConfig()
    assert c.data.test_fraction == 0.2 and c.data.split_seed == 0  # "data.test_fraction 0.2, data.split_seed 0"
    assert c.data.min_rating is None and c.data.csv_header is None and c.data.dataset == "synthetic"
    assert (c.data.synthetic.users, c.data.synthetic.items) == (400, 500)  # "400 users × 500 items"
    assert c.eval.ks == [5, 10, 20] and c.eval.at_init  # BCL Table 10; step 0 is the untrained model
    assert c.train.negatives == "in_batch" and c.train.mask_known_positives  # "in_batch (default)", "on by default"
    assert c.train.lr == 1e-3  # "Adam learning rate (LightGCN: 0.001)"
    assert c.density == "all" and not c.tau_plus_from_density  # --set density=train opts in; on in paper presets
    assert not c.model.learn_bilinear  # W frozen at the identity unless model.learn_bilinear=true
    assert c.sampler.name == "query_key" and c.sampler.hparams() == {"similarity": "cosine", "temperature": 0.2}


BOUNDS = [  # (option, values accepted, values refused): the smallest/largest allowed and the first beyond
    ("data.synthetic.users", ["2"], ["1"]), ("data.synthetic.items", ["2"], ["1"]),
    ("data.synthetic.factors", ["1", "4096"], ["0", "4097"]), ("data.synthetic.min_per_user", ["1"], ["0"]),
    ("data.synthetic.max_per_user", ["1"], ["0"]), ("data.synthetic.sharpness", ["0"], ["-0.1"]),
    ("data.synthetic.seed", ["0"], ["-1"]), ("data.split_seed", ["0"], ["-1"]),
    ("data.test_fraction", ["0.01", "0.5", "0.99"], ["0", "1", "1.5"]),
    ("train.epochs", ["1"], ["0"]), ("train.batch_size", ["2"], ["1"]), ("train.max_steps", ["1"], ["0"]),
    ("train.lr", ["1e-9"], ["0"]), ("train.weight_decay", ["0"], ["-0.001"]), ("train.num_negatives", ["1"], ["0"]),
    ("train.log_every", ["1"], ["0"]), ("eval.every_epochs", ["0"], ["-1"]), ("eval.batch_users", ["1"], ["0"]),
    ("checkpoint_every", ["1"], ["0"]),
]  # fmt: skip


@pytest.mark.parametrize(("key", "accepted", "refused"), BOUNDS)
def test_option_bounds(key: str, accepted: list[str], refused: list[str]) -> None:
    for value in accepted:
        resolve_config(RecsysTask(), preset="smoke", sets=[f"{key}={value}"])
    for value in refused:
        with pytest.raises(ConfigError, match=f"{re.escape(key)}={re.escape(value)}"):
            resolve_config(RecsysTask(), preset="smoke", sets=[f"{key}={value}"])


@pytest.mark.parametrize(("users", "items", "ok"), [
    (100_000, 500, True), (100_000, 501, False), (1_000_000, 2, True), (1_000_001, 2, False), (2, 1_000_001, False),
])  # fmt: skip
def test_a_generated_dataset_of_at_most_50_million_pairs_and_a_million_per_side(users: int, items: int, ok: bool
                                                                                ) -> None:
    """"users × items at most 50 million" (exactly 50 million is allowed), each side at most 1,000,000."""
    sets = [f"data.synthetic.users={users}", f"data.synthetic.items={items}"]
    if ok:
        resolve_config(RecsysTask(), preset="smoke", sets=sets)
    else:
        with pytest.raises(ConfigError, match=r"more than 50,000,000|less than or equal to 1000000"):
            resolve_config(RecsysTask(), preset="smoke", sets=sets)
