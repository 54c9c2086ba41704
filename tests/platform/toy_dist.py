"""Helper shared by the subprocess tests: the example plugin 'installed' through a real entry point."""

from __future__ import annotations

from pathlib import Path


def install_fake_toy_dist(site: Path) -> Path:
    """A dist-info for contrastlab-toy under ``site`` whose entry point importlib.metadata reads like a pip install.

    Put ``site`` and the template's ``src`` on ``PYTHONPATH`` and the installed ``platform`` script finds the plugin
    through the entry-point group ``contrastlab``. Returns ``site``.
    """
    dist = site / "contrastlab_toy-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: contrastlab-toy\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[contrastlab]\ntoy = contrastlab_toy.plugin\n")
    return site
