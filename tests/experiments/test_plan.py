"""What ``platform compare`` plans (:mod:`contrastlab.experiments.plan`): the preset error's hints and the seeds of a
``--tuned`` comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastlab.experiments.plan import make_tuned_plan, require_preset
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.plugins import get_task_plugin


@pytest.mark.parametrize(("plugin", "command", "hint"), [
    ("curl", "compare", True),  # dcl-table3 is a curl recipe
    ("simclr", "compare", False),  # no simclr recipe: a curl one is no help
    ("curl", "tune", False),  # platform tune has no --recipe
])  # fmt: skip
def test_a_missing_preset_names_only_recipes_the_command_can_use(plugin: str, command: str, hint: bool) -> None:
    with pytest.raises(ConfigError) as info:
        require_preset(get_task_plugin(plugin), None, command)
    assert ("--recipe dcl-table3" in str(info.value)) is hint, str(info.value)
    assert ("--recipe" in str(info.value)) is hint, str(info.value)


def test_tuned_seeds_start_at_1_when_best_json_records_no_seeds(tmp_path: Path) -> None:
    """``--seeds N`` runs the N seeds after the largest tuning seed; a record without seeds used none."""
    (tmp_path / "dcl").mkdir()
    record = {"plugin": "recsys", "loss": "dcl", "preset": "smoke", "params": {"loss.tau_plus": "0.05"}}
    (tmp_path / "dcl" / "best.json").write_text(json.dumps(record))
    assert [p.seed for p in make_tuned_plan([tmp_path / "dcl"], 2, None, []).points] == [1, 2]
