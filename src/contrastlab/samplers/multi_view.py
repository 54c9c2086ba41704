"""``multi_view`` and ``two_view``: SimCLR-style batches where every view is an anchor.

``multi_view`` (``V`` views of ``B`` samples, ``views: [V, B, d]`` or a sequence of ``V`` ``[B, d]``):

* anchors: all ``A = V·B`` views (view-major: row ``v·B + b``);
* positives ``[A, M = V−1]``: the same sample's other views, in order ``v+1, v+2, …`` (mod ``V``); column 0 is
  the numerator positive, the others feed DCL/HCL/PUCL's correction, DebiasedPos's aggregation and SupCon;
* negatives ``[A, N = V·(B−1)]``: every view of every other sample (``N`` is also read from the mask, which
  is ``None`` here because every column is valid);
* logits: cosine similarity / ``temperature`` (bounded, floor ``-1/t``), computed in float32 (float64 for
  float64 inputs) with autocast disabled;
* labels ``[B]`` (optional): class id ≥ 0 or −1 unlabeled (PU: 1 = labeled positive), copied to every view.

``two_view`` is ``multi_view`` with ``V = 2`` called as ``(z1, z2, labels=None)``: SimCLR's NT-Xent layout with
``A = 2B`` and ``N = 2B − 2``.

Distributed: when ``torch.distributed`` is initialised, every rank's views and labels are gathered
(autograd-aware, see :mod:`contrastlab.samplers.distributed`); the anchors are this rank's views, the
candidates are all ranks' views, and positives are offset by ``rank · B``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.platform.errors import ConfigError
from contrastlab.samplers.base import (
    Sampler,
    as_views,
    check_embeddings,
    check_labels,
    multi_view_index,
    normalize,
    temperature_hparam,
)
from contrastlab.samplers.distributed import gather_labels, gather_with_grad, world


def build_multi_view(
    views: Tensor, labels: Tensor | None, temperature: float, gather: bool = True, sampler: str = "multi_view"
) -> ContrastiveBatch:
    """The :class:`ContrastiveBatch` of ``views [V, B, d]`` (see the module docstring)."""
    V, B, _ = views.shape
    if V < 2:
        raise ConfigError(f"sampler '{sampler}': needs at least 2 views; got V={V}")
    rank, size = world() if gather else (0, 1)
    with torch.autocast(device_type=views.device.type, enabled=False):
        z = normalize(views)  # [V, B, d] in compute dtype
        if size > 1:
            zg = gather_with_grad(z, "views")  # [W, V, B, d]
            cand = zg.transpose(0, 1).reshape(V * size * B, -1)  # [V·B_total, d], view-major
            lab_all = gather_labels(labels, views)  # [W, B] or None
            lab_all = None if lab_all is None else lab_all.reshape(size * B)
        else:
            cand = z.reshape(V * B, -1)
            lab_all = labels
        B_total = size * B
        anchors = z.reshape(V * B, -1) / float(temperature)  # [A, d], pre-scaled (cheaper than scaling [A, K])
        logits = anchors @ cand.T  # [A, V·B_total] = cos / t
    pos_idx, neg_idx = multi_view_index(V, B, B_total, rank * B, views.device)
    pos = logits.gather(1, pos_idx)  # [A, V−1]
    neg = logits.gather(1, neg_idx)  # [A, V·(B_total−1)]
    anchor_labels = pos_labels = neg_labels = None
    if lab_all is not None:
        cand_labels = lab_all.repeat(V)  # [V·B_total]
        anchor_labels = cand_labels[pos_idx[:, 0]]  # same sample as its positive
        pos_labels = cand_labels[pos_idx]
        neg_labels = cand_labels[neg_idx]
    return ContrastiveBatch(
        pos_logits=pos, neg_logits=neg, temperature=float(temperature), bounded=True,
        anchor_labels=anchor_labels, pos_labels=pos_labels, neg_labels=neg_labels,
        meta={"sampler": sampler, "views": V, "world_size": size, "rank": rank},
    )


class MultiViewSampler(Sampler):
    """``V`` views per sample: ``M = V−1`` positives and ``N = V(B−1)`` negatives per anchor (cosine / t)."""

    name = "multi_view"
    description = "V views per sample (SimCLR generalised): A = V·B anchors, M = V−1 positives, N = V(B−1)"
    hyperparameters = (temperature_hparam(0.5, "DCL/HCL/BCL SimCLR setting t = 0.5"),)
    temperature: float

    def forward(self, views: Tensor | Sequence[Tensor], labels: Tensor | None = None) -> ContrastiveBatch:
        """``views``: ``[V, B, d]`` or a sequence of ``V`` ``[B, d]``; ``labels``: ``[B]`` or ``None``."""
        v = as_views(views, self.name)
        lab = check_labels(labels, self.name, v.shape[1], v.device)
        return build_multi_view(v, lab, self.temperature, self.gather_distributed, self.name)


class TwoViewSampler(Sampler):
    """SimCLR's two views: both are anchors (``A = 2B``), one positive each, ``N = 2B − 2`` negatives."""

    name = "two_view"
    description = "SimCLR layout: both views are anchors, A = 2B, N = 2B − 2, cosine / temperature"
    hyperparameters = (temperature_hparam(0.5, "SimCLR/DCL/BCL setting t = 0.5 (DCL §5, BCL §4)"),)
    temperature: float

    def forward(self, z1: Tensor, z2: Tensor, labels: Tensor | None = None) -> ContrastiveBatch:
        """``z1``, ``z2``: ``[B, d]`` two views of the same ``B`` samples; ``labels``: ``[B]`` or ``None``."""
        z1 = check_embeddings(z1, self.name, "z1")
        z2 = check_embeddings(z2, self.name, "z2", z1.shape[0], z1.shape[1])
        lab = check_labels(labels, self.name, z1.shape[0], z1.device)
        return build_multi_view(torch.stack([z1, z2]), lab, self.temperature, self.gather_distributed, self.name)
