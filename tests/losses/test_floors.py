"""The floors of the debiased negative mass, the clamp statistic, and the learning-signal pin of issue 13."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

import contrastlab as cl
from contrastlab import ContrastiveBatch
from contrastlab.losses.floor_analysis import curl_like_rows, signal_report, with_floor
from contrastlab.losses.floors import trimmed_log_mass
from contrastlab.platform.errors import ConfigError

DEBIASED = [("dcl", {"tau_plus": 0.1}), ("hcl", {"tau_plus": 0.1, "beta": 1.0}), ("pucl", {"alpha": 0.12, "c": 0.1})]


def test_trimmed_mass_is_n_times_mean_of_smallest_kept(ref) -> None:
    b = ref.masked_batch(A=12, N=9, seed=4)
    for pi in (0.0, 0.1, 0.34, 0.9):
        got = trimmed_log_mass(b, pi)
        mask = b.valid_mask()
        for i in range(b.num_anchors):
            ln = b.neg_logits[i][mask[i]]
            n = ln.numel()
            keep = max(1, math.ceil((1 - pi) * n - 1e-9))
            want = math.log(n * torch.sort(torch.exp(ln)).values[:keep].mean())
            assert abs(float(got[i]) - want) < 1e-10, (pi, i)


def test_trimmed_floor_with_no_false_negatives_is_infonce() -> None:
    b = curl_like_rows(anchors=64, negatives=127, seed=1)
    dcl0 = cl.make_loss("dcl", tau_plus=0.0, reduction="none")(b)
    torch.testing.assert_close(dcl0, cl.make_loss("infonce", reduction="none")(b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("name", "hp"), DEBIASED)
def test_trimmed_floor_is_shift_invariant_and_between_row_min_and_infonce(name, hp) -> None:
    b = curl_like_rows(anchors=64, negatives=127, spread=9.0, seed=2)
    loss = cl.make_loss(name, reduction="none", **hp)
    shift = torch.linspace(-50, 80, 64, dtype=torch.float64)[:, None]
    shifted = replace(b, pos_logits=b.pos_logits + shift, neg_logits=b.neg_logits + shift,
                      floor_logit=b.floor_logit + shift[:, 0])
    torch.testing.assert_close(loss(shifted), loss(b), rtol=1e-9, atol=1e-9)
    # a higher floor never lowers the loss: row_min <= trimmed (the trimmed mean is >= the row minimum)
    assert bool((loss(with_floor(b, "row_min")) <= loss(b) + 1e-12).all())


@pytest.mark.parametrize(("name", "hp"), [*DEBIASED, ("debiased_pos", {"tau_plus": 0.1})])
def test_clamped_frac_is_recorded_and_exact(name, hp, ref) -> None:
    b = with_floor(curl_like_rows(anchors=200, negatives=127, spread=8.0, seed=3), "row_min")
    loss = cl.make_loss(name, **hp)
    loss(b)
    frac = loss.last_stats["clamped_frac"]
    assert frac.dim() == 0 and not frac.requires_grad
    if name == "dcl":  # brute force from the formula: the estimate is below N e^{min}
        N = b.neg_logits.shape[1]
        est = (torch.exp(b.neg_logits).sum(1) - N * 0.1 * torch.exp(b.pos_logits[:, 0])) / 0.9
        want = (est <= N * torch.exp(b.neg_logits.amin(1))).double().mean()
        assert abs(float(frac) - float(want)) < 1e-6 and float(want) > 0.2
    assert 0.0 <= float(frac) <= 1.0


def test_losses_without_a_floor_record_nothing() -> None:
    b = curl_like_rows(anchors=16, negatives=15, seed=0)
    for name in ("infonce", "bcl"):
        loss = cl.make_loss(name)
        loss(b)
        assert "clamped_frac" not in loss.last_stats


@pytest.mark.parametrize("spread", [5.0, 8.0, 11.0])
@pytest.mark.parametrize(("name", "hp"), DEBIASED)
def test_bilinear_default_never_drops_an_anchor_with_infonce_signal(name, hp, spread) -> None:
    """Issue 13's pin: on rows with CURL's logit spread, wherever InfoNCE's loss is > 0.1, the default floor
    keeps at least 5 % of InfoNCE's gradient on the positive; the old row_min floor does not."""
    z = torch.Generator().manual_seed(int(spread))
    q, k = (torch.randn(256, 50, generator=z, dtype=torch.float64) for _ in range(2))
    default = cl.make_sampler("query_key", embed_dim=50)(q, k)
    assert default.negative_floor == "trimmed"  # the sampler's default for bilinear scores
    rows = curl_like_rows(anchors=512, negatives=511, spread=spread, seed=7)
    infonce = cl.make_loss("infonce")
    loss = cl.make_loss(name, **hp)
    new = signal_report(loss, replace(rows, negative_floor=default.negative_floor), infonce)
    old = signal_report(loss, with_floor(rows, "row_min"), infonce)
    assert new["active_frac"] > 0.3
    assert new["lost_signal_frac"] == 0.0, new
    if spread >= 8.0:  # at spread 5 the row minimum is close enough that the old floor keeps some signal
        assert old["lost_signal_frac"] > 0.05, old


def test_query_key_floor_option() -> None:
    q, k = torch.randn(8, 4, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
    old = cl.make_sampler("query_key", embed_dim=4, floor="row_min")(q, k)
    assert old.negative_floor == "bound" and torch.equal(old.floor_logit, old.neg_logits.amin(1))
    cos = cl.make_sampler("query_key", similarity="cosine", temperature=0.2)(q, k)
    assert cos.negative_floor == "bound" and cos.floor_logit is None  # the papers' e^{-1/t}
    with pytest.raises(ConfigError, match="floor"):
        cl.make_sampler("query_key", floor="lowest")


def test_masked_rows_use_only_valid_negatives(ref) -> None:
    b: ContrastiveBatch = ref.masked_batch(A=6, N=9, seed=8)
    b = replace(b, negative_floor="trimmed")
    loss = cl.make_loss("dcl", tau_plus=0.3, reduction="none")
    torch.testing.assert_close(loss(b), ref.dcl(b, tau_plus=0.3), rtol=1e-10, atol=1e-10)


def test_clamp_meter_averages_between_pops() -> None:
    from contrastlab.losses.floors import ClampMeter

    b = with_floor(curl_like_rows(anchors=64, negatives=63, spread=9.0, seed=5), "row_min")
    meter, dcl, fracs = ClampMeter(), cl.make_loss("dcl", tau_plus=0.1), []
    for shift in (0.0, 2.0, 4.0):
        dcl(replace(b, pos_logits=b.pos_logits - shift))
        fracs.append(float(dcl.last_stats["clamped_frac"]))
        meter.update(dcl)
    assert meter.pop("x") == {"x": pytest.approx(sum(fracs) / 3)}
    assert meter.pop() == {}  # reset after a pop
    meter.update(cl.make_loss("infonce"))  # a loss without a floor records nothing
    assert meter.pop() == {}


def test_papers_bound_is_refused_for_bilinear_scores() -> None:
    with pytest.raises(ConfigError, match="no meaning for unbounded bilinear"):
        cl.make_sampler("query_key", embed_dim=4, floor="bound")
    assert cl.make_sampler("query_key", similarity="cosine", floor="bound").floor == "bound"


@pytest.mark.parametrize("name", ["dcl", "pucl"])
def test_clamped_frac_is_dtype_independent_at_large_spread(name):
    """row_min floor, CURL-like rows with a logit spread of 19 (what a real CURL run reached): in float32 the
    clamped rows' debiased difference is ≤ 0, but the resolution guard ``eps · e^a`` exceeded the floor
    ``N e^{min ℓ}``, so those rows were neither set to the floor nor counted: clamped_frac 0.57 instead of 0.94."""
    b64 = with_floor(curl_like_rows(anchors=512, negatives=127, spread=19.0, dtype=torch.float64), "row_min")
    b32 = replace(b64, pos_logits=b64.pos_logits.float(), neg_logits=b64.neg_logits.float(),
                  floor_logit=b64.floor_logit.float())
    fracs = []
    for b in (b64, b32):
        loss = cl.make_loss(name)
        loss(b)
        fracs.append(float(loss.last_stats["clamped_frac"]))
    assert fracs[0] > 0.5
    assert fracs[1] == pytest.approx(fracs[0], abs=2 / 512)
