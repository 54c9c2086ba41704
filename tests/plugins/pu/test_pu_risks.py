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


def _ref_surrogate(z: torch.Tensor, y: float, surrogate: str) -> torch.Tensor:
    """ℓ(z, y) written from its definition: σ(−yz) = 1/(1 + e^{yz}), softplus(−yz) = log(1 + e^{−yz})."""
    if surrogate == "sigmoid":
        return 1.0 / (1.0 + torch.exp(y * z))
    return torch.log(1.0 + torch.exp(-y * z))


def _ref_risk(kind: str, z_p: torch.Tensor, z_u: torch.Tensor, prior: float, surrogate: str, beta: float,
              gamma: float, share: float) -> tuple[torch.Tensor, float, float, float, bool]:
    """(objective, value, positive part, negative part, ascent) straight from losses-spec.md §2.5 and Kiryo et al.
    2017 Algorithm 1: ascent on r⁻ = R̂_u⁻ − π R̂_p⁻ (minimise −γ r⁻) iff r⁻ < −β, else a step on
    R̃_nnPU = π R̂_p⁺ + max{0, r⁻}; uPU is π R̂_p⁺ + r⁻; PN is w R̂_p⁺ + (1 − w) R̂_u⁻."""
    rp_pos = _ref_surrogate(z_p, 1.0, surrogate).sum() / z_p.numel()
    ru_neg = _ref_surrogate(z_u, -1.0, surrogate).sum() / z_u.numel()
    if kind == "pn":
        pos, neg = share * rp_pos, (1 - share) * ru_neg
        return pos + neg, (pos + neg).item(), pos.item(), neg.item(), False
    rp_neg = _ref_surrogate(z_p, -1.0, surrogate).sum() / z_p.numel()
    pos, neg = prior * rp_pos, ru_neg - prior * rp_neg
    if kind == "upu":
        return pos + neg, (pos + neg).item(), pos.item(), neg.item(), False
    value = pos.item() + max(0.0, neg.item())
    if neg.item() < -beta:
        return -gamma * neg, value, pos.item(), neg.item(), True
    return (pos + neg if neg.item() >= 0 else pos), value, pos.item(), neg.item(), False


@pytest.mark.parametrize("surrogate", ["sigmoid", "logistic"])
@pytest.mark.parametrize("kind", ["nnpu", "upu", "pn"])
def test_every_risk_and_its_gradient_match_the_formulas(kind: str, surrogate: str) -> None:
    """All fields and the gradient of the objective against the reference, over draws that land in both nnPU
    branches (and, with β > 0, in the −β ≤ r⁻ < 0 band where Algorithm 1 steps on π R̂_p⁺ alone)."""
    gen = torch.Generator().manual_seed(7)
    branches = set()
    for trial in range(24):
        z_p = (torch.randn(9, generator=gen) * 3 + 1).double().requires_grad_()
        z_u = (torch.randn(13, generator=gen) * 3 - 2 + 0.25 * trial).double().requires_grad_()
        prior, share = 0.2 + 0.03 * trial, 0.1 + 0.03 * trial
        beta, gamma = (0.0, 1.0) if trial % 2 else (0.05, 0.3)
        out = PURisk(kind, prior=prior, surrogate_name=surrogate, beta=beta, gamma=gamma, labeled_share=share)(z_p, z_u)
        objective, value, pos, neg, ascent = _ref_risk(kind, z_p, z_u, prior, surrogate, beta, gamma, share)
        assert out.ascent is ascent
        assert float(out.value) == pytest.approx(value, rel=1e-5, abs=1e-7)
        assert float(out.positive_risk) == pytest.approx(pos, rel=1e-5, abs=1e-7)
        assert float(out.negative_risk) == pytest.approx(neg, rel=1e-5, abs=1e-7)
        assert out.objective.item() == pytest.approx(objective.item(), rel=1e-5, abs=1e-7)
        got = torch.autograd.grad(out.objective, [z_p, z_u], allow_unused=True)
        want = torch.autograd.grad(objective, [z_p, z_u], allow_unused=True)
        for a, b in zip(got, want, strict=True):
            a = torch.zeros(1, dtype=torch.float64) if a is None else a
            b = torch.zeros(1, dtype=torch.float64) if b is None else b
            assert torch.allclose(a.double(), b, rtol=1e-4, atol=1e-7)
        branches.add((ascent, neg >= 0))
    if kind == "nnpu":
        assert branches == {(True, False), (False, True), (False, False)}  # ascent, r⁻ ≥ 0, the −β band


def test_the_ascent_rule_is_strict_at_zero() -> None:
    """Algorithm 1 ascends only when r⁻ < −β: at r⁻ = 0 exactly (β = 0) the step is on R̃, i.e. the uPU gradient.
    σ(0) = 1/2 and σ(−200) = 0 in float32, so with π = 1/2: R̂_u⁻ = (1/2 + 0)/2 = 1/4 = π R̂_p⁻."""
    z_p = torch.tensor([0.0], requires_grad=True)
    z_u = torch.tensor([0.0, -200.0], requires_grad=True)
    out = PURisk("nnpu", prior=0.5)(z_p, z_u)
    assert float(out.negative_risk) == 0.0 and not out.ascent
    upu = PURisk("upu", prior=0.5)(z_p, z_u)
    got = torch.autograd.grad(out.objective, [z_p, z_u])
    want = torch.autograd.grad(upu.objective, [z_p, z_u])
    assert all(torch.allclose(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("kind", ["nnpu", "upu", "pn"])
def test_reported_parts_are_detached_and_only_nnpu_ascends(kind: str) -> None:
    """``value``, ``positive_risk`` and ``negative_risk`` are documented as detached (a caller may keep them
    without holding the graph), and ``ascent`` (logged as classifier/ascent_fraction) is never set by uPU or PN."""
    for z_p, z_u in (_overfit_case(), (torch.ones(4).requires_grad_(), torch.ones(6).requires_grad_())):
        out = PURisk(kind, prior=0.5)(z_p, z_u)
        assert out.objective.requires_grad
        assert not any(t.requires_grad for t in (out.value, out.positive_risk, out.negative_risk))
        if kind != "nnpu":
            assert not out.ascent


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gamma": 1.5}, r"^classifier\.gamma"),
        ({"kind": "pn", "labeled_share": 0.0}, r"labeled_share"),
        ({"kind": "pn", "labeled_share": 1.0}, r"labeled_share"),
        ({"kind": "pn", "labeled_share": 1.5}, r"labeled_share"),
    ],
)
def test_risk_setting_boundaries(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        PURisk(**kwargs)
    PURisk(gamma=1.0, beta=0.0, labeled_share=0.999)  # the closed ends are valid


@pytest.mark.parametrize("empty", ["labeled", "unlabeled"])
def test_an_empty_batch_is_refused(empty: str) -> None:
    z_p = torch.zeros(0) if empty == "labeled" else torch.ones(3)
    z_u = torch.zeros(0) if empty == "unlabeled" else torch.ones(3)
    with pytest.raises(ConfigError, match="at least one"):
        PURisk("upu")(z_p, z_u)
