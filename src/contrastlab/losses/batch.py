"""The data every contrastive loss consumes: :class:`ContrastiveBatch`.

Samplers (``two_view``, ``multi_view``, ``query_key``, ``queue``) build it from embeddings; losses read it.
The layout follows the unified API of ``shared/research/losses-spec.md`` §8:

* ``pos_logits`` ``[A, M]``: logits of each anchor with its ``M >= 1`` positives, already divided by the
  temperature. Column 0 is the numerator positive ``x⁺``; columns ``1:`` only enter positive corrections
  (DCL/HCL/PUCL) or aggregation (DebiasedPos), or are "other views" for SupCon/puNCE.
* ``neg_logits`` ``[A, N]``: logits with the candidate negatives (the "unlabeled" samples). ``N`` is read
  from ``neg_mask`` (per row), never from the batch size.
* ``neg_mask`` ``[A, N]`` bool: which candidate columns are real (padding/ragged rows are ``False``).
* ``anchor_labels`` ``[A]`` / ``neg_labels`` ``[A, N]`` / ``pos_labels`` ``[A, M]``: observed labels, a class id
  ``>= 0`` or ``-1`` for unlabeled. In PU learning ``1`` marks a labeled positive.
* geometry: ``temperature`` and ``bounded``. Cosine/t logits are bounded by ``1/t``; CURL's bilinear score is
  not, and then clamp floors use ``floor_logit`` (see :meth:`ContrastiveBatch.floor`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

UNLABELED = -1
"""Observed label of a sample whose class is unknown."""


@dataclass(frozen=True)
class ContrastiveBatch:
    """Logits of anchors with positives and candidate negatives, plus labels and geometry.

    Build it through a sampler (``cl.make_sampler``) or directly for custom layouts.
    """

    pos_logits: Tensor
    """``[A, M]`` anchor-positive logits (already divided by the temperature); column 0 is the numerator."""
    neg_logits: Tensor
    """``[A, N]`` anchor-candidate-negative logits (already divided by the temperature)."""
    neg_mask: Tensor | None = None
    """``[A, N]`` bool validity mask of negative columns; ``None`` means every column is valid."""
    temperature: float = 0.5
    """Temperature ``t`` that divided the logits (``1.0`` for CURL's bilinear score)."""
    bounded: bool = True
    """True when ``|logit| <= 1/t`` (cosine similarity / t). False for unbounded scores (bilinear)."""
    floor_logit: float | Tensor | None = None
    """Logit of the smallest attainable score, used by the clamps of DCL/HCL/PUCL/DebiasedPos.

    ``None`` means ``-1/t`` (the cosine bound, the papers' ``e^{-1/t}``); a float is one floor for every row; a
    ``[A]`` tensor is a per-row floor (the bilinear ``query_key`` sampler uses each row's smallest negative logit).
    See :meth:`floor`.
    """
    negative_floor: str = "bound"
    """How DCL/HCL/PUCL floor their debiased negative mass ``N·ĝ`` (see :mod:`contrastlab.losses.floors`).

    ``"bound"`` (the papers' rule): ``N e^{ℓ_min}`` with ``ℓ_min`` from :meth:`floor` (``-1/t`` for cosine
    logits). ``"trimmed"`` (this project's rule for unbounded logits, the ``query_key`` sampler's default with
    bilinear scores): ``N`` times the mean of the ``⌈(1−π)N⌉`` smallest ``e^{ℓ_j}`` of the row, where ``π`` is the
    loss's false-negative fraction (``τ⁺`` for DCL/HCL); it carries gradient.
    """
    anchor_labels: Tensor | None = None
    """``[A]`` long observed label of each anchor (class id >= 0, or -1 unlabeled)."""
    pos_labels: Tensor | None = None
    """``[A, M]`` long observed labels of the positives (normally equal to ``anchor_labels``)."""
    neg_labels: Tensor | None = None
    """``[A, N]`` long observed label of each candidate negative."""
    meta: dict = field(default_factory=dict)
    """Free-form sampler information (e.g. ``{"sampler": "two_view", "views": 2}``)."""

    # ------------------------------------------------------------------ shapes
    @property
    def num_anchors(self) -> int:
        """``A``, the number of anchors (rows)."""
        return int(self.pos_logits.shape[0])

    @property
    def num_positives(self) -> int:
        """``M``, the number of positive columns per anchor."""
        return int(self.pos_logits.shape[1])

    @property
    def has_labels(self) -> bool:
        """Whether observed labels are attached."""
        return self.anchor_labels is not None and self.neg_labels is not None

    def valid_mask(self) -> Tensor:
        """``[A, N]`` bool mask of valid negative columns (all True when no mask was given)."""
        if self.neg_mask is None:
            return torch.ones_like(self.neg_logits, dtype=torch.bool)
        return self.neg_mask

    def num_negatives(self) -> Tensor:
        """``[A]`` number of valid negatives per row, read from the mask (float, same dtype as the logits)."""
        return self.valid_mask().sum(dim=1).to(self.neg_logits.dtype)

    def floor(self) -> Tensor:
        """``[A]`` logit ``ℓ_min`` of the smallest admissible score (detached); clamps use ``e^{ℓ_min}``.

        For cosine logits this is ``-1/t`` (DCL's ``e^{-1/t}``, spec §1, §8.1). Unbounded (bilinear) samplers
        provide their own ``floor_logit``; when they do not, the clamp falls back to ``-1/t``.
        """
        ref = self.neg_logits
        if self.floor_logit is None:
            return ref.new_full((self.num_anchors,), -1.0 / float(self.temperature))
        if isinstance(self.floor_logit, Tensor):
            return self.floor_logit.detach().to(device=ref.device, dtype=ref.dtype).expand(self.num_anchors)
        return ref.new_full((self.num_anchors,), float(self.floor_logit))

    def without_labels(self) -> ContrastiveBatch:
        """A copy with every observed label removed (what unsupervised losses see)."""
        return replace(self, anchor_labels=None, pos_labels=None, neg_labels=None)

    def to_compute_dtype(self) -> ContrastiveBatch:
        """Logits in float32, or float64 when given float64 (bf16/fp16 inputs are upcast; spec §8.1)."""
        dtype = torch.float64 if self.pos_logits.dtype == torch.float64 else torch.float32
        if self.pos_logits.dtype == dtype and self.neg_logits.dtype == dtype:
            return self
        return replace(self, pos_logits=self.pos_logits.to(dtype), neg_logits=self.neg_logits.to(dtype))
