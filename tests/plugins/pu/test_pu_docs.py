"""docs/pu.md names every scalar the plugin logs to TensorBoard."""

from __future__ import annotations

import re
from pathlib import Path

from contrastlab.platform.config import resolve_config
from contrastlab.plugins.pu.task import PUTask

DOC = Path(__file__).resolve().parents[3] / "docs" / "pu.md"


def test_the_docs_list_the_logged_scalars() -> None:
    """The list left out pretrain/labeled_per_batch and train/clamped_frac, which the pre-training loop logs."""
    text = DOC.read_text()
    start = text.index("Every run writes TensorBoard curves")
    paragraph = text[start:text.index("and `summary.json`", start)]
    documented = set(re.findall(r"`((?:pretrain|train|classifier)/[a-z0-9_]+)`", paragraph))
    task = PUTask()
    logged = set(task.logged_metrics(resolve_config(task, preset="smoke", loss="dcl")))
    assert "`test/*`" in paragraph
    assert documented == {tag for tag in logged if not tag.startswith("test/")}
