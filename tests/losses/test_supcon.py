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


def test_unbiased_fill_to_n_with_a_single_true_negative(ref):
    """``fill_to_n``: the true negatives' mass is ``N · mean`` also when one true negative is left (``N e^{ℓ}``)."""
    from contrastlab import ContrastiveBatch
    from contrastlab.losses import unbiased

    g = torch.Generator().manual_seed(32)
    pos = torch.randn(3, 1, generator=g, dtype=torch.float64)
    neg = torch.randn(3, 4, generator=g, dtype=torch.float64)
    anchors = torch.tensor([0, 1, 2])
    neg_labels = torch.tensor([[0, 0, 0, 1], [1, 2, 1, 1], [0, 1, 2, 2]])  # 1, 1 and 2 true negatives
    b = ContrastiveBatch(pos, neg, anchor_labels=anchors, neg_labels=neg_labels)
    want = ref.unbiased(b, fill_to_n=True)
    torch.testing.assert_close(unbiased(b, reduction="none"), want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(want[0], torch.nn.functional.softplus(torch.log(4 * neg[0, 3].exp()) - pos[0, 0]))
