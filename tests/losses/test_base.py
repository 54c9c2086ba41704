"""ContrastiveLoss base-class policy: the oracle flag and the label policy of unsupervised losses."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import contrastlab as cl
import contrastlab.losses as L


def test_only_the_unbiased_loss_is_an_oracle():
    assert {c.name for c in L.LOSSES if c.oracle} == {"unbiased"}


@pytest.mark.parametrize("which", ["anchor_labels", "neg_labels"])
def test_unsupervised_loss_records_ignored_labels_when_only_one_label_field_is_given(which, ref):
    b = ref.two_view_batch(B=4)
    labels = {"anchor_labels": torch.zeros(b.num_anchors, dtype=torch.long),
              "neg_labels": torch.zeros(b.neg_logits.shape, dtype=torch.long)}
    loss = cl.make_loss("infonce")
    plain = loss(b)
    assert not loss.labels_ignored
    assert torch.equal(loss(replace(b, **{which: labels[which]})), plain)
    assert loss.labels_ignored
