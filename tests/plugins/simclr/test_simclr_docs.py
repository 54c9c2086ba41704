"""docs/simclr.md names every scalar the plugin logs to TensorBoard."""

from __future__ import annotations

import re
from pathlib import Path

from contrastlab.platform.config import resolve_config
from contrastlab.plugins.simclr.task import SimCLRTask

DOC = Path(__file__).resolve().parents[3] / "docs" / "simclr.md"


def test_the_docs_list_the_logged_scalars() -> None:
    """The docs named only eval/knn_top1 and the linear probe's tags; train/lr, train/epoch and train/clamped_frac
    (and when each is written) were left for the user to find in TensorBoard."""
    text = DOC.read_text()
    start = text.index("TensorBoard's scalars")
    paragraph = text[start:text.index("`summary.json` also has", start)]
    documented = set(re.findall(r"`((?:train|eval)/[a-z0-9_@]+)`", paragraph))
    task = SimCLRTask()
    assert documented == set(task.logged_metrics(resolve_config(task, preset="smoke", loss="dcl")))


def test_the_preset_table_matches_the_presets() -> None:
    rows = {}
    for line in DOC.read_text().split("## Presets", 1)[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    task = SimCLRTask()
    assert set(rows) == set(task.presets)
    for preset, (_, encoder, data, schedule, _) in rows.items():
        c = resolve_config(task, preset=preset, loss="dcl")
        assert encoder.startswith(f"`{c.encoder.name}`")
        assert schedule.startswith(f"{c.train.epochs} epochs, batch {c.train.batch_size}")
        if c.data.train_subset is not None:
            assert f"{c.data.train_subset:,} train / {c.data.test_subset:,} test images" in data
    smoke = resolve_config(task, preset="smoke", loss="dcl")
    assert f"(width {smoke.encoder.hparams()['width']})" in rows["smoke"][1]
    paper = resolve_config(task, preset="cifar10-paper", loss="dcl")
    tr, t = paper.train, paper.sampler.hparams()["temperature"]
    assert paper.data.dataset == "cifar10" and tr.optimizer == "adam"
    assert f"t = {t:g}, Adam {tr.lr:.0e}, wd {tr.weight_decay:.0e}".replace("e-0", "e-") in rows["cifar10-paper"][3]
