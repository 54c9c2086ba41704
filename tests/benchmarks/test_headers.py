"""Every timing benchmark prints the speed-relevant environment variables in its header (the SimCLR and PU figures
in docs/results.md could not say which thread settings they were measured under)."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("name", ["curl", "losses", "simclr", "pu", "bf16_drift"])
def test_the_header_names_the_environment(name: str) -> None:
    source = (BENCHMARKS / f"{name}.py").read_text()
    assert "describe_timing_environment()" in source
