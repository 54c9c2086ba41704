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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log_sub_clamped_equal_terms_give_exactly_the_floor(dtype):
    """``e^b = e^a``: the difference is 0, so the result is the floor itself (not the resolution guard
    ``a + log(eps)``, which lies far above a low floor), with zero gradient."""
    from contrastlab.losses.base import log_sub_clamped

    a = torch.tensor([0.0, 5.0], dtype=dtype, requires_grad=True)
    floor = torch.tensor([-100.0, -80.0], dtype=dtype)
    out = log_sub_clamped(a, a.detach().clone(), floor)
    assert torch.equal(out.detach(), floor)
    out.sum().backward()
    assert torch.equal(a.grad, torch.zeros_like(a))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_world_size_in_meta_without_a_process_group_reduces_locally(reduction, ref):
    """A gathered batch (``meta["world_size"] = 2``) evaluated outside a process group: a plain local reduction."""
    b = ref.two_view_batch(B=4)
    per = cl.make_loss("dcl", reduction="none")(b)
    got = cl.make_loss("dcl", reduction=reduction)(replace(b, meta={**b.meta, "world_size": 2}))
    torch.testing.assert_close(got, per.mean() if reduction == "mean" else per.sum(), rtol=0, atol=0)
