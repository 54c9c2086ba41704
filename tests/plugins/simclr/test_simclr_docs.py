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
