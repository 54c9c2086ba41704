"""The packaging snippet of docs/plugins.md is valid metadata and installs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[2]


def packaging_snippet() -> str:
    """The ```toml block of the "Packaging" section."""
    text = (ROOT / "docs" / "plugins.md").read_text()
    section = text.split("## 3. Packaging", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```toml\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "expected one toml block in docs/plugins.md, section 3"
    return blocks[0]


def test_snippet_is_valid_project_metadata() -> None:
    data = tomllib.loads(packaging_snippet())
    project = data["project"]
    assert project["name"] and project["version"]
    assert data["project"]["entry-points"]["contrastlab"] == {"toy": "contrastlab_toy.plugin"}
    assert data["build-system"]["build-backend"]


def test_snippet_installs_and_exposes_the_entry_point(tmp_path: Path) -> None:
    pytest.importorskip("setuptools")
    project = tmp_path / "contrastlab-toy"
    package = project / "src" / "contrastlab_toy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text("")
    (project / "pyproject.toml").write_text(packaging_snippet())
    target = tmp_path / "target"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet",
         "--target", str(target), str(project)],
        capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    dist_info = next(target.glob("contrastlab_toy-*.dist-info"))
    assert dist_info.name == "contrastlab_toy-0.1.0.dist-info"
    entry_points = (dist_info / "entry_points.txt").read_text()
    assert "[contrastlab]" in entry_points and "toy = contrastlab_toy.plugin" in entry_points
    assert (target / "contrastlab_toy" / "plugin.py").is_file()
