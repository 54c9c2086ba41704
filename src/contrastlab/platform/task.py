"""What a task plugin is: :class:`TaskPlugin` and the typed config base classes it builds on.

A task plugin owns a whole experiment (a training loop and its evaluation). It declares:

* ``name`` and ``description``;
* ``config_model``: a subclass of :class:`TaskConfig` with a docstring on every field;
* ``presets``: named overrides of the config defaults, at least ``smoke`` (CPU, a few minutes);
* :meth:`TaskPlugin.label_kinds`: which observed labels its batches can carry, so incompatible losses are
  refused before training (by the one pre-flight check, :func:`contrastlab.platform.preflight.preflight`);
* :meth:`TaskPlugin.train` and :meth:`TaskPlugin.evaluate`.

``TaskPlugin`` is generic over its config: ``class MyTask(TaskPlugin[MyConfig])`` types ``train``, ``check``
and friends with ``MyConfig`` instead of ``TaskConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from contrastlab.platform.run import Run

MAX_WIDTH = 65_536
"""Largest hidden/projection layer width a config or encoder accepts: a mistyped huge one fails at once, before a
run allocates it."""


class Section(BaseModel):
    """Base class of a config section: unknown keys are errors, attribute docstrings become field docs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


class ComponentSpec(BaseModel):
    """A registered component chosen by name, with its hyperparameters as extra keys.

    Example: ``{"name": "dcl", "tau_plus": 0.1}``. The hyperparameters are checked against the registry.
    """

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    name: str
    """Registry name of the component (see ``platform list``)."""

    def hparams(self) -> dict[str, Any]:
        """The hyperparameters (every key except ``name``)."""
        return dict(self.model_extra or {})


class TaskConfig(Section):
    """Settings shared by every task plugin. Plugins subclass this and add their own sections."""

    seed: int = Field(default=1, ge=0, lt=2**32)
    """Random seed for torch, numpy and Python; the same seed and config reproduce a CPU run."""
    device: str = "auto"
    """Device: auto (CUDA when available, else CPU), cpu, cuda, or cuda:K."""
    loss: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="infonce"))
    """Contrastive loss: registry name plus its hyperparameters (see ``platform list losses``)."""
    sampler: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="two_view"))
    """Sampler that builds logits from embeddings (see ``platform list samplers``)."""
    encoder: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="mlp"))
    """Encoder network (see ``platform list encoders``)."""
    checkpoint_every: int = Field(default=1000, ge=1)
    """Save a checkpoint every this many training steps (in the plugin's step unit); always at the end."""
    keep_checkpoints: int = Field(default=2, ge=1)
    """Keep only the newest this many checkpoints (older ones are deleted; 1 = only the latest, the least disk)."""


@dataclass
class EvalOptions:
    """Options of ``platform eval`` passed to :meth:`TaskPlugin.evaluate`."""

    episodes: int | None = None
    """Evaluation episodes (RL plugins); ``None`` uses the config's value."""
    video: Path | None = None
    """Where to save a GIF/MP4 of one evaluation episode (RL plugins), or ``None``."""


C = TypeVar("C", bound=TaskConfig)
"""The plugin's config type."""


class TaskPlugin(Generic[C]):
    """Base class of task plugins. Subclass it as ``TaskPlugin[MyConfig]``, fill the class attributes, implement
    ``train``/``evaluate``."""

    name: ClassVar[str] = ""
    """Registry name, used as ``--plugin NAME``."""
    description: ClassVar[str] = ""
    """One line shown by ``platform list plugins``."""
    config_model: ClassVar[type[Any]] = TaskConfig
    """Typed config with a docstring on every field."""
    presets: ClassVar[dict[str, dict[str, Any]]] = {"smoke": {}}
    """Named nested overrides of the config defaults; must contain ``smoke``."""
    default_preset: ClassVar[str] = "smoke"
    """Preset used when ``--preset`` is not given."""
    gpu_presets: ClassVar[frozenset[str]] = frozenset()
    """Presets sized for a GPU: on a CPU-only machine ``platform train`` warns and suggests ``--preset smoke``."""
    sampler_inputs: ClassVar[frozenset[str] | None] = None
    """Sampler inputs this plugin can feed (``two_views``, ``multi_views``, ``query_key``, ``queue``; see
    :mod:`contrastlab.platform.sampler_contract`); a sampler accepting none of them is refused before training.
    ``None``: the plugin does not use the config's sampler through the contract (nothing is checked)."""
    encoders: ClassVar[frozenset[str] | None] = None
    """Encoder names this plugin can build (``None``: any registered encoder); others are refused before training."""
    primary_metric: ClassVar[str] = ""
    """Name of the headline final metric in ``summary.json`` (used by ``platform compare``)."""
    higher_is_better: ClassVar[bool] = True
    """Whether a larger primary metric is better."""
    checkpoint_on_stop: ClassVar[bool] = False
    """Whether the first Ctrl-C/SIGTERM of ``platform train`` may save a checkpoint at the next
    ``run.checkpoint_due`` call and then stop (:mod:`contrastlab.platform.stopping`): set it when every such call is
    a point where a checkpoint resumes as faithfully as your periodic ones (nothing accumulated in memory is lost:
    keep per-step statistics in a :class:`~contrastlab.platform.logwindow.LogWindow` saved with the checkpoint; run
    an evaluation due at that step before it). ``contrastlab.testing.check_stop_and_resume`` tests it."""

    eval_options: ClassVar[frozenset[str]] = frozenset()
    """The :class:`EvalOptions` fields :meth:`evaluate` uses (``episodes``, ``video``); ``platform eval`` says when
    one given is ignored."""

    def check_eval(self, options: EvalOptions) -> None:
        """Refuse bad ``platform eval`` options (one-line errors) before any checkpoint is loaded; default: none."""

    def label_kinds(self, config: C) -> frozenset[str]:
        """Kinds of observed labels this plugin's batches can carry under ``config`` (``{"class"}``, ``{"pu"}``).

        The pre-flight check refuses a label-aware loss whose ``label_kinds`` do not intersect this set.
        """
        return frozenset()

    def label_hint(self, config: C, needed: frozenset[str]) -> str | None:
        """How to fix a refused label-aware loss under ``config`` (e.g. ``set --set data.labels=class``), or
        ``None`` for the generic advice to choose an unsupervised loss."""
        return None

    def check(self, config: C) -> None:
        """Pre-flight checks before any training (data present, renderer available, ...).

        Raise a :class:`~contrastlab.platform.errors.ContrastlabError` with a one-line message on failure.
        """

    def prepare_config(self, config: C, explicit_keys: frozenset[str]) -> C:
        """Adjust a validated config before component hyperparameters are filled in.

        ``explicit_keys`` holds the dotted keys set by the preset, the config file or ``--set``; use it for
        data-dependent defaults (e.g. ``loss.tau_plus = 1/C`` unless the user set it). Return the config.
        """
        return config

    def logged_metrics(self, config: C) -> tuple[str, ...]:
        """Tags of the curves that :meth:`train` logs through ``Run.log`` under ``config`` (its evaluation
        metrics and ``train/loss``-like tags; per-component statistics may be left out). ``platform tune --prune-on``
        refuses a tag outside this list; the default, empty, means "unknown" and accepts any tag."""
        return ()

    def uses_loss(self, config: C) -> bool:
        """Whether training under ``config`` uses its loss (``False`` e.g. for pu's end-to-end baseline). A config
        without one is the same run whatever ``--loss`` says: ``platform compare`` runs it once per seed, not
        once per loss, and ``platform report`` lists it under loss ``none`` (``summary.json``: ``loss_used``)."""
        return True

    def estimate_seconds(self, config: C, device: str) -> float | None:
        """Rough wall time of ``train`` on ``device`` (for the CPU warning), or ``None`` if unknown."""
        return None

    def train(self, config: C, run: Run) -> dict[str, float]:
        """Train under ``run`` (logging, checkpoints, progress) and return the final metrics."""
        raise NotImplementedError

    def evaluate(self, run: Run, options: EvalOptions) -> dict[str, float]:
        """Re-evaluate the latest checkpoint of ``run`` and return the metrics."""
        raise NotImplementedError

    def sampler_inputs_for(self, config: C) -> frozenset[str] | None:
        """The sampler inputs this plugin feeds under ``config`` (default: :attr:`sampler_inputs`); override to
        narrow them by config (e.g. only ``multi_views`` with more than two views). The pre-flight check refuses a
        sampler whose ``accepts`` does not intersect this set, and the plugin calls the sampler as
        :func:`~contrastlab.platform.sampler_contract.choose_input` picks."""
        return self.sampler_inputs
