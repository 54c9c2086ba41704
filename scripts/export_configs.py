"""Write configs/<plugin>/<preset>.yaml for every built-in plugin preset (``make configs``).

The files are the fully resolved, documented configs that ``platform config --plugin P --preset X`` prints; copy one,
edit it, and pass it with ``platform train --config FILE``. A test keeps them in sync with the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from contrastlab.platform.config import resolve_config
from contrastlab.platform.config_yaml import config_to_yaml
from contrastlab.platform.plugins import PluginManager

ROOT = Path(__file__).resolve().parents[1]


def render_all() -> dict[Path, str]:
    """``{relative path: YAML text}`` for every built-in plugin and preset."""
    pm = PluginManager(entry_points=False)
    out: dict[Path, str] = {}
    from contrastlab.platform.plugins import use_plugin_manager

    with use_plugin_manager(pm):
        for component in pm.registries["plugin"]:
            if component.package != "contrastlab":
                continue
            plugin = component.factory()
            for preset in sorted(plugin.presets):
                header = f"contrastlab config for plugin '{plugin.name}', preset '{preset}'"
                text = config_to_yaml(resolve_config(plugin, preset=preset), header=header)
                out[Path("configs") / plugin.name / f"{preset}.yaml"] = text
    return out


def main() -> None:
    """Write the files; with ``--check`` only report files that are out of date (exit 1)."""
    check = "--check" in sys.argv
    stale = []
    for rel, text in render_all().items():
        path = ROOT / rel
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(rel))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {rel}")
    if stale:
        print("out of date (run `make configs`): " + ", ".join(stale))
        sys.exit(1)


if __name__ == "__main__":
    main()
