"""From a batch of training interactions to a :class:`~contrastlab.ContrastiveBatch`, through ``query_key``.

Anchors are the batch's users, the positive of user ``u_b`` is its interacted item ``i_b``, and the candidate
negatives are items. The logits come from the registered ``query_key`` sampler (``cl.make_sampler``): queries are
the user embeddings, keys the item embeddings, and ``query_key`` scores query ``b`` against its own key (the
positive) and against every *other* key of the call (the negatives, ``N = K − 1`` for ``K`` keys), by cosine / t
(bounded) or by a bilinear ``u W iᵀ / t`` (with ``W = I``: the dot product). Three negative sets
(``train.negatives``):

* ``in_batch``: the keys are the ``B`` positive items, so each user's negatives are the other users' items;
* ``sampled``: ``n`` items drawn uniformly (without replacement, one draw shared by the batch) are appended to
  the keys; the in-batch columns are masked out, so each user sees exactly the ``n`` sampled items;
* ``both``: the in-batch items and the ``n`` sampled items.

To append keys, ``n`` zero queries are appended as well (``query_key`` takes as many queries as keys); their
rows are dropped. ``query_key`` orders the negatives of row ``b`` as the keys ``j ≠ b`` in increasing ``j``
(column ``c`` is key ``c + [c ≥ b]``); :func:`negative_keys` reproduces that map, and a test checks it.

**Known positives are masked** (``train.mask_known_positives``, on by default): a negative column whose item is a
*training* item of the anchor's user is marked invalid in ``neg_mask``. This covers the same item appearing
twice in a batch (two users who both interacted with it: for each of them the other's copy is its own
positive), the same user appearing twice (its other positive is not a negative), and sampled items the user
already has. Rows keep at least their valid columns; losses read ``N`` from the mask. Unobserved positives
(e.g. test items) stay in, which is exactly the false-negative bias the debiased losses model.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

import contrastlab as cl

NEGATIVE_MODES = ("in_batch", "sampled", "both")
"""Values of ``train.negatives``."""


def negative_keys(anchors: int, keys: int, device: torch.device | str = "cpu") -> Tensor:
    """``[anchors, keys − 1]`` key index of each negative column of ``query_key`` (row ``b``: keys ``j ≠ b``)."""
    cols = torch.arange(keys - 1, device=device)[None, :]  # [1, K-1]
    rows = torch.arange(anchors, device=device)[:, None]  # [A, 1]
    return cols + (cols >= rows).long()  # [A, K-1]


def is_known(train_keys: Tensor, users: Tensor, items: Tensor, num_items: int) -> Tensor:
    """Elementwise: is ``(users, items)`` a training interaction? ``train_keys``: sorted ``user·I + item``."""
    query = users * num_items + items
    if train_keys.numel() == 0:
        return torch.zeros_like(query, dtype=torch.bool)
    pos = torch.searchsorted(train_keys, query).clamp_max(train_keys.numel() - 1)
    return train_keys[pos] == query


def build_batch(sampler: torch.nn.Module, user_emb: Tensor, item_emb: Tensor, users: Tensor, pos_items: Tensor,
                sampled_items: Tensor | None, *, mode: str, train_keys: Tensor | None, num_items: int
                ) -> cl.ContrastiveBatch:
    """The ``ContrastiveBatch`` of one step (see the module docstring).

    Args:
        sampler: a ``query_key`` sampler (cosine or bilinear).
        user_emb: ``[U, d]`` user embeddings; item_emb: ``[I, d]`` item embeddings (from the encoder).
        users, pos_items: ``[B]`` long, the batch's training interactions.
        sampled_items: ``[n]`` long uniformly drawn items (modes ``sampled``/``both``), else ``None``.
        mode: one of :data:`NEGATIVE_MODES`.
        train_keys: sorted ``user·I + item`` keys of the training set, or ``None`` to mask nothing.
        num_items: ``I``.
    """
    B = users.shape[0]
    q, k = user_emb[users], item_emb[pos_items]  # [B, d]
    key_items = pos_items
    if mode != "in_batch":
        if sampled_items is None or sampled_items.numel() == 0:
            raise ValueError(f"negatives mode '{mode}' needs sampled items")
        q = torch.cat([q, q.new_zeros(sampled_items.shape[0], q.shape[1])])  # padding queries, rows dropped
        k = torch.cat([k, item_emb[sampled_items]])
        key_items = torch.cat([pos_items, sampled_items])
    full = sampler(q, k)
    cols = negative_keys(B, key_items.shape[0], users.device)  # [B, K-1]
    valid = torch.ones_like(cols, dtype=torch.bool)
    if mode == "sampled":
        valid &= cols >= B
    if train_keys is not None:
        valid &= ~is_known(train_keys, users[:, None], key_items[cols], num_items)
    neg = full.neg_logits[:B]
    floor = full.floor_logit
    if isinstance(floor, Tensor):  # query_key's per-row floor is the row's smallest negative: recompute over valid
        masked_min = neg.detach().masked_fill(~valid, float("inf")).amin(dim=1)
        floor = torch.where(valid.any(dim=1), masked_min, floor[:B].detach())
    return replace(full, pos_logits=full.pos_logits[:B], neg_logits=neg, neg_mask=valid, floor_logit=floor,
                   meta={**full.meta, "negatives": mode, "known_positives_masked": train_keys is not None})
