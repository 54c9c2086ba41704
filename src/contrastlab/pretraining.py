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

TRAIN_IMAGES = {"fashion_mnist": 60000, "cifar10": 50000, "cifar100": 50000, "stl10": 105000, "synthetic": 512}
"""Training images of the built-in datasets (for run-time estimates before any data is loaded; ``synthetic``: its
loader's default size)."""
TEST_IMAGES = {"fashion_mnist": 10000, "cifar10": 10000, "cifar100": 10000, "stl10": 8000, "synthetic": 256}
"""Test images of the built-in datasets."""
_SECONDS_PER_IMAGE = {"cpu": {"small_cnn": 3e-4, "resnet18": 2.5e-2, "resnet50": 6e-2},
                      "cuda": {"small_cnn": 2e-5, "resnet18": 1.5e-4, "resnet50": 4e-4}}
"""Seconds of one training pass (forward + backward) per 32-px image; ``small_cnn`` at width 16."""
_COST_WIDTH = {"small_cnn": ("width", 32.0, 16.0)}
"""Per encoder: (width option, its default, the width the cost above was measured at); else ``width``, 1, 1."""


def seconds_per_image(encoder: str, hparams: dict, device: str, size: int) -> float | None:
    """Rough seconds of one training pass per ``size``-px image through ``encoder`` (``None``: not measured).

    Scales the measured 32-px cost by area and by the square of the width (conv cost grows with both).
    """
    per = _SECONDS_PER_IMAGE["cuda" if str(device).startswith("cuda") else "cpu"].get(encoder)
    if per is None:
        return None
    key, default, measured = _COST_WIDTH.get(encoder, ("width", 1.0, 1.0))
    width = float(hparams.get(key) or default) / measured
    return per * (size / 32) ** 2 * width**2


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
                     key_embed: Embed | None = None, clamp: ClampMeter | None = None,
                     before_step: Callable[[], None] | None = None) -> Tensor:
    """One optimisation step of ``loss_fn`` on ``views``; returns the detached loss (no host sync).

    ``clamp`` (optional) accumulates the loss's ``clamped_frac`` for logging as ``train/clamped_frac``;
    ``before_step`` (optional) runs between the backward pass and the optimiser step (e.g. averaging across ranks
    the gradients of parameters outside DDP).
    """
    loss = loss_fn(contrastive_batch(embed, views, sampler, input_kind, labels, key_embed))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if before_step is not None:
        before_step()
    optimizer.step()
    if clamp is not None:
        clamp.update(loss_fn)
    return loss.detach()
