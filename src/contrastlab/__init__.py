"""contrastlab: contrastive learning with debiased losses, as plugins.

Public API (stable)::

    import contrastlab as cl
    cl.list_losses(); cl.list_samplers(); cl.list_encoders(); cl.list_plugins()
    loss  = cl.make_loss("dcl", tau_plus=0.1)            # torch.nn.Module
    pairs = cl.make_sampler("two_view", temperature=0.5)  # torch.nn.Module
    value = loss(pairs(z1, z2))                           # z1, z2: [B, d]; mean over all 2B anchors
    value = loss(pairs(z1, z2, labels=y))                 # y: [B] long; class >= 0, -1 unlabeled
"""

from __future__ import annotations

from typing import Any

from contrastlab.losses.batch import UNLABELED, ContrastiveBatch
from contrastlab.platform.errors import (
    ConfigError,
    ContrastlabError,
    DataMissingError,
    DeviceError,
    IncompatibleError,
    UnknownNameError,
)
from contrastlab.platform.hookspecs import hookimpl
from contrastlab.platform.plugins import get_plugin_manager, registry
from contrastlab.platform.registry import HParam
from contrastlab.platform.task import ComponentSpec, EvalOptions, Section, TaskConfig, TaskPlugin

__version__ = "0.1.0"

__all__ = [
    "UNLABELED",
    "ComponentSpec",
    "ConfigError",
    "ContrastiveBatch",
    "ContrastlabError",
    "DataMissingError",
    "DeviceError",
    "EvalOptions",
    "HParam",
    "IncompatibleError",
    "Section",
    "TaskConfig",
    "TaskPlugin",
    "UnknownNameError",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "list_encoders",
    "list_losses",
    "list_plugins",
    "list_samplers",
    "loss_label_kinds",
    "make_encoder",
    "make_loss",
    "make_sampler",
]


def list_losses() -> list[str]:
    """Names of every registered loss."""
    return registry("loss").names()


def list_samplers() -> list[str]:
    """Names of every registered sampler."""
    return registry("sampler").names()


def list_encoders() -> list[str]:
    """Names of every registered encoder."""
    return registry("encoder").names()


def list_plugins() -> list[str]:
    """Names of every registered task plugin."""
    return registry("plugin").names()


def make_loss(name: str, **hparams: Any) -> Any:
    """Build the loss ``name`` (a ``torch.nn.Module``); unknown names/hyperparameters raise with the valid ones."""
    return registry("loss").create(name, **hparams)


def make_sampler(name: str, *, embed_dim: int | None = None, **hparams: Any) -> Any:
    """Build the sampler ``name`` (a ``torch.nn.Module`` returning a :class:`ContrastiveBatch`).

    ``embed_dim`` is the size ``d`` of the embeddings it will receive; every sampler takes it (the sampler
    contract), checks its inputs against it, and some need it (``query_key``'s bilinear ``W [d, d]``). Plugins
    always pass it; ``None`` leaves ``d`` open where the sampler allows.
    """
    return registry("sampler").create(name, embed_dim=embed_dim, **hparams)


def make_encoder(name: str, **kwargs: Any) -> Any:
    """Build the encoder ``name`` with its hyperparameters and shape arguments (e.g. ``in_channels``)."""
    return registry("encoder").create(name, **kwargs)


def loss_label_kinds(name: str) -> frozenset[str]:
    """Kinds of observed labels loss ``name`` needs (empty for unsupervised losses, which never see labels)."""
    return registry("loss").get(name).label_kinds
