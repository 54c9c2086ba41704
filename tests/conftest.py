"""Shared test setup: headless rendering, no third-party plugins unless a test asks, the example plugin on path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("CONTRASTLAB_PLUGINS", "")  # isolate from whatever third-party plugins are installed

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_SRC = ROOT / "examples" / "plugin_template" / "src"
if str(TEMPLATE_SRC) not in sys.path:
    sys.path.insert(0, str(TEMPLATE_SRC))


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``cuda`` when no GPU is present (``benchmarks/gpu_suite.sh`` runs them on one)."""
    import pytest
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run benchmarks/gpu_suite.sh on one)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
