"""``query_key``: CURL's layout — queries from the online encoder against keys from a target encoder.

Reference: Laskin, Srinivas, Abbeel, *CURL: Contrastive Unsupervised Representations for Reinforcement
Learning*, ICML 2020 (bilinear score ``q W kᵀ``, ``W`` learnable, no temperature, no normalisation).

Call ``sampler(queries [B, d], keys, labels=None)`` with ``keys`` either ``[B, d]`` or a sequence of ``M``
``[B, d]`` (``M`` positives per query, e.g. two key crops as in DCL's CURL experiment with ``M = 2``). The
caller detaches the keys (CURL encodes them with the EMA encoder under ``no_grad``).

* anchors: the ``A = B`` queries; positives ``[B, M]``: query ``i`` with ``keys[m][i]`` (column 0 = numerator);
* negatives ``[B, N = B−1]``: query ``i`` with the *first* key set's other keys ``keys[0][j], j ≠ i``;
* ``similarity="bilinear"`` (default, as in CURL): ``ℓ_ij = q_i W k_jᵀ / t`` with a learnable
  ``W [embed_dim, embed_dim]`` (initialised ``U[0, 1)`` like CURL), so ``embed_dim`` is required. These logits
  are **unbounded** (``bounded=False``): the losses shift by the detached row max, and no paper gives the floor
  of the debiased negative mass (losses-spec §3.5(d)).
  ``floor`` chooses it (:mod:`contrastlab.losses.floors`):

  - ``trimmed`` (default for bilinear; this project's rule): ``N`` × mean of the ``⌈(1−π)N⌉`` smallest
    ``e^{ℓ_j}`` of the row (``π`` = the loss's false-negative fraction, e.g. τ⁺); keeps gradient;
  - ``row_min`` (contrastlab ≤ 0.1, for reproducing old runs): ``N e^{min_j ℓ_j}``, detached; with CURL's logit
    spread it zeroes the loss and gradient of 30–50 % of the anchors at τ⁺ = 0.1 (docs/losses.md);
  - ``bound``: ``N e^{-1/t}``, the papers' rule, meaningful for cosine logits (default for ``cosine``).

  DebiasedPos' guard on ``Ê⁺`` uses the row's smallest negative logit with bilinear scores (every rule).
* ``similarity="cosine"``: ``cos(q_i, k_j) / t``, bounded; the papers' floor ``N e^{-1/t}`` (``floor="bound"``).

``temperature`` defaults to 1 (CURL has none); with ``cosine`` pick e.g. 0.1–0.5. Distributed: keys and labels
are gathered from all ranks (negatives are every rank's keys), positives offset by ``rank · B``.

Contract (:mod:`contrastlab.platform.sampler_contract`): ``accepts = {"query_key"}``; build it with
``cl.make_sampler("query_key", embed_dim=d)`` (plugins pass their embedding size; with ``cosine`` it may be
``None``, and when given, queries and keys must have that size).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.registry import HParam
from contrastlab.samplers.base import (
    Sampler,
    check_embeddings,
    check_labels,
    compute_dtype,
    multi_view_index,
    normalize,
    temperature_hparam,
)
from contrastlab.samplers.distributed import gather_labels, gather_with_grad, world

SIMILARITIES = ("bilinear", "cosine")
FLOORS = ("auto", "trimmed", "row_min", "bound")


class QueryKeySampler(Sampler):
    """CURL's query/key layout: ``A = B`` queries, ``N = B − 1`` negative keys, bilinear ``q W kᵀ`` or cosine."""

    name = "query_key"
    description = "CURL layout: queries vs. keys of a target encoder, learnable bilinear q W kᵀ (or cosine)"
    hyperparameters = (
        HParam("similarity", "bilinear", "score: bilinear q W kᵀ (learnable W, unbounded) or cosine",
               "bilinear | cosine", "CURL (Laskin et al. 2020) uses bilinear", lambda v: v in SIMILARITIES),
        temperature_hparam(1.0, "CURL has no temperature (t = 1)"),
        HParam("floor", "auto", "floor of the debiased negative mass (DCL/HCL/PUCL): auto = trimmed for bilinear, "
               "bound for cosine; row_min = contrastlab 0.1's N·e^{min ℓ}", "auto | trimmed | row_min | bound",
               "this project (no paper gives a floor for unbounded logits; docs/losses.md has the evidence)",
               lambda v: v in FLOORS),
    )
    accepts = frozenset({"query_key"})
    similarity: str
    temperature: float
    floor: str

    def __init__(self, similarity: str = "bilinear", temperature: float = 1.0, floor: str = "auto", *,
                 embed_dim: int | None = None, gather_distributed: bool = True) -> None:
        super().__init__(gather_distributed, embed_dim=embed_dim, similarity=similarity, temperature=temperature,
                         floor=floor)
        if self.similarity == "bilinear":
            if self.floor == "bound":
                raise ConfigError("sampler 'query_key': floor='bound' (the papers' N·e^{-1/t}) has no meaning for "
                                  "unbounded bilinear scores; use floor=auto/trimmed, floor=row_min, or "
                                  "similarity=cosine")
            if self.embed_dim is None:
                raise ConfigError("sampler 'query_key' with similarity='bilinear' needs embed_dim (the size d of "
                                  "queries and keys, e.g. CURL's latent size 50) to size W [d, d]")
            self.W = nn.Parameter(torch.rand(self.embed_dim, self.embed_dim))
            """Learnable bilinear matrix ``[embed_dim, embed_dim]`` (CURL's initialisation ``U[0, 1)``)."""

    def forward(self, queries: Tensor, keys: Tensor | Sequence[Tensor], labels: Tensor | None = None
                ) -> ContrastiveBatch:
        """``queries [B, d]``; ``keys [B, d]`` or a sequence of ``M`` ``[B, d]``; ``labels [B]`` or ``None``."""
        q = check_embeddings(queries, self.name, "queries")
        key_list = [keys] if isinstance(keys, Tensor) else list(keys)
        if not key_list:
            check_embeddings(None, self.name, "keys", q.shape[0], q.shape[1])
        dim = self.embed_dim if self.embed_dim is not None else q.shape[1]
        check_embeddings(q, self.name, "queries", None, dim)
        ks = [check_embeddings(k, self.name, f"keys[{i}]", q.shape[0], dim) for i, k in enumerate(key_list)]
        lab = check_labels(labels, self.name, q.shape[0], q.device)
        B = q.shape[0]
        rank, size = world() if self.gather_distributed else (0, 1)
        t = float(self.temperature)
        with torch.autocast(device_type=q.device.type, enabled=False):
            dt = compute_dtype(q)
            if self.similarity == "bilinear":
                qs = (q.to(dt) @ self.W.to(dt)) / t  # [B, d]  (q W / t)
                kz = [k.to(dt) for k in ks]
            else:
                qs = normalize(q) / t
                kz = [normalize(k).to(qs.dtype) for k in ks]
            k0 = gather_with_grad(kz[0], "keys").reshape(size * B, -1) if size > 1 else kz[0]  # [B_total, d]
            logits = qs @ k0.T  # [B, B_total]
            pos = torch.stack([(qs * k).sum(dim=1) for k in kz], dim=1)  # [B, M]
        _, neg_idx = multi_view_index(1, B, size * B, rank * B, q.device)
        neg = logits.gather(1, neg_idx)  # [B, B_total − 1]
        anchor_labels = pos_labels = neg_labels = None
        lab_all = gather_labels(lab, q) if size > 1 else (None if lab is None else lab[None])
        if lab_all is not None:
            lab_all = lab_all.reshape(-1)
            anchor_labels = lab
            pos_labels = lab[:, None].expand(B, len(kz))
            neg_labels = lab_all[neg_idx]
        bilinear = self.similarity == "bilinear"
        rule = self.floor if self.floor != "auto" else ("trimmed" if bilinear else "bound")
        # floor_logit: the row's smallest negative logit for row_min and for bilinear scores (also DebiasedPos'
        # guard); None (= -1/t) for bound, which has no meaning for q W kᵀ and is there only for ablations.
        row_min = rule == "row_min" or (bilinear and rule == "trimmed")
        floor = neg.detach().amin(dim=1) if row_min and neg.shape[1] > 0 else None
        return ContrastiveBatch(
            pos_logits=pos, neg_logits=neg, temperature=t, bounded=not bilinear, floor_logit=floor,
            negative_floor="trimmed" if rule == "trimmed" else "bound",
            anchor_labels=anchor_labels, pos_labels=pos_labels, neg_labels=neg_labels,
            meta={"sampler": self.name, "similarity": self.similarity, "world_size": size, "rank": rank},
        )
