"""The plugin manager: built-ins plus entry points (group ``contrastlab``), allow-list, tracing, registries.

* Built-in modules are registered under the package name ``contrastlab`` exactly like third-party ones.
* ``CONTRASTLAB_PLUGINS=pkg1,pkg2`` loads only the named third-party distributions; set to an empty string it
  loads only the built-ins. Unset, every installed entry point is loaded.
* ``CONTRASTLAB_TRACE=1`` prints every hook call (and each implementation it reaches) to stderr.
* A broken third-party package (its entry point does not import, its hooks raise or are invalid) is skipped
  with one warning line on stderr; the built-ins and the other packages keep working. A name registered twice
  keeps the first registration (built-ins first, then entry points by package name) and warns naming both
  packages.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from contrastlab.platform import hookspecs
from contrastlab.platform.errors import ConfigError, UnknownNameError
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
    "contrastlab.plugins.graph",
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


_warned: set[str] = set()


def warn_once(message: str) -> None:
    """Print ``warning: message`` on stderr, once per process."""
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)


def _dist_of(ep: Any) -> str:
    """The distribution that provides entry point ``ep`` (its top-level module when unknown)."""
    return ep.dist.name if getattr(ep, "dist", None) is not None else ep.value.split(":")[0].split(".")[0]


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
        self.skipped: dict[str, str] = {}
        """Third-party packages that were left out, with the reason (``{package: "ImportError: ..."}``)."""
        self._dists: list[str] = []
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
        # a deterministic order (directory listings are not): "first" in a name clash is the package name first
        entry_points = sorted(((ep, _dist_of(ep)) for ep in md.entry_points(group=ENTRY_POINT_GROUP)),
                              key=lambda pair: (pair[1].lower(), pair[0].name))
        self._dists = list(dict.fromkeys(dist for _, dist in entry_points))
        for ep, dist in entry_points:
            seen |= {ep.name, dist}
            if allow is not None and dist not in allow and ep.name not in allow:
                _trace(f"skip entry point {ep.name} ({dist}): not in CONTRASTLAB_PLUGINS")
                continue
            if ep.name in self.info and self.info[ep.name].package != dist:
                first = self.info[ep.name].package
                warn_once(
                    f"entry point '{ep.name}' is provided by package '{first}' and again by package '{dist}'; "
                    f"keeping the one from '{first}'. To leave '{dist}' out, {self._leave_out(dist)}"
                )
                continue
            _trace(f"load entry point {ep.name} = {ep.value} ({dist})")
            try:
                obj = ep.load()
                self.register_module(obj, package=dist, name=ep.name)
                self.pm.check_pending()  # hook implementations without a matching hook
            except Exception as exc:  # a broken third-party package must not take the others down
                if self.pm.has_plugin(ep.name):
                    self.pm.unregister(name=ep.name)
                self.info.pop(ep.name, None)
                self._registries = None
                self._skip(dist, f"entry point '{ep.name}' failed to load ({_describe(exc)})")
        for missing in sorted((allow or set()) - seen):
            warn_once(
                f"CONTRASTLAB_PLUGINS names '{missing}', but no installed package provides a "
                f"'{ENTRY_POINT_GROUP}' entry point by that name"
            )

    def _leave_out(self, package: str) -> str:
        """How to leave ``package`` out: uninstall it, or the ``CONTRASTLAB_PLUGINS`` value that loads the others."""
        others = [d for d in self._dists if d != package and d not in self.skipped]
        allow = _allow_list()
        if allow is not None:
            others = [d for d in others if d in allow]
        value = shlex.quote(",".join(others)) if others else "''"
        return f"uninstall it or set CONTRASTLAB_PLUGINS={value}"

    # --------------------------------------------------------------- registries
    @property
    def registries(self) -> dict[str, Registry]:
        """``{"loss": Registry, "sampler": ..., "encoder": ..., "plugin": ...}``, built on first use."""
        while self._registries is None:
            skipped = len(self.skipped)
            regs = self._build_registries()
            if len(self.skipped) == skipped:  # else rebuild without the package that broke, not half of it
                self._registries = regs
        return self._registries

    def _skip(self, package: str, reason: str) -> None:
        self.skipped[package] = reason
        warn_once(f"plugin package '{package}' skipped: {reason}. To leave it out quietly, {self._leave_out(package)}")

    def _package_of(self, plugin_name: str) -> str:
        info = self.info.get(plugin_name)
        return info.package if info else plugin_name

    def _build_registries(self) -> dict[str, Registry]:
        regs = {kind: Registry(kind) for kind in REGISTRY_HOOKS.values()}
        for hook_name, kind in REGISTRY_HOOKS.items():
            caller = getattr(self.pm.hook, hook_name)
            _trace(f"call {hook_name}(register)")
            for impl in caller.get_hookimpls():  # registration order: built-ins, then entry points
                package = self._package_of(impl.plugin_name)
                if package in self.skipped:
                    continue
                _trace(f"  -> {impl.plugin_name} ({package}).{hook_name}")
                collected: list[tuple[Any, dict[str, Any]]] = []

                def register(factory: Any, *, _out: list = collected, **kw: Any) -> None:
                    _out.append((factory, kw))

                try:
                    impl.function(register=register)
                except Exception as exc:
                    if package == BUILTIN_PACKAGE:
                        raise
                    self._skip(package, f"its {hook_name} hook raised {_describe(exc)}")
                    continue
                try:
                    for factory, kw in collected:
                        self._add(regs[kind], factory, package, kw)
                except Exception as exc:  # an invalid declaration: no name, no ``accepts``, ...
                    if package == BUILTIN_PACKAGE:
                        raise  # a bug in contrastlab itself: fail loudly
                    reason = _describe_error(exc) if isinstance(exc, ConfigError) else _describe(exc)
                    self._skip(package, f"its {hook_name} hook registered an invalid {kind} ({reason})")
        return regs

    def _add(self, registry: Registry, factory: Any, package: str, kw: dict[str, Any]) -> None:
        """Register one component; a name that is already taken keeps its first registration (with a warning)."""
        name = kw.get("name") or getattr(factory, "name", None)
        first = registry.get(name).package if isinstance(name, str) and name in registry else None
        if first is None or first == package == BUILTIN_PACKAGE:
            registry.add(factory, package=package, **kw)  # two built-ins with one name is a bug: it raises
            return
        if first == BUILTIN_PACKAGE:
            how = f"To leave '{package}' out, {self._leave_out(package)}"
        else:
            how = f"To use the one from '{package}', leave '{first}' out: {self._leave_out(first)}"
        warn_once(
            f"{registry.kind} '{name}' is registered by package '{first}' and again by package '{package}'; "
            f"keeping the one from '{first}'. {how}"
        )

    def register_commands(self, app: Any) -> None:
        """Let plugins add Typer commands to ``app`` (a third-party hook that raises is skipped with a warning)."""
        _trace("call register_commands(app)")
        lists = ("registered_commands", "registered_groups")  # app.command() and app.add_typer()
        owners = {name: BUILTIN_PACKAGE for attr in lists for info in getattr(app, attr) for name in _names(info)}
        for impl in self.pm.hook.register_commands.get_hookimpls():
            package = self._package_of(impl.plugin_name)
            if package in self.skipped:
                continue
            before = {attr: len(getattr(app, attr)) for attr in lists}
            try:
                impl.function(app=app)
            except Exception as exc:
                if package == BUILTIN_PACKAGE:
                    raise
                self._skip(package, f"its register_commands hook raised {_describe(exc)}")
                for attr in lists:  # skipped as a whole: none of the commands it added stays
                    del getattr(app, attr)[before[attr]:]
                continue
            for attr in lists:
                entries = getattr(app, attr)
                added, entries[before[attr]:] = entries[before[attr]:], []
                for info in added:  # a name already taken keeps its first command (a built-in: `train`, ...)
                    taken = [(n, owners[n]) for n in _names(info) if owners.get(n, package) != package]
                    if not taken:
                        owners.update(dict.fromkeys(_names(info), package))
                        entries.append(info)
                        continue
                    name, first = taken[0]
                    warn_once(f"command '{name}' is registered by package '{first}' and again by package "
                              f"'{package}'; keeping the one from '{first}'. To leave '{package}' out, "
                              f"{self._leave_out(package)}")

    def packages(self) -> list[PluginInfo]:
        """Loaded plugin modules with their distribution, version and implemented hooks."""
        return [self.info[k] for k in sorted(self.info)]


def _command_name(info: Any) -> str:
    """The name a Typer ``CommandInfo`` gets on the command line (its callback's name, ``_`` → ``-``, if unnamed)."""
    return info.name or info.callback.__name__.lower().replace("_", "-")


def _names(info: Any) -> list[str]:
    """The names a Typer ``CommandInfo`` or ``TyperInfo`` (``add_typer``) takes on the command line: a group's
    name, or those of its commands when it has none (Typer merges them into the parent)."""
    if not hasattr(info, "typer_instance"):
        return [_command_name(info)]
    sub = info.typer_instance
    name = next((n for n in (info.name, getattr(getattr(sub, "info", None), "name", None)) if isinstance(n, str)), "")
    if name:
        return [name]
    inner = [i for attr in ("registered_commands", "registered_groups") for i in getattr(sub, attr, [])]
    return [n for i in inner for n in _names(i)]


def _describe_error(exc: BaseException) -> str:
    """The message of ``exc`` on one line, without a trailing full stop (it goes inside a sentence)."""
    return " ".join(str(exc).split()).rstrip(".") or type(exc).__name__


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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


def get_task_plugin(name: str) -> Any:
    """A fresh instance of the registered task plugin ``name`` (unknown names raise with suggestions, and name the
    third-party packages that were skipped: the plugin may be one of theirs)."""
    pm = get_plugin_manager()
    try:
        component = pm.registries["plugin"].get(name)
    except UnknownNameError as exc:
        if not pm.skipped:
            raise
        skipped = ", ".join(f"'{package}'" for package in sorted(pm.skipped))
        raise UnknownNameError(f"{exc} Skipped plugin packages (see the warning above): {skipped}.") from None
    return component.factory()


def get_recorded_plugin(name: str, run_dir: Path | str) -> Any:
    """:func:`get_task_plugin` for the plugin a run in ``run_dir`` was trained with: a name the user never typed, so
    a missing one is said to be not installed (or left out by ``CONTRASTLAB_PLUGINS``), not mistyped."""
    try:
        return get_task_plugin(name)
    except UnknownNameError as exc:  # a third-party plugin uninstalled since, or not in the allow-list
        allow = os.environ.get("CONTRASTLAB_PLUGINS")
        why = ("is not installed here (`platform plugins` lists the installed plugin packages)" if allow is None
               else f"is not loaded: CONTRASTLAB_PLUGINS={shlex.quote(allow)} loads only the built-ins and the "
               "packages it names")
        raise UnknownNameError(f"{run_dir} was trained with plugin '{name}', which {why}; {exc}") from None
