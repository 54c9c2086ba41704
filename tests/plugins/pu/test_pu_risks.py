"""uPU / nnPU / PN risks (losses-spec.md §2.5; Kiryo et al. 2017 Algorithm 1)."""

from __future__ import annotations

import pytest
import torch

from contrastlab import ConfigError
from contrastlab.plugins.pu.risks import PURisk, logistic_loss, sigmoid_loss


def _manual(z_p: torch.Tensor, z_u: torch.Tensor, prior: float, loss=sigmoid_loss) -> tuple[float, float]:
    pos = prior * loss(z_p, 1.0).mean()
    neg = loss(z_u, -1.0).mean() - prior * loss(z_p, -1.0).mean()
    return float(pos), float(neg)


@pytest.mark.parametrize("surrogate", ["sigmoid", "logistic"])
def test_nnpu_equals_upu_when_negative_risk_nonnegative(surrogate: str) -> None:
    gen = torch.Generator().manual_seed(0)
    z_p = (torch.randn(64, generator=gen) + 0.5).requires_grad_()
    z_u = (torch.randn(256, generator=gen) + 0.5).requires_grad_()
    nn_out = PURisk("nnpu", prior=0.4, surrogate_name=surrogate)(z_p, z_u)
    up_out = PURisk("upu", prior=0.4, surrogate_name=surrogate)(z_p, z_u)
    assert float(nn_out.negative_risk) >= 0 and not nn_out.ascent
    assert torch.allclose(nn_out.value, up_out.value)
    g_nn = torch.autograd.grad(nn_out.objective, [z_p, z_u])
    g_up = torch.autograd.grad(up_out.objective, [z_p, z_u])
    assert all(torch.allclose(a, b) for a, b in zip(g_nn, g_up, strict=True))
    loss = sigmoid_loss if surrogate == "sigmoid" else logistic_loss
    pos, neg = _manual(z_p.detach(), z_u.detach(), 0.4, loss)
    assert float(up_out.value) == pytest.approx(pos + neg, rel=1e-5)


def _overfit_case() -> tuple[torch.Tensor, torch.Tensor]:
    # Unlabeled scores very negative, positives strongly positive but the prior large: r⁻ < 0.
    z_p = torch.full((32,), -1.0).requires_grad_()
    z_u = torch.full((128,), -6.0).requires_grad_()
    return z_p, z_u


def test_gradient_ascent_rule_fires_under_its_condition() -> None:
    z_p, z_u = _overfit_case()
    risk = PURisk("nnpu", prior=0.5, gamma=0.5)
    out = risk(z_p, z_u)
    pos, neg = _manual(z_p.detach(), z_u.detach(), 0.5)
    assert neg < 0 and out.ascent
    assert float(out.negative_risk) == pytest.approx(neg, rel=1e-5)
    # objective is −γ r⁻: its gradient is −γ ∇ r⁻
    r_neg = sigmoid_loss(z_u, -1.0).mean() - 0.5 * sigmoid_loss(z_p, -1.0).mean()
    g_expected = torch.autograd.grad(-0.5 * r_neg, [z_p, z_u])
    g_out = torch.autograd.grad(out.objective, [z_p, z_u])
    assert all(torch.allclose(a, b) for a, b in zip(g_out, g_expected, strict=True))
    # a step along −∇objective increases r⁻ (ascent on the negative risk)
    with torch.no_grad():
        z_p2, z_u2 = z_p - 1.0 * g_out[0], z_u - 1.0 * g_out[1]
    assert _manual(z_p2, z_u2, 0.5)[1] > neg
    # with a threshold β above |r⁻| the rule does not fire, and the step is on R̃ (negative part clamped)
    quiet = PURisk("nnpu", prior=0.5, beta=abs(neg) + 0.1)(z_p, z_u)
    assert not quiet.ascent
    assert float(quiet.objective.detach()) == pytest.approx(pos, rel=1e-5)


def test_nnpu_value_is_nonnegative_and_upu_can_be_negative() -> None:
    gen = torch.Generator().manual_seed(1)
    saw_negative_upu = False
    for _ in range(50):
        z_p = torch.randn(16, generator=gen) * 4
        z_u = torch.randn(64, generator=gen) * 4 - 3
        prior = float(torch.rand(1, generator=gen) * 0.9 + 0.05)
        for surrogate in ("sigmoid", "logistic"):
            nn_out = PURisk("nnpu", prior=prior, surrogate_name=surrogate)(z_p, z_u)
            up_out = PURisk("upu", prior=prior, surrogate_name=surrogate)(z_p, z_u)
            assert float(nn_out.value) >= 0.0
            assert float(nn_out.value) >= float(up_out.value) - 1e-6
            saw_negative_upu |= float(up_out.value) < 0
    z_p, z_u = _overfit_case()
    assert float(PURisk("upu", prior=0.9)(z_p, z_u).value) < 0 or saw_negative_upu


def test_pn_treats_unlabeled_as_negative() -> None:
    z_p = torch.tensor([2.0, 1.0])
    z_u = torch.tensor([-1.0, 0.5, 3.0])
    out = PURisk("pn", labeled_share=0.25, surrogate_name="logistic")(z_p, z_u)
    expected = 0.25 * logistic_loss(z_p, 1.0).mean() + 0.75 * logistic_loss(z_u, -1.0).mean()
    assert float(out.value) == pytest.approx(float(expected))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "vpu"}, r"^classifier\.risk='vpu'"),  # the config's key (it said probe.risk)
        ({"prior": 0.0}, r"\(0, 1\)"),
        ({"prior": 1.0}, r"\(0, 1\)"),
        ({"beta": -0.1}, r"^classifier\.beta"),
        ({"gamma": 0.0}, r"^classifier\.gamma"),
        ({"surrogate_name": "hinge"}, r"^classifier\.surrogate"),
    ],
)
def test_bad_risk_settings(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        PURisk(**kwargs)


def test_nnpu_hand_example_in_the_negative_risk_branch() -> None:
    """Worked by hand with ℓ = σ(−yz): z_p = ln 3 gives R̂_p⁺ = σ(−ln 3) = 1/4 and R̂_p⁻ = 3/4; z_u = −ln 3 gives
    R̂_u⁻ = 1/4. With π = 1/2: π R̂_p⁺ = 1/8 and r⁻ = 1/4 − 3/8 = −1/8 < 0, so nnPU = 1/8 + 0, uPU = 0, and the
    step minimises −γ r⁻, whose gradient is −γ σ'(z_u) = −3γ/16 in z_u and +γ π σ'(z_p) = 3γ/32 in z_p."""
    import math

    z_p = torch.tensor([math.log(3.0)], requires_grad=True)
    z_u = torch.tensor([-math.log(3.0)], requires_grad=True)
    gamma = 0.5
    out = PURisk("nnpu", prior=0.5, gamma=gamma)(z_p, z_u)
    assert out.ascent
    assert float(out.positive_risk) == pytest.approx(1 / 8)
    assert float(out.negative_risk) == pytest.approx(-1 / 8)
    assert float(out.value) == pytest.approx(1 / 8)
    assert float(out.objective.detach()) == pytest.approx(gamma / 8)
    out.objective.backward()
    assert float(z_u.grad) == pytest.approx(-3 * gamma / 16)
    assert float(z_p.grad) == pytest.approx(3 * gamma / 32)
    assert float(PURisk("upu", prior=0.5)(z_p, z_u).value) == pytest.approx(0.0, abs=1e-7)
