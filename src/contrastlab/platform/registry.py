"""Typed registries of losses, samplers, encoders and task plugins.

A component is a class (or factory) that declares its metadata as class attributes:

* ``name``: the registry name (``"dcl"``);
* ``description``: one line (defaults to the first docstring line);
* ``hyperparameters``: a tuple of :class:`HParam` (name, default, valid range, meaning, source);
* ``label_kinds`` (losses only): the kinds of observed labels the component needs, empty when it ignores labels;
* ``accepts`` (samplers only): the inputs it consumes (:mod:`contrastlab.platform.sampler_contract`); a sampler
  must also take the keyword ``embed_dim``. Both are checked when it is registered.

Registries give clear errors with near-miss suggestions for unknown names and unknown hyperparameters.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contrastlab.platform.errors import ConfigError, UnknownNameError
from contrastlab.platform.sampler_contract import SAMPLER_INPUTS, accepted_inputs, validate_accepts


@dataclass(frozen=True)
class HParam:
    """One documented hyperparameter of a component."""

    name: str
    """Keyword argument name (fixed by DESIGN.md for the built-ins)."""
    default: Any
    """Default value; its source is given in ``source``."""
    description: str
    """What it means, in one line."""
    range: str = ""
    """Valid range in interval notation, e.g. ``[0, 1)``, or the allowed choices."""
    source: str = ""
    """Where the default comes from (paper, section, or reference code)."""
    check: Callable[[Any], bool] | None = field(default=None, compare=False, repr=False)
    """Optional predicate; a value for which it returns False is rejected with the range in the message."""

    def validate(self, value: Any, owner: str) -> None:
        """Raise :class:`ConfigError` naming the parameter and its range when ``value`` is not admissible."""
        ok = True
        if self.check is not None:
            try:
                ok = bool(self.check(value))
            except (TypeError, ValueError):
                ok = False
        if not ok:
            raise ConfigError(f"{owner}: {self.name}={value!r} is out of range; valid range: {self.range}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly description."""
        return {
            "name": self.name,
            "default": self.default,
            "range": self.range,
            "description": self.description,
            "source": self.source,
        }


def int_in(lo: int, hi: int) -> Callable[[Any], bool]:
    """A :attr:`HParam.check` accepting integers (not booleans) in ``[lo, hi]``."""
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def suggest(name: str, valid: list[str]) -> str:
    """A ``" Did you mean 'x'?"`` suffix for the closest valid name (case aside: ``DCL`` → ``dcl``), or an empty
    string."""
    lowered = {v.lower(): v for v in valid}
    close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=0.5)
    return f" Did you mean '{lowered[close[0]]}'?" if close else ""


def unknown_name_message(kind: str, name: str, valid: list[str]) -> str:
    """The one-line message for an unknown name: the valid names and the closest one."""
    return f"unknown {kind} '{name}'; valid: {', '.join(sorted(valid)) or '(none)'}.{suggest(name, valid)}"


@dataclass(frozen=True)
class Component:
    """A registered component and where it came from."""

    kind: str
    name: str
    factory: Any
    package: str
    description: str
    hyperparameters: tuple[HParam, ...] = ()

    @property
    def label_kinds(self) -> frozenset[str]:
        """Kinds of observed labels the component needs (``{"class"}``, ``{"pu"}``); empty if it ignores them."""
        return frozenset(getattr(self.factory, "label_kinds", frozenset()))

    @property
    def accepts(self) -> frozenset[str]:
        """Inputs a sampler consumes (``{"two_views"}``, ``{"query_key"}``, ...; see ``sampler_contract``)."""
        return accepted_inputs(self.factory)

    def hparam(self, name: str) -> HParam:
        """The hyperparameter called ``name``, or an error listing the valid ones."""
        for hp in self.hyperparameters:
            if hp.name == name:
                return hp
        valid = [hp.name for hp in self.hyperparameters]
        raise UnknownNameError(
            f"{self.kind} '{self.name}' has no hyperparameter '{name}'; valid: "
            f"{', '.join(valid) or '(none)'}.{suggest(name, valid)}"
        )

    def defaults(self) -> dict[str, Any]:
        """Every hyperparameter with its default value."""
        return {hp.name: hp.default for hp in self.hyperparameters}

    def resolve(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """Defaults updated with ``overrides``; unknown names and out-of-range values raise."""
        return bind_hparams(self.hyperparameters, overrides or {}, f"{self.kind} '{self.name}'")

    def create(self, **kwargs: Any) -> Any:
        """Instantiate the component with validated hyperparameters (extra non-hyperparameter kwargs pass through
        only if the factory accepts them, e.g. ``in_channels`` for encoders)."""
        names = {hp.name for hp in self.hyperparameters}
        hparams = {k: v for k, v in kwargs.items() if k in names}
        extra = {k: v for k, v in kwargs.items() if k not in names}
        if extra:
            accepted = _accepted_kwargs(self.factory)
            unknown = [k for k in extra if accepted is not None and k not in accepted]
            if unknown:
                self.hparam(unknown[0])  # raises with the valid names
        return self.factory(**self.resolve(hparams), **extra)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly description (used by ``platform list --json``)."""
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "package": self.package,
            "description": self.description,
            "hyperparameters": [hp.as_dict() for hp in self.hyperparameters],
        }
        if self.kind == "loss":
            out["label_kinds"] = sorted(self.label_kinds)
        if self.kind == "sampler":
            out["accepts"] = [k for k in SAMPLER_INPUTS if k in self.accepts]
        return out


def bind_hparams(specs: Sequence[HParam], given: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """The one hyperparameter check of every component (registry, losses, samplers, third-party ones).

    Unknown names raise :class:`UnknownNameError` listing the valid ones and the closest; values are coerced to
    the default's type (``"0.1"`` from the command line becomes ``0.1``); out-of-range values raise
    :class:`ConfigError` with the range. Returns every hyperparameter's value (defaults filled in).
    """
    valid = [hp.name for hp in specs]
    for key in given:
        if key not in valid:
            raise UnknownNameError(
                f"{owner} has no hyperparameter '{key}'; valid: {', '.join(valid) or '(none)'}.{suggest(key, valid)}"
            )
    values: dict[str, Any] = {}
    for hp in specs:
        value = _coerce_like(hp.default, given[hp.name], owner, hp.name) if hp.name in given else hp.default
        hp.validate(value, owner)
        values[hp.name] = value
    return values


def _accepted_kwargs(factory: Any) -> set[str] | None:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params}


def _validate_sampler_contract(factory: Any, name: str, package: str) -> None:
    """A sampler declares what it consumes (``accepts``) and takes ``embed_dim``; else a :class:`ConfigError`."""
    validate_accepts(factory, name, package)
    accepted = _accepted_kwargs(factory)
    if accepted is not None and "embed_dim" not in accepted:
        raise ConfigError(
            f"sampler '{name}' from package '{package}' must accept the keyword argument embed_dim (the size d of "
            "the embeddings it receives; accept and ignore it if unused)"
        )


def _validate_plugin_contract(factory: Any, name: str, package: str) -> None:
    """A task plugin is a :class:`TaskPlugin` subclass whose ``config_model`` is a :class:`TaskConfig` subclass and
    whose presets hold its default preset and GPU-sized presets; else a :class:`ConfigError` naming the package."""
    from contrastlab.platform.task import TaskConfig, TaskPlugin  # task imports nothing of ours: no cycle

    where = f"plugin '{name}' from package '{package}'"
    if not (isinstance(factory, type) and issubclass(factory, TaskPlugin)):
        label = getattr(factory, "__name__", repr(factory))
        raise ConfigError(f"{where}: {label} is not a subclass of contrastlab.TaskPlugin")
    model = factory.config_model
    if not (isinstance(model, type) and issubclass(model, TaskConfig)):
        label = getattr(model, "__name__", repr(model))
        raise ConfigError(f"{where}: config_model {label} is not a subclass of contrastlab.TaskConfig")
    presets = factory.presets
    if not isinstance(presets, dict) or not all(isinstance(v, dict) for v in presets.values()):
        raise ConfigError(f"{where}: presets must be a dict of preset name -> dict of overrides")
    listed = ", ".join(presets) or "none"
    if factory.default_preset not in presets:
        raise ConfigError(f"{where}: its default preset '{factory.default_preset}' is not in its presets ({listed})")
    missing = sorted(set(factory.gpu_presets) - set(presets))
    if missing:
        raise ConfigError(f"{where}: gpu_presets names {', '.join(missing)}, not in its presets ({listed})")


def _coerce_like(default: Any, value: Any, owner: str, key: str) -> Any:
    """Coerce strings from the command line to the type of the default (bool/int/float), else keep the value."""
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                low = value.strip().lower()
                if low in {"true", "1", "yes", "on"}:
                    return True
                if low in {"false", "0", "no", "off"}:
                    return False
                raise ValueError(value)
            if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
                return bool(value)
            raise ValueError(value)  # 2.5 or "" is not a yes/no (bool(2.5) would silently be True)
        if isinstance(value, bool) and isinstance(default, (int, float)):
            raise ValueError(value)
        if isinstance(default, int) and not isinstance(value, bool):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if isinstance(default, float) and not isinstance(value, bool):
            return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{owner}: {key}={value!r} is not a valid {type(default).__name__}") from None
    return value


def _first_doc_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


class Registry:
    """Name → :class:`Component` for one kind of component (``loss``, ``sampler``, ``encoder``, ``plugin``)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, Component] = {}

    def add(
        self,
        factory: Any,
        *,
        package: str,
        name: str | None = None,
        description: str | None = None,
        hyperparameters: tuple[HParam, ...] | None = None,
    ) -> Component:
        """Register ``factory``; a name already taken is an error naming both packages."""
        name = name or getattr(factory, "name", None)
        if not name or not isinstance(name, str):
            raise ConfigError(f"{self.kind} {factory!r} from package '{package}' has no name")
        if name in self._items:
            other = self._items[name].package
            raise ConfigError(
                f"{self.kind} '{name}' is registered twice: by package '{other}' and by package '{package}'"
            )
        if self.kind == "sampler":
            _validate_sampler_contract(factory, name, package)
        elif self.kind == "plugin":
            _validate_plugin_contract(factory, name, package)
        comp = Component(
            kind=self.kind,
            name=name,
            factory=factory,
            package=package,
            description=description or getattr(factory, "description", None) or _first_doc_line(factory),
            hyperparameters=tuple(
                hyperparameters if hyperparameters is not None else getattr(factory, "hyperparameters", ())
            ),
        )
        self._items[name] = comp
        return comp

    def get(self, name: str) -> Component:
        """The component called ``name``; unknown names raise with the valid names and a suggestion."""
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(unknown_name_message(self.kind, name, list(self._items))) from None

    def create(self, name: str, **kwargs: Any) -> Any:
        """Instantiate ``name`` with validated hyperparameters."""
        return self.get(name).create(**kwargs)

    def owners_hint(self, component: Component, given: Mapping[str, Any]) -> str:
        """`` Losses with tau_plus: dcl, hcl (choose one with --loss).`` for the first of ``given`` that
        ``component`` lacks, or ``""`` when no component of this registry has it either."""
        own = {hp.name for hp in component.hyperparameters}
        key = next((k for k in given if k not in own), None)
        owners = self.having(key) if key is not None else []
        if not owners:
            return ""
        kinds = f"{self.kind.capitalize()}{'es' if self.kind.endswith('s') else 's'}"
        # every command has --loss; only train and config have --sampler/--encoder, compare and tune take --set
        flag = "--loss" if self.kind == "loss" else f"--set {self.kind}.name=NAME"
        return f" {kinds} with {key}: {', '.join(owners)} (choose one with {flag})."

    def having(self, hparam: str) -> list[str]:
        """Names of the registered components with a hyperparameter called ``hparam``, sorted."""
        return [c.name for c in self if any(hp.name == hparam for hp in c.hyperparameters)]

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[Component]:
        return iter(self._items[n] for n in self.names())

    def __len__(self) -> int:
        return len(self._items)
