"""BCL's numerical experiment (losses-spec §6.5, §9.4): the importance weights debias the negative mean.

Scores are drawn from the paper's generative process (true negatives from φ_Tn, false negatives from φ_Fn by
accept-reject on a sliding uniform proposal); θ̂_BCL = mean(ω·x̂) must be closer to the true-negative mean θ_Sup
than the biased mean, and the weights must average to ≈ 1.
"""

from __future__ import annotations

import math

import torch

from contrastlab.losses.bcl import bcl_weights, ecdf


def _draw(n: int, alpha: float, false_neg: bool, lo: float, hi: float, g: torch.Generator) -> torch.Tensor:
    out = []
    while len(out) < n:
        x = lo + (hi - lo) * torch.rand(4 * n, generator=g, dtype=torch.float64)
        F = (x - lo) / (hi - lo)
        u = torch.rand(4 * n, generator=g, dtype=torch.float64)
        accept = (1 - alpha + (2 * alpha - 1) * F) / alpha if false_neg else (alpha + (1 - 2 * alpha) * F) / alpha
        out.extend(x[u <= accept].tolist())
    return torch.tensor(out[:n], dtype=torch.float64)


def test_bcl_reduces_mse_of_negative_mean():
    alpha, beta, tau_plus, t, N, anchors, gamma = 0.9, 0.5, 0.1, 0.5, 64, 400, 0.1
    g = torch.Generator().manual_seed(0)
    scores, is_tn = [], []
    for _ in range(anchors):
        shift = gamma * (2 * torch.rand((), generator=g, dtype=torch.float64).item() - 1)
        lo, hi = -0.5 + shift, 0.5 + shift
        fn = torch.rand(N, generator=g) < tau_plus
        x = torch.empty(N, dtype=torch.float64)
        x[fn] = _draw(int(fn.sum()), alpha, True, lo, hi, g)
        x[~fn] = _draw(int((~fn).sum()), alpha, False, lo, hi, g)
        scores.append(torch.exp(x / t))
        is_tn.append(~fn)
    s, tn = torch.stack(scores), torch.stack(is_tn)
    w = bcl_weights(ecdf(torch.log(s), None), tau_plus, alpha, beta)
    theta_sup = (s * tn).sum(1) / tn.sum(1)
    mse_bcl = ((w * s).mean(1) - theta_sup).pow(2).mean()
    mse_biased = (s.mean(1) - theta_sup).pow(2).mean()
    assert abs(float(w.mean()) - 1.0) < 0.05
    assert float(mse_bcl) < 0.6 * float(mse_biased), (float(mse_bcl), float(mse_biased))
    assert math.isfinite(float(mse_bcl))
