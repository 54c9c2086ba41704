"""docs/recsys.md states the presets' values; they are checked against the resolved configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrastlab.platform.config import resolve_config
from contrastlab.plugins.recsys.task import RecsysTask

DOC = Path(__file__).resolve().parents[3] / "docs" / "recsys.md"


def _text() -> str:
    return " ".join(DOC.read_text().split())  # line breaks of the prose do not matter


def test_the_smoke_sentence_matches_the_smoke_preset() -> None:
    c = resolve_config(RecsysTask(), preset="smoke", loss="bcl")
    enc = c.encoder.hparams()
    assert c.data.dataset == "synthetic" and c.encoder.name == "lightgcn"
    assert (f"LightGCN with d = {enc['dim']} and K = {enc['layers']}, batch {c.train.batch_size}, "
            f"lr {c.train.lr:g}, {c.train.epochs} epochs") in _text()


@pytest.mark.parametrize("preset", ["paper", "paper-ml1m"])
def test_the_preset_table_matches_the_paper_presets(preset: str) -> None:
    c = resolve_config(RecsysTask(), preset=preset, loss="bcl")
    enc, smp = c.encoder.hparams(), c.sampler.hparams()
    text = _text()
    assert c.encoder.name == "lightgcn" and c.tau_plus_from_density
    assert f"embedding size {enc['dim']}, K = {enc['layers']} layers, Adam lr {c.train.lr:g}" in text
    assert f"| batch {c.train.batch_size} |" in text
    assert f"init N(0, {enc['init_std']:g}²)" in text
    assert smp["similarity"] == "cosine" and f"score cos / t with t = {smp['temperature']:g}" in text
    assert f"{c.train.epochs} epochs, evaluation every {c.eval.every_epochs}" in text
