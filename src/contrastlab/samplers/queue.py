"""``queue``: a MoCo-style FIFO of ``size`` keys (with their observed labels) as the negatives.

Reference: He, Fan, Wu, Xie, Girshick, *Momentum Contrast for Unsupervised Visual Representation Learning*,
CVPR 2020; PUCL (Wang et al. 2024) runs MoCo with ``N = 4096``.

``sampler(q [B, d], k [B, d], labels=None)``: anchors are the ``A = B`` queries, the positive is ``q_i · k_i / t``
(cosine), the negatives are the keys currently in the queue (``N`` = number of filled slots, read from the mask;
the very first call has an empty queue, hence no negatives). After building the batch, ``k`` is enqueued
(detached, normalised, oldest entries overwritten) with its labels (−1 when none are given). The caller
detaches ``k`` (momentum encoder). Distributed: keys and labels of all ranks are gathered before they are
enqueued (every rank holds the same queue), as MoCo does; the queue itself never carries gradient. The queue
follows the queries' device (a sampler built or restored on the CPU and called with CUDA embeddings moves there).
Contract: ``accepts = {"queue"}`` (stateful: call it once per optimisation step and checkpoint its state).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.platform.registry import HParam
from contrastlab.samplers.base import Sampler, check_embeddings, check_labels, normalize, temperature_hparam
from contrastlab.samplers.distributed import gather_labels, gather_with_grad, world


class QueueSampler(Sampler):
    """MoCo queue: ``A = B`` queries, one positive key each, the queue's ``K`` keys as negatives."""

    name = "queue"
    description = "MoCo-style FIFO queue of `size` keys (+ observed labels) as negatives; cosine / temperature"
    hyperparameters = (
        HParam("size", 4096, "number K of keys kept in the queue", "[1, inf)",
               "PUCL's MoCo setting N = 4096", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1),
        temperature_hparam(0.2, "MoCo v2 (Chen et al. 2020); PUCL does not state its MoCo temperature"),
    )
    accepts = frozenset({"queue"})
    size: int
    temperature: float

    def __init__(self, size: int = 4096, temperature: float = 0.2, *, embed_dim: int | None = None,
                 gather_distributed: bool = True) -> None:
        super().__init__(gather_distributed, embed_dim=embed_dim, size=size, temperature=temperature)
        self.register_buffer("keys", torch.zeros(0))
        """``[size, d]`` stored keys (allocated at the first call, in float32 or float64)."""
        self.register_buffer("key_labels", torch.full((int(size),), -1, dtype=torch.long))
        """``[size]`` observed labels of the stored keys (−1 unlabeled)."""
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))
        """Next slot to overwrite."""
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))
        """Number of valid slots (≤ size)."""
        self._ptr_host, self._filled_host = 0, 0  # host copies of ptr/filled: reading a CUDA buffer syncs

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any) -> None:
        stored = state_dict.get(prefix + "keys")
        if stored is not None and stored.shape != self.keys.shape:
            self.keys = torch.zeros_like(stored, device=self.keys.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._ptr_host, self._filled_host = int(self.ptr), int(self.filled)

    @torch.no_grad()
    def _enqueue(self, k: Tensor, labels: Tensor | None) -> None:
        K = int(self.size)
        if self.keys.dim() != 2 or self.keys.shape[1] != k.shape[1] or self.keys.dtype != k.dtype:
            self.keys = torch.zeros(K, k.shape[1], dtype=k.dtype, device=k.device)
            self._ptr_host = self._filled_host = 0
        n = k.shape[0]
        if n >= K:  # keep only the newest K
            k, labels = k[-K:], None if labels is None else labels[-K:]
            n = K
        slots = (self._ptr_host + torch.arange(n, device=k.device)) % K
        # out of place: the previous tensors may be saved for backward / referenced by the last batch
        self.keys = self.keys.index_copy(0, slots, k)
        new_labels = labels if labels is not None else torch.full((n,), -1, dtype=torch.long, device=k.device)
        self.key_labels = self.key_labels.index_copy(0, slots, new_labels.to(self.key_labels.device))
        self._ptr_host, self._filled_host = (self._ptr_host + n) % K, min(K, self._filled_host + n)
        self.ptr.fill_(self._ptr_host)  # the buffers carry them into checkpoints (no host read)
        self.filled.fill_(self._filled_host)

    def forward(self, q: Tensor, k: Tensor, labels: Tensor | None = None) -> ContrastiveBatch:
        """``q``, ``k``: ``[B, d]`` queries and (detached) keys; ``labels``: ``[B]`` or ``None``."""
        q = check_embeddings(q, self.name, "q", dim=self.embed_dim)
        k = check_embeddings(k, self.name, "k", q.shape[0], q.shape[1])
        lab = check_labels(labels, self.name, q.shape[0], q.device)
        B, d = q.shape
        if self.key_labels.device != q.device:  # e.g. a queue restored on the CPU meeting CUDA queries
            self.to(q.device)
        rank, size = world() if self.gather_distributed else (0, 1)
        t = float(self.temperature)
        with torch.autocast(device_type=q.device.type, enabled=False):
            qn = normalize(q)
            kn = normalize(k).to(qn.dtype)  # the queue holds keys in the queries' dtype (else: never any negative)
            qs = qn / t
            pos = (qs * kn).sum(dim=1, keepdim=True)  # [B, 1]
            compatible = self.keys.dim() == 2 and self.keys.shape[1] == d and self.keys.dtype == qn.dtype
            if compatible:
                neg = qs @ self.keys.T  # [B, K]
                filled = self._filled_host
                mask = None if filled >= int(self.size) else (
                    (torch.arange(int(self.size), device=q.device) < filled)[None, :].expand(B, -1))
                neg_labels = self.key_labels[None, :].expand(B, -1)
            else:
                neg = qn.new_zeros(B, 0)
                mask, neg_labels = None, torch.zeros(B, 0, dtype=torch.long, device=q.device)
        batch = ContrastiveBatch(
            pos_logits=pos, neg_logits=neg, neg_mask=mask, temperature=t, bounded=True,
            anchor_labels=lab, pos_labels=None if lab is None else lab[:, None],
            neg_labels=None if lab is None else neg_labels,
            meta={"sampler": self.name, "world_size": size, "rank": rank, "queue_filled": self._filled_host},
        )
        k_all = gather_with_grad(kn.detach(), "k").reshape(size * B, d) if size > 1 else kn.detach()
        lab_all = gather_labels(lab, q) if size > 1 else (None if lab is None else lab[None])
        self._enqueue(k_all, None if lab_all is None else lab_all.reshape(-1))
        return batch
