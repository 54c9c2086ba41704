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
