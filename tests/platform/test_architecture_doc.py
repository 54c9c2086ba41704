"""docs/architecture.md names every module of the core and of experiments/ (a new user reads it to find where
something lives; grid_progress, out_folder and devices were missing)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _named(stem: str) -> bool:
    """``tune_study`` also counts as named by the shorthand ``tune + tune_search/_study``."""
    words = set(re.findall(r"[A-Za-z_]+", DOC))
    return stem in words or (stem.startswith("tune_") and f"_{stem.removeprefix('tune_')}" in words)


@pytest.mark.parametrize("package", ["platform", "experiments"])
def test_every_module_is_named_in_the_architecture_doc(package: str) -> None:
    stems = sorted(p.stem for p in (ROOT / "src" / "contrastlab" / package).glob("*.py") if p.stem != "__init__")
    missing = [stem for stem in stems if not _named(stem)]
    assert not missing, f"docs/architecture.md does not name {package}/{', '.join(missing)}"
