"""The plugin manager: built-ins plus entry points (group ``contrastlab``), allow-list, tracing, registries.

* Built-in modules are registered under the package name ``contrastlab`` exactly like third-party ones.
* ``CONTRASTLAB_PLUGINS=pkg1,pkg2`` loads only the named third-party distributions; set to an empty string it
  loads only the built-ins. Unset, every installed entry point is loaded.
* ``CONTRASTLAB_TRACE=1`` prints every hook call (and each implementation it reaches) to stderr.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from contrastlab.platform import hookspecs
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.registry import Registry

ENTRY_POINT_GROUP = "contrastlab"
BUILTIN_PACKAGE = "contrastlab"
BUILTIN_MODULES = (
    "contrastlab.losses",
    "contrastlab.samplers",
    "contrastlab.encoders",
    "contrastlab.plugins.curl",
    "contrastlab.plugins.simclr",
    "contrastlab.plugins.pu",
    "contrastlab.plugins.recsys",
)
REGISTRY_HOOKS = {
    "register_losses": "loss",
    "register_samplers": "sampler",
    "register_encoders": "encoder",
    "register_plugins": "plugin",
}


@dataclass
class PluginInfo:
    """One loaded plugin module and the distribution that provides it."""

    name: str
    package: str
    version: str
    module: str
    hooks: list[str] = field(default_factory=list)


def _allow_list() -> set[str] | None:
    raw = os.environ.get("CONTRASTLAB_PLUGINS")
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def _trace(msg: str) -> None:
    if os.environ.get("CONTRASTLAB_TRACE", "") not in ("", "0"):
        print(f"[contrastlab trace] {msg}", file=sys.stderr)


def _version_of(package: str) -> str:
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return "unknown"


class PluginManager:
    """pluggy manager plus the four registries filled from the ``register_*`` hooks."""

    def __init__(self, *, builtins: bool = True, entry_points: bool = True) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.info: dict[str, PluginInfo] = {}
        self._registries: dict[str, Registry] | None = None
        if builtins:
            for mod in BUILTIN_MODULES:
                self.register_module(importlib.import_module(mod), package=BUILTIN_PACKAGE)
        if entry_points:
            self._load_entry_points()
        self.pm.check_pending()

    # ----------------------------------------------------------------- loading
    def register_module(self, module: ModuleType | Any, *, package: str, name: str | None = None) -> None:
        """Register a module (or object) of hook implementations as provided by distribution ``package``."""
        plugin_name = name or getattr(module, "__name__", repr(module))
        if self.pm.has_plugin(plugin_name):
            return
        self.pm.register(module, name=plugin_name)
        hooks = [h.name for h in self.pm.get_hookcallers(module) or []]
        module_name = getattr(module, "__name__", None) or type(module).__module__
        self.info[plugin_name] = PluginInfo(
            name=plugin_name, package=package, version=_version_of(package), module=module_name, hooks=sorted(hooks)
        )
        self._registries = None

    def _load_entry_points(self) -> None:
        allow = _allow_list()
        seen: set[str] = set()
        for ep in md.entry_points(group=ENTRY_POINT_GROUP):
            seen |= {ep.name, ep.dist.name if ep.dist is not None else ep.module.split(".")[0]}
            dist = ep.dist.name if ep.dist is not None else ep.module.split(".")[0]
            if allow is not None and dist not in allow and ep.name not in allow:
                _trace(f"skip entry point {ep.name} ({dist}): not in CONTRASTLAB_PLUGINS")
                continue
            _trace(f"load entry point {ep.name} = {ep.value} ({dist})")
            try:
                obj = ep.load()
            except Exception as exc:  # a broken third-party package must not take the CLI down silently
                raise ConfigError(f"plugin package '{dist}' failed to load entry point '{ep.name}': {exc}") from exc
            self.register_module(obj, package=dist, name=ep.name)
        for missing in sorted((allow or set()) - seen):
            print(
                f"warning: CONTRASTLAB_PLUGINS names '{missing}', but no installed package provides a "
                f"'{ENTRY_POINT_GROUP}' entry point by that name",
                file=sys.stderr,
            )

    # --------------------------------------------------------------- registries
    @property
    def registries(self) -> dict[str, Registry]:
        """``{"loss": Registry, "sampler": ..., "encoder": ..., "plugin": ...}``, built on first use."""
        if self._registries is None:
            self._registries = self._build_registries()
        return self._registries

    def _build_registries(self) -> dict[str, Registry]:
        regs = {kind: Registry(kind) for kind in REGISTRY_HOOKS.values()}
        for hook_name, kind in REGISTRY_HOOKS.items():
            caller = getattr(self.pm.hook, hook_name)
            _trace(f"call {hook_name}(register)")
            for impl in reversed(caller.get_hookimpls()):
                info = self.info.get(impl.plugin_name)
                package = info.package if info else impl.plugin_name
                _trace(f"  -> {impl.plugin_name} ({package}).{hook_name}")
                registry = regs[kind]

                def register(factory: Any, *, _reg: Registry = registry, _pkg: str = package, **kw: Any) -> None:
                    _reg.add(factory, package=_pkg, **kw)

                impl.function(register=register)
        return regs

    def register_commands(self, app: Any) -> None:
        """Let plugins add Typer commands to ``app``."""
        _trace("call register_commands(app)")
        self.pm.hook.register_commands(app=app)

    def packages(self) -> list[PluginInfo]:
        """Loaded plugin modules with their distribution, version and implemented hooks."""
        return [self.info[k] for k in sorted(self.info)]


_current: PluginManager | None = None


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager (built on first use)."""
    global _current
    if _current is None:
        _current = PluginManager()
    return _current


def set_plugin_manager(pm: PluginManager | None) -> None:
    """Replace the process-wide manager (``None`` rebuilds it on next use)."""
    global _current
    _current = pm


@contextmanager
def use_plugin_manager(pm: PluginManager) -> Iterator[PluginManager]:
    """Temporarily make ``pm`` the process-wide manager (tests, embedding)."""
    global _current
    previous = _current
    _current = pm
    try:
        yield pm
    finally:
        _current = previous


def registry(kind: str) -> Registry:
    """The registry of ``kind`` (``loss``, ``sampler``, ``encoder`` or ``plugin``) of the current manager."""
    return get_plugin_manager().registries[kind]
