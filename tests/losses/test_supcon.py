"""SupCon/unbiased helpers not covered by the shared reference tests."""

from __future__ import annotations

import torch

from contrastlab.losses.supcon import known_positives


def test_known_positives_are_valid_same_label_columns_of_labeled_anchors(ref):
    b = ref.masked_batch(seed=31)
    want = (b.neg_labels == b.anchor_labels[:, None]) & (b.anchor_labels >= 0)[:, None] & b.neg_mask
    got = known_positives(b)
    assert got.dtype == torch.bool and torch.equal(got, want)
    assert bool(want.any()) and not bool(want.all())
