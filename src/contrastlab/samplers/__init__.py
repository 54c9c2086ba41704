"""Built-in samplers (registered through the `register_samplers` hook like any plugin package).

A sampler is an ``nn.Module`` that turns embeddings (and optional observed labels) into a
:class:`~contrastlab.losses.batch.ContrastiveBatch`: ``two_view`` and ``multi_view`` (SimCLR), ``query_key``
(CURL) and ``queue`` (MoCo). Under ``torch.distributed`` each one gathers from all ranks.

Each declares the inputs it consumes in ``accepts`` and takes ``embed_dim`` (the contract,
:mod:`contrastlab.platform.sampler_contract`); subclass :class:`Sampler` to write one.
"""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl
from contrastlab.platform.sampler_contract import SAMPLER_INPUTS, SamplerInput, choose_input
from contrastlab.samplers.base import Sampler, feed_views
from contrastlab.samplers.multi_view import MultiViewSampler, TwoViewSampler, build_multi_view
from contrastlab.samplers.query_key import QueryKeySampler
from contrastlab.samplers.queue import QueueSampler

SAMPLERS: tuple[type[Sampler], ...] = (TwoViewSampler, MultiViewSampler, QueryKeySampler, QueueSampler)
"""The four built-in samplers."""

__all__ = [
    "SAMPLERS",
    "SAMPLER_INPUTS",
    "MultiViewSampler",
    "QueryKeySampler",
    "QueueSampler",
    "Sampler",
    "SamplerInput",
    "TwoViewSampler",
    "build_multi_view",
    "choose_input",
    "feed_views",
    "register_samplers",
]


@hookimpl
def register_samplers(register) -> None:
    """Register the built-in samplers."""
    for sampler in SAMPLERS:
        register(sampler)
