"""``platform report``'s run collection on damaged run records (from a bad-input sweep)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastlab.experiments.report import collect_runs


def write_run(root: Path, name: str, info: dict, summary: dict) -> Path:
    """A minimal finished run directory: config.yaml, run.json, summary.json."""
    run_dir = root / "runs" / "toy" / "dcl" / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("seed: 1\n")
    (run_dir / "run.json").write_text(json.dumps(
        {"plugin": "toy", "loss": "dcl", "seed": 1, "preset": "smoke", "overrides": [], "status": "completed", **info}))
    (run_dir / "summary.json").write_text(json.dumps({"metrics": {"score": 0.5}, "primary_metric": "score", **summary}))
    return run_dir


@pytest.mark.parametrize(("info", "summary"), [
    ({"seed": [1]}, {}), ({"seed": "one"}, {}), ({"overrides": 5}, {}), ({}, {"metrics": "x"}),
    ({"plugin": 5}, {}), ({"plugin": ["toy"]}, {}),  # reported as a task named "5" (train/eval refuse it: no plugin)
])  # fmt: skip
def test_a_damaged_run_record_is_skipped_with_a_note(tmp_path: Path, info: dict, summary: dict) -> None:
    """A run.json ``seed`` that is no integer, or a summary.json ``metrics`` that is no mapping, ended
    ``platform report`` in a TypeError/ValueError/AttributeError traceback."""
    good = write_run(tmp_path, "good", {"seed": 2}, {})
    bad = write_run(tmp_path, "bad", info, summary)
    notes: list[str] = []
    records = collect_runs([tmp_path], notes.append)
    assert [r.run_dir for r in records] == [good]
    assert len(notes) == 1 and "skipped 1 folder(s)" in notes[0] and str(bad) in notes[0], notes
