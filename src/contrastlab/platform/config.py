"""Typed configs: presets, YAML files and ``--set`` overrides, validated before anything runs.

Resolution order (later wins): the plugin's config defaults → ``--preset`` → ``--config FILE`` →
``--loss/--sampler/--encoder/--seed/--device`` flags → ``--set a.b=v``. Changing a component's name through a
flag (or a ``--set loss.name=...``) drops the hyperparameters that were meant for the previous component; those
given by an earlier ``--set`` of the same command are kept. Component hyperparameters are then filled with their
registered defaults and range-checked, so the resolved config is complete and explicit. Number fields refuse
``true``/``false``, float fields ``inf`` and ``nan``, and the device must read auto, cpu, cuda or cuda:K.
"""

from __future__ import annotations

import copy
import math
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from contrastlab.platform.devices import check_device
from contrastlab.platform.errors import ConfigError, UnknownNameError
from contrastlab.platform.plugins import registry
from contrastlab.platform.registry import Component, suggest, unknown_name_message
from contrastlab.platform.task import ComponentSpec, TaskConfig, TaskPlugin

COMPONENT_SECTIONS = {"loss": "loss", "sampler": "sampler", "encoder": "encoder"}


def split_assignment(item: str, option: str = "--set") -> tuple[str, str]:
    """The one ``KEY=VALUE`` parser (``--set``, ``--grid``, recipes): ``(dotted key, raw value text)``.

    A missing ``=``, an empty key or an empty path segment (``a..b``) raise :class:`ConfigError` naming ``option``.
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep:
        raise ConfigError(f"{option} expects KEY=VALUE (e.g. loss.tau_plus=0.1), got '{item}'")
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"{option} '{item}': bad key '{key}' (an empty part); expected a path like loss.tau_plus")
    return key, raw.strip()


def parse_set(item: str) -> tuple[list[str], Any]:
    """Parse ``a.b=value`` into (``["a", "b"]``, value); the value is read as YAML (numbers, bools, lists)."""
    key, raw = split_assignment(item)
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def set_path(data: dict[str, Any], path: list[str], value: Any) -> None:
    """Set ``data[p0][p1]... = value``, creating intermediate mappings."""
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A new mapping: ``base`` recursively updated with ``override`` (neither input is shared or mutated)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_yaml_file(path: Path | str) -> dict[str, Any]:
    """Read a YAML config file; missing, malformed or non-mapping files raise :class:`ConfigError`."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {path} is a directory; give a YAML file (see `platform config`)")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not a text (UTF-8) file") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"malformed YAML in {path}{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must contain a mapping of keys, not {type(data).__name__}")
    return data


def flatten_items(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{dotted path: leaf value}`` of a nested mapping (an empty mapping counts as a leaf)."""
    items: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            items.update(flatten_items(value, f"{path}."))
        else:
            items[path] = value
    return items


def flatten_keys(data: Mapping[str, Any]) -> set[str]:
    """Dotted paths of every leaf in a nested mapping."""
    return set(flatten_items(data))


def _model_for_path(model: type[BaseModel], path: tuple[Any, ...]) -> type[BaseModel] | None:
    for part in path:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            return None
    return model


def validation_message(exc: ValidationError, model: type[BaseModel]) -> str:
    """Turn the first pydantic error into one line naming the key and the valid keys/values."""
    return _error_message(exc.errors()[0], model)


def _error_message(err: Mapping[str, Any], model: type[BaseModel]) -> str:
    """One line for one pydantic error (an item of ``ValidationError.errors()``)."""
    loc = tuple(err.get("loc", ()))
    dotted = ".".join(str(p) for p in loc)
    if err.get("type") == "extra_forbidden":
        parent = _model_for_path(model, loc[:-1])
        valid = sorted(parent.model_fields) if parent is not None else []
        where = f" in '{'.'.join(str(p) for p in loc[:-1])}'" if len(loc) > 1 else ""
        hint = (_section_hint(str(loc[0]), model) if len(loc) == 1 else "") or suggest(str(loc[-1]), valid)
        return f"unknown config key '{dotted}'; valid keys{where}: {', '.join(valid)}.{hint}"
    value, msg = err.get("input"), str(err.get("msg", "invalid"))
    if err.get("type") == "value_error":  # a model's own check (a validator) words its message itself
        msg = msg.removeprefix("Value error, ")
        if isinstance(value, Mapping):  # a section's check (model_validator)
            return f"invalid config section {dotted}: {msg}"
    return f"invalid config value {dotted}={value!r}: {msg}"


def _section_hint(key: str, model: type[BaseModel]) -> str:
    """`` Did you mean 'loss.tau_plus'?`` for a top-level key that is a section's (``--set tau_plus=0.1``,
    ``--set epochs=5``): a field of a config section or a hyperparameter of a registered component; else empty."""
    places = [f"{name}.{key}" for name, field in model.model_fields.items()
              if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
              and key in field.annotation.model_fields]  # fmt: skip
    places += [f"{section}.{key}" for section, kind in COMPONENT_SECTIONS.items() if registry(kind).having(key)]
    return f" Did you mean {' or '.join(repr(p) for p in places)}?" if places else ""


def _number_kind(annotation: Any) -> tuple[str, bool] | None:
    """``("int" | "float", is_list)`` for a field holding a number, an optional number or a list of numbers (each
    possibly constrained: ``Annotated[float, Field(gt=0)]``)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            return None
        annotation = args[0]
    is_list = typing.get_origin(annotation) in (list, tuple, set, frozenset)
    if is_list:
        args = typing.get_args(annotation)
        if len(args) != 1:
            return None
        annotation = args[0]
    if typing.get_origin(annotation) is typing.Annotated:  # a list item's constraints (graph's eval.c_grid)
        annotation = typing.get_args(annotation)[0]
    if annotation is int or annotation is float:
        return annotation.__name__, is_list
    return None


def _check_number(dotted: str, value: Any, kind: str) -> None:
    if isinstance(value, bool):  # pydantic's lax mode reads true/false as 1/0
        raise ConfigError(f"invalid config value {dotted}={value!r}: expected a number, not true/false")
    if kind == "float" and isinstance(value, (int, float, str)):
        try:
            number = float(value)
        except ValueError:
            return  # not a number at all: the model's own validation says so
        if not math.isfinite(number):
            raise ConfigError(f"invalid config value {dotted}={value!r}: must be a finite number")


def check_numbers(data: Mapping[str, Any], model: type[BaseModel], prefix: str = "") -> None:
    """Refuse what the typed model would silently accept in a number field: ``true``/``false`` (read as 1/0) and,
    in a float field, ``inf`` or ``nan`` (a learning rate of inf passes ``gt=0`` and trains on NaNs). Component
    hyperparameters are the registry's to check (:func:`~contrastlab.platform.registry.bind_hparams`)."""
    for key, value in data.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue  # unknown keys: the model's validation names them
        annotation, dotted = field.annotation, f"{prefix}{key}"
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if not issubclass(annotation, ComponentSpec) and isinstance(value, Mapping):
                check_numbers(value, annotation, f"{dotted}.")
            continue
        number = _number_kind(annotation)
        if number is None:
            continue
        kind, is_list = number
        if is_list and isinstance(value, (list, tuple)):
            for item in value:
                _check_number(dotted, item, kind)
        elif not is_list:
            _check_number(dotted, value, kind)


def _validate(model: type[TaskConfig], data: Mapping[str, Any]) -> TaskConfig:
    """``model.model_validate(data)`` with :func:`check_numbers` first and one-line :class:`ConfigError`\\ s."""
    check_numbers(data, model)
    check_device(data.get("device"))
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, model)) from None


def _reset_component(data: dict[str, Any], section: str, name: str | None) -> None:
    if name is None:
        return
    current = data.get(section)
    if isinstance(current, dict) and current.get("name") == name:
        return
    data[section] = {"name": name}


def _fill_component_names(data: dict[str, Any], model: type[TaskConfig]) -> None:
    """``--set encoder.num_filters=8`` without a name refers to the config's default component."""
    for section in COMPONENT_SECTIONS:
        spec = data.get(section)
        field = model.model_fields.get(section)
        if isinstance(spec, dict) and "name" not in spec and field is not None:
            default = field.get_default(call_default_factory=True)
            if isinstance(default, ComponentSpec):
                data[section] = {"name": default.name, **default.hparams(), **spec}


def explicit_keys(data: Mapping[str, Any]) -> set[str]:
    """The dotted keys a config mapping sets. A component hyperparameter counts as set whatever its value:
    ``loss.tau_plus={a: 1}`` sets ``loss.tau_plus`` (not ``loss.tau_plus.a``), so a plugin's ``prepare_config``,
    which fills a hyperparameter the user did not set, leaves it for the registry to refuse instead of replacing
    it silently."""
    keys = flatten_keys(data)
    for section in COMPONENT_SECTIONS:
        spec = data.get(section)
        if isinstance(spec, Mapping):
            keys.update(f"{section}.{key}" for key in spec)
    return keys


def resolve_components(config: TaskConfig) -> TaskConfig:
    """Check component names and fill/validate their hyperparameters from the registries."""
    for section, kind in COMPONENT_SECTIONS.items():
        spec: ComponentSpec = getattr(config, section)
        component = registry(kind).get(spec.name)
        try:
            values = component.resolve(spec.hparams())
        except UnknownNameError as exc:  # a hyperparameter of another component: name the ones that have it
            hint = registry(kind).owners_hint(component, spec.hparams())
            raise UnknownNameError(f"{exc}{hint}{_other_section_hint(config, section, component)}") from None
        setattr(config, section, ComponentSpec(name=spec.name, **values))
    return config


def _other_section_hint(config: TaskConfig, section: str, component: Component) -> str:
    """`` The sampler 'query_key' has temperature: --set sampler.temperature=VALUE.`` when the first hyperparameter
    given to ``section`` that ``component`` lacks belongs to the component configured in another section (the
    contrastive temperature is the sampler's, not the loss's); ``""`` otherwise."""
    own = {hp.name for hp in component.hyperparameters}
    key = next((k for k in getattr(config, section).hparams() if k not in own), None)
    for other, kind in COMPONENT_SECTIONS.items():
        name = getattr(config, other).name
        if key is None or other == section or name not in registry(kind):
            continue
        if any(hp.name == key for hp in registry(kind).get(name).hyperparameters):
            return f" The {kind} '{name}' has {key}: --set {other}.{key}=VALUE."
    return ""


def _check_part(plugin: TaskPlugin, data: Mapping[str, Any], where: str) -> None:
    """Name the source of an unknown key or bad value found in one part of the config (a plugin's preset, a
    ``--config`` file), rather than report it as if typed on the command line. Only errors at a key count: a field
    left to the defaults, or a check of a whole section or of several, is left to the full config's validation."""
    try:
        plugin.config_model.model_validate(dict(data))
    except ValidationError as exc:
        errors = [
            e for e in exc.errors()
            if e.get("type") == "extra_forbidden"
            or (e.get("type") != "missing" and e.get("loc") and not isinstance(e.get("input"), Mapping))
        ]  # fmt: skip
        if errors:
            raise ConfigError(f"{where}: {_error_message(errors[0], plugin.config_model)}") from None


def resolve_config(
    plugin: TaskPlugin,
    *,
    preset: str | None = None,
    config_file: Path | str | None = None,
    sets: Iterable[str] = (),
    loss: str | None = None,
    sampler: str | None = None,
    encoder: str | None = None,
    seed: int | None = None,
    device: str | None = None,
) -> TaskConfig:
    """The fully resolved, validated config of ``plugin`` (see the module docstring for the order)."""
    preset = plugin.default_preset if preset is None else preset  # "" is a name too: refused below
    if preset not in plugin.presets:
        raise UnknownNameError(unknown_name_message(f"{plugin.name} preset", preset, list(plugin.presets)))
    data: dict[str, Any] = deep_merge({}, plugin.presets[preset])
    own = "the plugin's own settings, not this command"
    _check_part(plugin, data, f"plugin '{plugin.name}', preset '{preset}' ({own})")
    if config_file is not None:
        file_data = load_yaml_file(config_file)
        _check_part(plugin, file_data, f"--config {config_file}")
        for section in COMPONENT_SECTIONS:
            name = file_data.get(section, {}).get("name") if isinstance(file_data.get(section), dict) else None
            _reset_component(data, section, name)
        data = deep_merge(data, file_data)
    for section, name in (("loss", loss), ("sampler", sampler), ("encoder", encoder)):
        _reset_component(data, section, name)
    if seed is not None:
        data["seed"] = seed
    if device is not None:
        data["device"] = device
    flags = {"loss": loss, "sampler": sampler, "encoder": encoder, "seed": seed, "device": device}
    given: dict[str, dict[str, Any]] = {section: {} for section in COMPONENT_SECTIONS}  # hparams set by --set
    for item in sets:
        path, value = parse_set(item)
        flag = flags.get(path[0])
        if flag is not None and (path[0] in ("seed", "device") or path[1:] in ([], ["name"])) and value != flag:
            raise ConfigError(f"--set {'.'.join(path)} conflicts with --{path[0]} {flag}; give one of them")
        if path[0] in COMPONENT_SECTIONS and path[1:] == ["name"]:
            _reset_component(data, path[0], str(value))
            # an earlier --set of this command is kept: `--set loss.tau_plus=0.2 --set loss.name=dcl` means dcl
            # with 0.2 (it was silently dropped), and is refused by a component without that hyperparameter
            data[path[0]].update(copy.deepcopy(given[path[0]]))
        elif path[0] in COMPONENT_SECTIONS and len(path) == 2:
            given[path[0]][path[1]] = value
        elif path[0] in COMPONENT_SECTIONS and len(path) == 1:
            given[path[0]] = {}  # the whole section replaced: `--set loss={name: dcl}`
        set_path(data, path, value)
    explicit = explicit_keys(data)
    model = plugin.config_model
    _fill_component_names(data, model)
    config = _validate(model, data)
    config = plugin.prepare_config(config, frozenset(explicit))
    return resolve_components(config)


def config_from_dict(plugin: TaskPlugin, data: Mapping[str, Any]) -> TaskConfig:
    """Validate an already resolved config (e.g. a run's ``config.yaml``)."""
    return resolve_components(_validate(plugin.config_model, data))


def config_to_dict(config: TaskConfig) -> dict[str, Any]:
    """Plain JSON/YAML-serialisable dict of the config (component hyperparameters included)."""
    return config.model_dump(mode="json")
