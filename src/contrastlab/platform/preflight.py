"""The one pre-flight check, run before anything is written or trained.

:func:`preflight` runs from :meth:`Run.create <contrastlab.platform.run.Run.create>` and
:meth:`Run.open <contrastlab.platform.run.Run.open>`, so the Python API, ``platform train``, ``platform eval`` and
``platform compare`` all refuse the same bad input with the same one-line errors:

1. the sampler must consume an input the plugin feeds (its declared ``accepts``), the encoder one the plugin can
   build;
2. a label-aware loss (``supcon``, ``punce``, ``unbiased``) needs labels of a kind the plugin's batches carry
   under this config (:meth:`TaskPlugin.label_kinds`); the plugin may add how to fix it
   (:meth:`TaskPlugin.label_hint`);
3. the plugin's own checks (:meth:`TaskPlugin.check`: data present, renderer available, value ranges).

Hyperparameter names and ranges were already checked when the config was resolved (``platform.config``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contrastlab.platform.errors import IncompatibleError
from contrastlab.platform.plugins import registry
from contrastlab.platform.registry import Registry
from contrastlab.platform.sampler_contract import SamplerInput, sampler_input
from contrastlab.platform.task import TaskConfig, TaskPlugin


def check_sampler(plugin: TaskPlugin, config: TaskConfig, samplers: Registry | None = None) -> SamplerInput | None:
    """The pre-flight check of the contract: the input ``plugin`` will feed the config's sampler, or a one-line
    :class:`IncompatibleError`; ``None`` when the plugin declares no sampler inputs (nothing to check).
    ``samplers`` defaults to the current sampler registry."""
    feeds = plugin.sampler_inputs_for(config)
    if feeds is None:
        return None
    if samplers is None:
        samplers = registry("sampler")
    return sampler_input(plugin.name, feeds, config.sampler.name, samplers)


def check_components(plugin: TaskPlugin[Any], config: TaskConfig) -> None:
    """Refuse a sampler that consumes none of the inputs the plugin feeds (the sampler contract,
    :mod:`contrastlab.platform.sampler_contract`) or an encoder the plugin cannot build (one-line
    :class:`IncompatibleError`)."""
    check_sampler(plugin, config)
    name, allowed = config.encoder.name, plugin.encoders
    if allowed is not None and name not in allowed:
        raise IncompatibleError(
            f"plugin '{plugin.name}' cannot use encoder '{name}'; supported: {', '.join(sorted(allowed))}"
        )


def unsupervised_losses(refused: Iterable[str] = ()) -> list[str]:
    """Names of the registered losses that need no labels, those in ``refused`` (the ones a plugin refuses under
    its config) left out: the list a label hint suggests instead of a label-aware loss."""
    losses, skip = registry("loss"), set(refused)
    return [n for n in losses.names() if not losses.get(n).label_kinds and n not in skip]


def check_labels(plugin: TaskPlugin[Any], config: TaskConfig) -> None:
    """Refuse a label-aware loss whose label kinds the plugin's batches cannot carry under ``config``."""
    needed = registry("loss").get(config.loss.name).label_kinds
    if not needed:
        return
    available = plugin.label_kinds(config)
    if needed & available:
        return
    have = ", ".join(sorted(available)) or "no labels"
    hint = plugin.label_hint(config, needed)
    if not hint:
        hint = f"choose an unsupervised loss ({', '.join(unsupervised_losses())})"
        losses = registry("loss")
        usable = [n for n in losses.names() if losses.get(n).label_kinds & available]  # label-aware ones it can feed
        hint += f", or one that uses its {have} labels ({', '.join(usable)})" if usable else ""
    raise IncompatibleError(
        f"loss '{config.loss.name}' needs {' or '.join(sorted(needed))} labels, but plugin '{plugin.name}' "
        f"provides {have} with this config; {hint}"
    )


def preflight(plugin: TaskPlugin[Any], config: TaskConfig) -> None:
    """Every check that must pass before a run is created or continued; raises one-line
    :class:`~contrastlab.platform.errors.ContrastlabError`\\ s."""
    check_components(plugin, config)
    check_labels(plugin, config)
    plugin.check(config)
