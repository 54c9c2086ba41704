"""Fixtures for the core tests: the example toy plugin registered exactly as its entry point would be."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contrastlab.platform.plugins import PluginManager
from contrastlab.testing import fresh_plugin_manager


@pytest.fixture
def toy_pm() -> Iterator[PluginManager]:
    """A fresh plugin manager with the built-ins plus the example plugin package ``contrastlab-toy``."""
    import contrastlab_toy.plugin

    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy") as pm:
        yield pm

