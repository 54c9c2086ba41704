"""The contrastive pre-training step shared by the image plugins (``simclr`` and ``pu``'s pre-training phase).

One step (SimCLR, Chen et al. 2020, Alg. 1; MoCo, He et al. 2020, for the momentum inputs)::

    views [V, B, ...] --embed--> z --sampler (by its contract)--> ContrastiveBatch --loss--> backward, step

:func:`contrastive_batch` calls the sampler the way its declared input asks
(:mod:`contrastlab.platform.sampler_contract`): ``two_views``/``multi_views`` embed every view with the online
network; ``query_key``/``queue`` embed view 0 online (queries) and view 1 with a momentum key network, without
gradient (keys). :func:`contrastive_step` adds the optimiser step and the clamp statistic. Plugins keep their own
loops (data order, logging, checkpoints, schedules); only the step is shared.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.losses.floors import ClampMeter
from contrastlab.samplers import feed_views

MOMENTUM_INPUTS = frozenset({"query_key", "queue"})
"""Sampler inputs whose keys come from a momentum (EMA) copy of the network."""

Embed = Callable[[Tensor], Tensor]
"""``x [B, ...] -> z [B, d]``: the network's projections of one batch of inputs."""


def contrastive_batch(embed: Embed, views: Tensor, sampler: nn.Module, input_kind: str,
                      labels: Tensor | None = None, key_embed: Embed | None = None) -> ContrastiveBatch:
    """The :class:`ContrastiveBatch` of ``views`` ``[V, B, ...]`` (``labels`` ``[B]`` only for label-aware losses).

    ``key_embed`` embeds the keys for ``query_key``/``queue`` inputs (run without gradient); it is required then.
    """
    V, B = views.shape[:2]
    if input_kind in MOMENTUM_INPUTS:
        if key_embed is None:
            raise ValueError(f"sampler input '{input_kind}' needs key_embed (a momentum key network)")
        queries = embed(views[0])  # [B, d]
        with torch.no_grad():
            keys = key_embed(views[1])  # [B, d], detached
        return sampler(queries, keys, labels=labels)
    z = embed(views.flatten(0, 1)).view(V, B, -1)  # [V, B, d]
    return feed_views(sampler, input_kind, z, labels)


def contrastive_step(embed: Embed, views: Tensor, sampler: nn.Module, input_kind: str, loss_fn: nn.Module,
                     optimizer: torch.optim.Optimizer, labels: Tensor | None = None,
                     key_embed: Embed | None = None, clamp: ClampMeter | None = None) -> Tensor:
    """One optimisation step of ``loss_fn`` on ``views``; returns the detached loss (no host sync).

    ``clamp`` (optional) accumulates the loss's ``clamped_frac`` for logging as ``train/clamped_frac``.
    """
    loss = loss_fn(contrastive_batch(embed, views, sampler, input_kind, labels, key_embed))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if clamp is not None:
        clamp.update(loss_fn)
    return loss.detach()
