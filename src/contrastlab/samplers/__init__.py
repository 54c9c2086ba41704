"""Built-in samplers (registered through the `register_samplers` hook like any plugin package).

A sampler is an ``nn.Module`` that turns embeddings (and optional observed labels) into a
:class:`~contrastlab.losses.batch.ContrastiveBatch`: ``two_view`` and ``multi_view`` (SimCLR), ``query_key``
(CURL) and ``queue`` (MoCo). Under ``torch.distributed`` each one gathers from all ranks.
"""

from __future__ import annotations

from contrastlab.platform.hookspecs import hookimpl
from contrastlab.samplers.base import Sampler
from contrastlab.samplers.multi_view import MultiViewSampler, TwoViewSampler, build_multi_view
from contrastlab.samplers.query_key import QueryKeySampler
from contrastlab.samplers.queue import QueueSampler

SAMPLERS: tuple[type[Sampler], ...] = (TwoViewSampler, MultiViewSampler, QueryKeySampler, QueueSampler)
"""The four built-in samplers."""

__all__ = [
    "SAMPLERS",
    "MultiViewSampler",
    "QueryKeySampler",
    "QueueSampler",
    "Sampler",
    "TwoViewSampler",
    "build_multi_view",
    "register_samplers",
]


@hookimpl
def register_samplers(register) -> None:
    """Register the built-in samplers."""
    for sampler in SAMPLERS:
        register(sampler)
