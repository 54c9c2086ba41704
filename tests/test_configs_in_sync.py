"""configs/<plugin>/<preset>.yaml match what `platform config` resolves, and load back as valid configs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from contrastlab.platform.config import resolve_config
from contrastlab.platform.plugins import registry

ROOT = Path(__file__).resolve().parents[1]


def _export_module():
    spec = importlib.util.spec_from_file_location("export_configs", ROOT / "scripts" / "export_configs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configs_folder_is_in_sync_with_presets() -> None:
    rendered = _export_module().render_all()
    assert {p.parts[1] for p in rendered} == {"curl", "simclr", "pu", "graph", "recsys"}
    for rel, text in rendered.items():
        path = ROOT / rel
        assert path.is_file(), f"{rel} missing: run `make configs`"
        assert path.read_text() == text, f"{rel} is out of date: run `make configs`"


def test_a_saved_config_file_round_trips() -> None:
    path = ROOT / "configs" / "curl" / "smoke.yaml"
    plugin = registry("plugin").get("curl").factory()
    from_file = resolve_config(plugin, preset="smoke", config_file=path)
    assert from_file.model_dump() == resolve_config(plugin, preset="smoke").model_dump()
    assert yaml.safe_load(path.read_text())["loss"]["name"] == "infonce"
