"""A resolved config as YAML with every field documented by a comment (``platform config``, configs/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from contrastlab.platform.config import COMPONENT_SECTIONS
from contrastlab.platform.plugins import registry
from contrastlab.platform.task import ComponentSpec, TaskConfig


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}".rstrip() for line in text.strip().splitlines() if line.strip()]


def _scalar_yaml(value: Any) -> str:
    dumped = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return dumped.removesuffix("\n...").removesuffix("...").strip()


def _component_lines(spec: ComponentSpec, kind: str, indent: str) -> list[str]:
    lines = [f"{indent}name: {spec.name}"]
    component = registry(kind).get(spec.name)
    for hp in component.hyperparameters:
        doc = hp.description
        if hp.range:
            doc += f"  Range: {hp.range}."
        if hp.source:
            doc += f"  Default from: {hp.source}."
        lines += _comment(doc, indent)
        lines.append(f"{indent}{hp.name}: {_scalar_yaml(spec.hparams().get(hp.name, hp.default))}")
    return lines


def _model_lines(model: BaseModel, indent: str) -> list[str]:
    lines: list[str] = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if field.description:
            lines += _comment(field.description, indent)
        if isinstance(value, ComponentSpec):
            lines.append(f"{indent}{name}:")
            lines += _component_lines(value, COMPONENT_SECTIONS.get(name, name), indent + "  ")
        elif isinstance(value, BaseModel):
            lines.append(f"{indent}{name}:")
            lines += _model_lines(value, indent + "  ")
        else:
            dumped = value.model_dump(mode="json") if isinstance(value, BaseModel) else _jsonable(value)
            lines.append(f"{indent}{name}: {_scalar_yaml(dumped)}")
    return lines


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def config_to_yaml(config: TaskConfig, header: str = "") -> str:
    """The config as YAML with every field documented by a comment (``platform config``)."""
    lines = _comment(header, "") if header else []
    lines += _model_lines(config, "")
    return "\n".join(lines) + "\n"
