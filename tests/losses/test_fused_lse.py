"""The fused row ``logsumexp`` behind every loss: value and gradient equal ``torch.logsumexp``'s."""

from __future__ import annotations

import pytest
import torch

from contrastlab.losses.base import NEG, masked_lse


@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_masked_lse_matches_torch_with_mask_and_shift(scale):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(7, 13, generator=g, dtype=torch.float64) * scale).requires_grad_(True)
    mask = torch.rand(7, 13, generator=g) > 0.3
    mask[2] = False  # a row without any valid column
    shift = torch.randn(7, 13, generator=g, dtype=torch.float64)
    upstream = torch.randn(7, generator=g, dtype=torch.float64)

    got = masked_lse(x, mask, shift=shift.clone())
    (got * upstream).sum().backward()
    g_got, x.grad = x.grad.clone(), None

    ref = torch.logsumexp((x + shift).masked_fill(~mask, NEG), dim=1)
    (ref * upstream).sum().backward()
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12 * scale)
    torch.testing.assert_close(g_got, x.grad, rtol=1e-12, atol=1e-12)
    assert torch.all(g_got[~mask] == 0)
    assert torch.isfinite(got).all()


def test_masked_lse_shift_buffer_is_consumed_and_no_double_backward():
    x = torch.randn(3, 5, requires_grad=True)
    shift = torch.zeros(3, 5)
    out = masked_lse(x, None, shift=shift)
    assert not torch.equal(shift, torch.zeros(3, 5))  # documented: the buffer is overwritten
    (grad,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(grad.sum(), x)


def test_masked_lse_infinite_rows_match_torch():
    x = torch.tensor([[0.0, float("inf"), 1.0], [-float("inf")] * 3, [1.0, -float("inf"), 2.0]])
    torch.testing.assert_close(masked_lse(x, None), torch.logsumexp(x, dim=1))
