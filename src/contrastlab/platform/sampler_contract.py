"""The sampler contract: which inputs a sampler consumes, and which a task plugin can feed.

A sampler declares the inputs it accepts as a class attribute ``accepts`` (a non-empty ``frozenset`` of the kinds
below) and takes the embedding size as the keyword ``embed_dim`` in its constructor. A task plugin declares the
inputs it can feed (:attr:`TaskPlugin.sampler_inputs <contrastlab.platform.task.TaskPlugin.sampler_inputs>`,
narrowed per config by :meth:`~contrastlab.platform.task.TaskPlugin.sampler_inputs_for`). The pre-flight check
refuses a sampler whose accepted inputs do not intersect the plugin's, and the plugin calls the sampler the way
:func:`choose_input` picks, never by its name. Every call returns a ``ContrastiveBatch``; ``labels`` is ``[B]``
long (class id ≥ 0, −1 unlabeled) or ``None``, and only label-aware losses make plugins pass it.

The kinds (in the order :func:`choose_input` prefers them):

* ``two_views``: ``sampler(z1 [B, d], z2 [B, d], labels=None)``, two views of ``B`` samples from one encoder;
* ``multi_views``: ``sampler(views, labels=None)`` with ``views`` a ``[V, B, d]`` tensor or ``V`` ``[B, d]``
  tensors, any ``V ≥ 2`` (so two views can be fed this way too);
* ``query_key``: ``sampler(queries [B, d], keys, labels=None)`` with ``keys`` one ``[B, d]`` tensor or a sequence of
  ``M ≥ 1`` of them (``M`` positives per query); the keys come from a momentum/target encoder and are detached;
  the sampler may own parameters (e.g. a bilinear ``W [embed_dim, embed_dim]``) that the plugin optimises;
* ``queue``: ``sampler(q [B, d], k [B, d], labels=None)``, ``k`` from a momentum encoder (detached); the sampler
  is stateful (it remembers keys across calls), so the plugin calls it once per optimisation step and
  checkpoints its ``state_dict``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, get_args

from contrastlab.platform.errors import ConfigError, IncompatibleError

if TYPE_CHECKING:
    from contrastlab.platform.registry import Registry

SamplerInput = Literal["two_views", "multi_views", "query_key", "queue"]
"""What a sampler consumes / a plugin feeds (see the module docstring for each call signature)."""

SAMPLER_INPUTS: tuple[SamplerInput, ...] = get_args(SamplerInput)
"""Every input kind, in the order :func:`choose_input` prefers them."""

CALLS: dict[str, str] = {
    "two_views": "sampler(z1 [B, d], z2 [B, d], labels=None)",
    "multi_views": "sampler(views [V, B, d] or V x [B, d], labels=None), V >= 2",
    "query_key": "sampler(queries [B, d], keys [B, d] or M x [B, d], labels=None), keys from a momentum encoder",
    "queue": "sampler(q [B, d], k [B, d], labels=None), k from a momentum encoder, stateful across calls",
}
"""The call signature of each input kind (for docs and ``platform list``)."""


def accepted_inputs(factory: Any) -> frozenset[str]:
    """The inputs a sampler class (or factory) declares in ``accepts``; empty when it declares none."""
    value = getattr(factory, "accepts", None)
    if isinstance(value, str):
        return frozenset({value})
    return frozenset(value or ())


def validate_accepts(factory: Any, name: str, package: str) -> frozenset[str]:
    """``accepts`` of a sampler being registered; missing, empty or unknown kinds raise a :class:`ConfigError`
    naming the package."""
    accepts = accepted_inputs(factory)
    unknown = sorted(accepts - set(SAMPLER_INPUTS))
    if not accepts or unknown:
        problem = f"unknown input kind '{unknown[0]}'" if unknown else "no inputs"
        raise ConfigError(
            f"sampler '{name}' from package '{package}' declares {problem}; set the class attribute accepts to a "
            f"frozenset of: {', '.join(SAMPLER_INPUTS)}"
        )
    return accepts


def choose_input(accepts: Iterable[str], feeds: Iterable[str]) -> SamplerInput | None:
    """The input a plugin that can feed ``feeds`` gives a sampler that accepts ``accepts``: the first kind of
    :data:`SAMPLER_INPUTS` in both, or ``None`` when they do not intersect."""
    both = set(accepts) & set(feeds)
    return next((kind for kind in SAMPLER_INPUTS if kind in both), None)


def sampler_input(plugin: str, feeds: Iterable[str], sampler: str, samplers: Registry) -> SamplerInput:
    """The input kind plugin ``plugin`` (able to feed ``feeds`` under its config) gives the registered sampler
    ``sampler``; a one-line :class:`IncompatibleError` naming both sides and the compatible samplers otherwise."""
    feeds = frozenset(feeds)
    accepts = samplers.get(sampler).accepts
    kind = choose_input(accepts, feeds)
    if kind is not None:
        return kind
    usable = [c.name for c in samplers if choose_input(c.accepts, feeds) is not None]
    raise IncompatibleError(
        f"sampler '{sampler}' consumes {_kinds(accepts)}, but plugin '{plugin}' provides {_kinds(feeds)} with this "
        f"config; compatible samplers: {', '.join(usable) or 'none registered'}"
    )



def _kinds(kinds: Iterable[str]) -> str:
    ordered = [k for k in SAMPLER_INPUTS if k in set(kinds)]
    return " or ".join(ordered) or "nothing"
