"""The curl smoke preset's duration is stated once, the same way, wherever it is mentioned (measured in
docs/curl.md, "Presets")."""

from __future__ import annotations

import re
from pathlib import Path

from contrastlab.testing import run_cli

ROOT = Path(__file__).resolve().parents[1]
FIGURE = "about 35 s"
DURATION = re.compile(r"\bminutes?\b|\bmin\b|\d+\s*(?:-|–)?\s*\d*\s*(?:s|sec|seconds)\b")
PLACES = ["README.md", "Makefile", "src/contrastlab/plugins/curl/config.py"]
PLACES += [f"docs/{path.name}" for path in sorted((ROOT / "docs").glob("*.md"))]
MUST_STATE_IT = {"README.md", "Makefile", "docs/curl.md", "docs/results.md", "src/contrastlab/plugins/curl/config.py"}


def statements(text: str) -> list[str]:
    """Paragraphs, list items and single lines of comments, each joined into one line."""
    parts = re.split(r"\n\s*\n|\n(?=\s*[-*|#] )|\n(?=\S+:.*##)", text)
    return [" ".join(part.split()) for part in parts]


def about_curl_smoke(statement: str) -> bool:
    return "smoke" in statement and re.search(r"\bcurl\b|\bCURL\b|cartpole", statement) is not None


def test_every_curl_smoke_duration_is_the_same_figure() -> None:
    found = []
    for rel in PLACES:
        for statement in statements((ROOT / rel).read_text()):
            if about_curl_smoke(statement) and DURATION.search(statement):
                found.append((rel, statement))
                assert FIGURE in statement, f"{rel}: {statement[:200]}"
                assert not re.search(r"\bminutes?\b|\bmin\b", statement), f"{rel}: {statement[:200]}"
    assert {rel for rel, _ in found} >= MUST_STATE_IT


def test_train_help_gives_the_same_figure() -> None:
    code, out = run_cli(["train", "--help"])
    assert code == 0 and FIGURE in " ".join(out.replace("│", " ").split())
