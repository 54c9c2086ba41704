"""docs/graph.md's preset table states the values of the paper and smoke presets; they are checked here."""

from __future__ import annotations

import math
from pathlib import Path

from contrastlab.platform.config import resolve_config
from contrastlab.plugins.graph.task import GraphTask

DOC = Path(__file__).resolve().parents[3] / "docs" / "graph.md"
SUP = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _rows() -> dict[str, tuple[str, str]]:
    """``key -> (paper cell, smoke cell)`` of the table in section 4."""
    section = DOC.read_text().split("## 4. Presets", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("key", "---"):
            rows[cells[0]] = (cells[1], cells[3])
    return rows


def _grid(c_grid: list[float]) -> str:
    lo, hi = (round(math.log10(v)) for v in (min(c_grid), max(c_grid)))
    return f"C ∈ {{10{str(lo).translate(SUP)} … 10{str(hi).translate(SUP)}}}"


def test_the_preset_table_matches_the_presets() -> None:
    rows = _rows()
    for column, preset in enumerate(("paper", "smoke")):
        c = resolve_config(GraphTask(), preset=preset, loss="dcl")
        enc, t = c.encoder.hparams(), c.sampler.hparams()["temperature"]
        cell = {key: pair[column] for key, pair in rows.items()}
        layers = enc["num_layers"]
        assert f"GIN, {layers} layer{'s' if layers > 1 else ''} × {enc['hidden_dim']}" == cell["encoder"]
        assert c.sampler.name == "two_view" and rows["views, temperature"][0] == f"two_view, t = {t:g}"
        assert rows["optimiser"][0] == f"Adam, lr {c.train.lr:g}, no weight decay, batch {c.train.batch_size}"
        assert c.train.weight_decay == 0 and cell["epochs"].split()[0] == str(c.train.epochs)
        ev = c.eval
        kernel = "RBF SVM" if ev.svm_kernel == "rbf" else "linear SVM"
        scaled = "standardised" if ev.standardize else "unscaled"
        assert cell["readout"].startswith(f"{kernel} on {scaled} embeddings, {ev.folds} outer folds, "
                                          f"{_grid(ev.c_grid)}, {ev.inner_folds} inner folds")
        every = f"every {ev.every} epochs" if preset == "paper" else f"epoch {ev.every}"
        assert ev.initial and cell["evaluation points"] == f"step 0, {every}, end"
    smoke = resolve_config(GraphTask(), preset="smoke", loss="dcl")
    assert rows["data"][1] == (f"`synthetic`, {smoke.data.synthetic.graphs} graphs, "
                               f"{smoke.data.node_features} features")
    assert rows["views, temperature"][1] == rows["optimiser"][1] == "same"
