"""DCL/HCL specifics not covered by the shared reference tests."""

from __future__ import annotations

import math

import pytest
import torch

import contrastlab as cl
from contrastlab import ConfigError


@pytest.mark.parametrize("beta", [0.5, 2.0])
@pytest.mark.parametrize("masked", [False, True])
def test_hcl_detached_weights_give_the_reference_value(beta, masked, ref):
    """``detach_weights`` changes gradients only: the value is still HCL's ``Σ_j w_j e^{ℓ_j}`` with
    ``w_j = N e^{βℓ_j} / Σ_k e^{βℓ_k}`` (β ≠ 1 tells ``βℓ`` from ``ℓ/β``)."""
    b = ref.masked_batch(seed=5) if masked else ref.two_view_batch(B=6, seed=5)
    got = cl.make_loss("hcl", tau_plus=0.1, beta=beta, detach_weights=True, reduction="none")(b)
    torch.testing.assert_close(got, ref.hcl(b, 0.1, beta), rtol=1e-10, atol=1e-10)


def test_hcl_rejects_an_infinite_beta(ref):
    with pytest.raises(ConfigError, match="beta"):
        cl.make_loss("hcl", beta=math.inf)


@pytest.mark.parametrize("detach", [False, True])
def test_hcl_far_below_zero_unbounded_logits_with_masked_columns(detach, ref):
    """Unbounded logits near −800 (exp underflows in float64) in a masked row: only valid columns may set the
    fused kernels' shift (masked columns hold 0 after validation), so the value is the shift-free one."""
    from dataclasses import replace

    b = ref.masked_batch(seed=6, t=1.0, labels=False)
    b = replace(b, bounded=False, floor_logit=-30.0)
    far = replace(b, pos_logits=b.pos_logits - 800.0, neg_logits=b.neg_logits - 800.0, floor_logit=-830.0)
    loss = cl.make_loss("hcl", tau_plus=0.1, beta=0.5, detach_weights=detach, reduction="none")
    torch.testing.assert_close(loss(far), loss(b), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(loss(b), ref.hcl(b, 0.1, 0.5), rtol=1e-10, atol=1e-10)
