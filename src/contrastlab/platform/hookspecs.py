"""The extension contract of contrastlab: every hook a plugin package may implement.

Implement any of these in a module and expose it through the entry-point group ``contrastlab``::

    [project.entry-points.contrastlab]
    my_plugin = "my_package.plugin"

    # my_package/plugin.py
    import contrastlab as cl

    @cl.hookimpl
    def register_losses(register):
        register(MyLoss)

The built-in losses, samplers, encoders and task plugins are registered through these same hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

PROJECT = "contrastlab"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Register = Callable[..., Any]
"""``register(component, *, name=None, description=None, hyperparameters=None)``."""


@hookspec
def register_losses(register: Register) -> None:
    """Register contrastive losses: ``register(LossClass)``.

    A loss class is a ``torch.nn.Module`` whose ``forward(batch: ContrastiveBatch) -> Tensor`` returns the mean
    loss, with class attributes ``name``, ``description``, ``hyperparameters`` (tuple of ``HParam``) and
    ``label_kinds`` (``frozenset()`` for unsupervised losses, ``{"class"}`` / ``{"pu"}`` for label-aware ones).
    """


@hookspec
def register_samplers(register: Register) -> None:
    """Register samplers: modules turning embeddings into a ``ContrastiveBatch``: ``register(SamplerClass)``.

    The sampler contract (:mod:`contrastlab.platform.sampler_contract`): the class declares ``name``,
    ``description``, ``hyperparameters`` and ``accepts``, a non-empty ``frozenset`` of the inputs its ``forward``
    consumes: ``two_views`` ``(z1 [B, d], z2 [B, d], labels=None)``; ``multi_views`` ``(views [V, B, d],
    labels=None)``; ``query_key`` ``(queries [B, d], keys [B, d] | M × [B, d], labels=None)`` with keys from a
    momentum encoder; ``queue`` ``(q [B, d], k [B, d], labels=None)``, stateful. Its constructor takes the
    embedding size as the keyword ``embed_dim``. Task plugins call it through ``accepts``, never by name, so it
    runs in every plugin that feeds one of its inputs; registration refuses a sampler that breaks the contract.
    Subclass ``contrastlab.samplers.Sampler`` to get the validation and ``embed_dim`` handling.
    """


@hookspec
def register_encoders(register: Register) -> None:
    """Register encoders: ``torch.nn.Module`` factories mapping inputs to embeddings: ``register(EncoderClass)``."""


@hookspec
def register_plugins(register: Register) -> None:
    """Register task plugins (subclasses of ``contrastlab.TaskPlugin``): ``register(MyTask)``."""


@hookspec
def register_commands(app: Any) -> None:
    """Add commands to the ``platform`` Typer app: ``@app.command() def hello(): ...``."""
