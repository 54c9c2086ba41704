"""ContrastiveBatch: its documented defaults, shape helpers, floor and compute dtype."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import contrastlab as cl
from contrastlab import ContrastiveBatch


def _batch(**kw) -> ContrastiveBatch:
    g = torch.Generator().manual_seed(41)
    return ContrastiveBatch(torch.randn(4, 2, generator=g), torch.randn(4, 5, generator=g), **kw)


def test_defaults_and_unlabeled_constant():
    """A batch built without geometry is cosine/t at the SimCLR temperature 0.5 (floor ``-1/t = -2``)."""
    b = _batch()
    assert (b.temperature, b.bounded, b.floor_logit, b.negative_floor) == (0.5, True, None, "bound")
    assert torch.equal(b.floor(), torch.full((4,), -2.0))
    assert cl.UNLABELED == -1
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.temperature = 1.0  # type: ignore[misc]


def test_shape_helpers():
    mask = torch.tensor([[True] * 5, [True, False, True, False, False], [False] * 5, [True, True, False, True, True]])
    b = _batch(neg_mask=mask)
    assert (b.num_anchors, b.num_positives) == (4, 2)
    assert torch.equal(b.num_negatives(), torch.tensor([5.0, 2.0, 0.0, 4.0]))
    assert torch.equal(_batch().num_negatives(), torch.full((4,), 5.0))
    lab = torch.zeros(4, dtype=torch.long)
    assert not b.has_labels
    assert not _batch(anchor_labels=lab).has_labels and not _batch(neg_labels=lab[:, None].expand(4, 5)).has_labels
    labeled = _batch(anchor_labels=lab, neg_labels=lab[:, None].expand(4, 5))
    assert labeled.has_labels and not labeled.without_labels().has_labels


def test_tensor_floor_is_detached():
    fl = torch.tensor([-1.0, -2.0, -3.0, -4.0], requires_grad=True)
    got = _batch(floor_logit=fl).floor()
    assert not got.requires_grad and torch.equal(got, fl.detach())
    assert torch.equal(_batch(floor_logit=-7.0).floor(), torch.full((4,), -7.0))


@pytest.mark.parametrize(
    ("pos_dtype", "neg_dtype", "want"),
    [
        (torch.float32, torch.bfloat16, torch.float32),
        (torch.bfloat16, torch.float32, torch.float32),
        (torch.float16, torch.float16, torch.float32),
        (torch.float64, torch.float32, torch.float64),
        (torch.float32, torch.float32, torch.float32),
    ],
)
def test_compute_dtype_upcasts_both_logit_tensors(pos_dtype, neg_dtype, want):
    b = _batch()
    b = dataclasses.replace(b, pos_logits=b.pos_logits.to(pos_dtype), neg_logits=b.neg_logits.to(neg_dtype))
    c = b.to_compute_dtype()
    assert (c.pos_logits.dtype, c.neg_logits.dtype) == (want, want)
