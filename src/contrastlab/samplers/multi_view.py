"""``multi_view`` and ``two_view``: SimCLR-style batches where every view is an anchor.

``multi_view`` (``V`` views of ``B`` samples, ``views: [V, B, d]`` or a sequence of ``V`` ``[B, d]``):

* anchors: all ``A = V·B`` views (view-major: row ``v·B + b``);
* positives ``[A, M = V−1]``: the same sample's other views, in order ``v+1, v+2, …`` (mod ``V``); column 0 is
  the numerator positive, the others feed DCL/HCL/PUCL's correction, DebiasedPos's aggregation and SupCon;
* negatives ``[A, N = V·(B−1)]``: every view of every other sample, view-major (column ``v·(B−1) + c'`` is view
  ``v`` of the ``c'``-th other sample; ``N`` is also read from the mask, which is ``None`` here because every
  column is valid). Single-process, they are cut from one ``[A, B·V]`` matmul by a strided view (see
  :class:`_SelfLogits`) instead of an index gather;
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
from torch.autograd.function import once_differentiable

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


class _SelfLogits(torch.autograd.Function):
    """Single-process logits of ``z [V, B, d]`` against itself, split into ``pos [V·B, V−1]`` and
    ``neg [V·B, V·(B−1)]`` without any gather/scatter over the ``[A, N]`` negatives.

    The full logits ``L [V·B, B·V]`` have the anchors view-major as rows (``u·B + b``) and the candidates
    **sample-major** as columns (``c·V + v``), so the columns to drop from row ``(u, b)`` (its own ``V`` views)
    form one contiguous block at ``b·V``. In the flat ``[B, B·V]`` block of view ``u`` these blocks sit at
    ``b·V(B+1) + k``, a constant stride: the kept entries are the strided view ``(V, B−1, B·V)`` with strides
    ``(B²V, V(B+1), 1)`` starting at element ``V``, read row after row (the tail of row ``b`` after its block,
    then the head of row ``b+1``), which is exactly the ``[B, V(B−1)]`` negatives of view ``u``, flattened
    sample-major; one more copy puts the columns view-major (the documented order). Backward writes the gradient
    back through the same two copies into an uninitialised ``[A, K]`` buffer plus a fill/scatter of the ``V²·B``
    dropped entries (no zero fill and no scatter-add over ``A·N`` indices, unlike ``gather``), permutes it to
    view-major columns and does autograd's two matmuls (anchor role ``(G·cand)/t``, candidate role ``Gᵀ·(z/t)``).
    Every sum therefore runs in the order of the index-gather path (kept under ``torch.distributed``): results
    are bitwise equal to it in float32, which the DDP-vs-single-process tests rely on (their float32 tolerance
    does not survive a mere reordering of the negative columns). Keeping everything sample-major would save the
    three permuting copies (≈ 2 ms of ≈ 15 ms at B = 512 on one CPU thread). Folding the two matmuls into one
    (``L = Z Zᵀ / t`` up to the orders) was slower on CPU: the permuted transpose costs more than a matmul.
    """

    @staticmethod
    def forward(ctx, z: Tensor, temperature: float, pos_sel: Tensor) -> tuple[Tensor, Tensor]:
        V, B, d = z.shape
        K = B * V
        cand = z.transpose(0, 1).reshape(K, d)  # [B·V, d] sample-major
        anchors = z.reshape(V * B, d) / temperature  # [A, d] pre-scaled (cheaper than scaling [A, K])
        logits = anchors @ cand.T  # [A, K] = cos / t
        kept = logits.as_strided((V, B - 1, K), (B * K, V * (B + 1), 1), V)  # [V, B−1, K] view
        neg_sm = logits.new_empty((V, B - 1, K))
        neg_sm.copy_(kept)  # [u, b, (c', v)] sample-major
        neg = neg_sm.view(V * B, B - 1, V).transpose(1, 2).contiguous()  # [A, V, B−1] view-major columns
        own = logits.as_strided((V, B, V), (B * K, V * (B + 1), 1), 0)  # [u, b, v] = L[u·B+b, b·V+v]
        pos = own.gather(2, pos_sel)  # [V, B, V−1]
        ctx.temperature = temperature
        ctx.save_for_backward(anchors, cand, pos_sel)
        return pos.reshape(V * B, V - 1), neg.view(V * B, V * (B - 1))

    @staticmethod
    @once_differentiable
    def backward(ctx, g_pos: Tensor | None, g_neg: Tensor | None) -> tuple[Tensor, None, None]:
        anchors, cand, pos_sel = ctx.saved_tensors
        K, d = cand.shape
        V = pos_sel.shape[0]
        B = K // V
        grad = cand.new_empty((V * B, K))  # ∂/∂L, rows view-major, columns sample-major
        kept = grad.as_strided((V, B - 1, K), (B * K, V * (B + 1), 1), V)
        own = grad.as_strided((V, B, V), (B * K, V * (B + 1), 1), 0)
        if g_neg is None:
            kept.zero_()
        else:
            kept.copy_(g_neg.reshape(V * B, V, B - 1).transpose(1, 2).reshape(V, B - 1, K))
        own.zero_()
        if g_pos is not None:
            own.scatter_(2, pos_sel, g_pos.reshape(V, B, V - 1))
        # the same arithmetic as autograd through ``(z / t) @ cand.T`` (so the distributed path, which uses
        # autograd, rounds alike): anchor role (G·cand)/t, candidate role Gᵀ·(z/t)
        grad_vm = grad.view(V * B, B, V).transpose(1, 2).reshape(V * B, V * B)  # columns view-major
        cand_vm = cand.view(B, V, d).transpose(0, 1).reshape(V * B, d)
        gz = (grad_vm @ cand_vm).div_(ctx.temperature)  # [A, d] anchor role
        return gz.add_(grad_vm.t() @ anchors).view(V, B, d), None, None  # + candidate role


_POS_SEL: dict[tuple[int, int, str], Tensor] = {}


def _pos_select(V: int, B: int, device: torch.device) -> Tensor:
    """``[V, B, V−1]`` long: for anchor view ``u``, the positive views ``u+1, u+2, …`` (mod ``V``); cached."""
    key = (V, B, str(device))
    hit = _POS_SEL.get(key)
    if hit is None:
        u = torch.arange(V, device=device)[:, None, None]
        s = torch.arange(1, V, device=device)[None, None, :]
        hit = ((u + s) % V).expand(V, B, V - 1).contiguous()
        if len(_POS_SEL) > 64:
            _POS_SEL.clear()
        _POS_SEL[key] = hit
    return hit


def _neg_labels_local(lab: Tensor, V: int) -> Tensor:
    """``[V·B, V·(B−1)]`` labels of the negative columns (view-major, as ``multi_view_index``) from ``lab [B]``.

    Row ``(u, b)`` holds, for every view, ``lab`` without sample ``b``: the ``[B, B−1]`` "all but the diagonal"
    matrix, which is the strided view ``(B−1, B)``/``(1, 1)`` of the doubled labels from element 1 read row after
    row (row ``r``: samples ``r+1 … B−1`` then ``0 … r``), broadcast over ``u`` and ``v``.
    """
    B = lab.shape[0]
    dbl = torch.cat([lab, lab])  # [2B]
    others = dbl.as_strided((B - 1, B), (1, 1), 1).reshape(B, B - 1)  # [B, B−1] every sample except b
    return others[None, :, None, :].expand(V, B, V, B - 1).reshape(V * B, V * (B - 1))


def build_multi_view(
    views: Tensor, labels: Tensor | None, temperature: float, gather: bool = True, sampler: str = "multi_view"
) -> ContrastiveBatch:
    """The :class:`ContrastiveBatch` of ``views [V, B, d]`` (see the module docstring)."""
    V, B, _ = views.shape
    if V < 2:
        raise ConfigError(f"sampler '{sampler}': needs at least 2 views; got V={V}")
    rank, size = world() if gather else (0, 1)
    meta = {"sampler": sampler, "views": V, "world_size": size, "rank": rank}
    with torch.autocast(device_type=views.device.type, enabled=False):
        z = normalize(views)  # [V, B, d] in compute dtype
        if size == 1:
            pos, neg = _SelfLogits.apply(z, float(temperature), _pos_select(V, B, views.device))
            anchor_labels = pos_labels = neg_labels = None
            if labels is not None:
                anchor_labels = labels.repeat(V)  # [A]
                pos_labels = anchor_labels[:, None].expand(V * B, V - 1).contiguous()
                neg_labels = _neg_labels_local(labels, V)
            return ContrastiveBatch(
                pos_logits=pos, neg_logits=neg, temperature=float(temperature), bounded=True,
                anchor_labels=anchor_labels, pos_labels=pos_labels, neg_labels=neg_labels, meta=meta,
            )
        zg = gather_with_grad(z, "views")  # [W, V, B, d]
        cand = zg.transpose(0, 1).reshape(V * size * B, -1)  # [V·B_total, d], view-major
        lab_all = gather_labels(labels, views)  # [W, B] or None
        lab_all = None if lab_all is None else lab_all.reshape(size * B)
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
        anchor_labels=anchor_labels, pos_labels=pos_labels, neg_labels=neg_labels, meta=meta,
    )


class MultiViewSampler(Sampler):
    """``V`` views per sample: ``M = V−1`` positives and ``N = V(B−1)`` negatives per anchor (cosine / t)."""

    name = "multi_view"
    description = "V views per sample (SimCLR generalised): A = V·B anchors, M = V−1 positives, N = V(B−1)"
    hyperparameters = (temperature_hparam(0.5, "DCL/HCL/BCL SimCLR setting t = 0.5"),)
    accepts = frozenset({"multi_views"})
    temperature: float

    def forward(self, views: Tensor | Sequence[Tensor], labels: Tensor | None = None) -> ContrastiveBatch:
        """``views``: ``[V, B, d]`` or a sequence of ``V`` ``[B, d]``; ``labels``: ``[B]`` or ``None``."""
        v = as_views(views, self.name)
        if self.embed_dim is not None and v.shape[2] != self.embed_dim:
            raise ConfigError(f"sampler '{self.name}': views must be [V, B, {self.embed_dim}] (embed_dim); "
                              f"got {tuple(v.shape)}")
        lab = check_labels(labels, self.name, v.shape[1], v.device)
        return build_multi_view(v, lab, self.temperature, self.gather_distributed, self.name)


class TwoViewSampler(Sampler):
    """SimCLR's two views: both are anchors (``A = 2B``), one positive each, ``N = 2B − 2`` negatives."""

    name = "two_view"
    description = "SimCLR layout: both views are anchors, A = 2B, N = 2B − 2, cosine / temperature"
    hyperparameters = (temperature_hparam(0.5, "SimCLR/DCL/BCL setting t = 0.5 (DCL §5, BCL §4)"),)
    accepts = frozenset({"two_views"})
    temperature: float

    def forward(self, z1: Tensor, z2: Tensor, labels: Tensor | None = None) -> ContrastiveBatch:
        """``z1``, ``z2``: ``[B, d]`` two views of the same ``B`` samples; ``labels``: ``[B]`` or ``None``."""
        z1 = check_embeddings(z1, self.name, "z1", dim=self.embed_dim)
        z2 = check_embeddings(z2, self.name, "z2", z1.shape[0], z1.shape[1])
        lab = check_labels(labels, self.name, z1.shape[0], z1.device)
        return build_multi_view(torch.stack([z1, z2]), lab, self.temperature, self.gather_distributed, self.name)
