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
    assert documented == {tag for tag in logged if tag.split("/")[0] not in ("test", "prior")}


def test_the_preset_table_matches_the_presets() -> None:
    text = " ".join(DOC.read_text().split("## 5. Presets", 1)[1].split("\n## ", 1)[0].split())
    task = PUTask()
    smoke = resolve_config(task, preset="smoke", loss="punce")
    enc = smoke.encoder.hparams()
    assert smoke.data.dataset == "fashion_mnist" and smoke.encoder.name == "small_cnn"
    assert (f"Fashion-MNIST {smoke.data.train_size // 1000}k/{smoke.data.test_size // 1000}k, `small_cnn` "
            f"(width {enc['width']}, {enc['feature_dim']}-d), n_L = {smoke.data.n_labeled}, "
            f"{smoke.pretrain.steps} pre-training steps at batch {smoke.pretrain.batch_size}, "
            f"{smoke.classifier.steps} probe steps") in text
    paper = resolve_config(task, preset="paper", loss="punce")
    assert paper.data.train_size is None and paper.encoder.name == "resnet18"
    assert paper.encoder.hparams()["stem"] == "cifar"
    steps = paper.pretrain.steps
    epochs = round(steps * paper.pretrain.batch_size / 60_000)  # full Fashion-MNIST: 60,000 training images
    assert (f"batch {paper.pretrain.batch_size}, about {epochs} epochs ({steps:,} steps), "
            f"n_L = {paper.data.n_labeled}") in text
