"""recsys trainer pieces: the bilinear W starts at the identity (frozen unless asked), the ranking scores, one step."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import contrastlab as cl
from contrastlab.platform.config import resolve_config
from contrastlab.plugins.recsys.pairs import build_batch
from contrastlab.plugins.recsys.split import Split, make_part
from contrastlab.plugins.recsys.task import RecsysTask
from contrastlab.plugins.recsys.trainer import build_model, make_scorer, train_step

USERS, ITEMS = torch.tensor([0, 0, 1, 2, 3, 3]), torch.tensor([0, 1, 1, 2, 3, 4])
SPLIT = Split(make_part(USERS, ITEMS, 4, 5), make_part(torch.tensor([1]), torch.tensor([0]), 4, 5), 4, 5, 0, "toy")


def _config(similarity: str, *extra: str):
    sets = ["encoder.dim=6", f"sampler.similarity={similarity}", *extra]
    return resolve_config(RecsysTask(), preset="smoke", loss="dcl", sets=sets, encoder="mf")


@pytest.mark.parametrize("learn", [False, True])
def test_bilinear_w_starts_at_the_identity_and_trains_only_when_asked(learn):
    model = build_model(_config("bilinear", f"model.learn_bilinear={str(learn).lower()}"), SPLIT, torch.device("cpu"))
    assert torch.equal(model.sampler.W.detach(), torch.eye(6))
    assert model.sampler.W.requires_grad is learn
    optimised = {id(p) for p in model.parameters()}
    assert (id(model.sampler.W) in optimised) is learn
    assert {id(model.encoder.user.weight), id(model.encoder.item.weight)} <= optimised


def test_ranking_scores_are_cosine_or_u_w_i_without_the_temperature():
    cos_model = build_model(_config("cosine"), SPLIT, torch.device("cpu"))
    u, i = (t.detach().double() for t in cos_model.encoder())
    want = F.normalize(u, dim=1) @ F.normalize(i, dim=1).T  # cos(u, i); the temperature 0.2 does not enter
    torch.testing.assert_close(make_scorer(cos_model)(1, 3).double(), want[1:3], rtol=1e-5, atol=1e-6)
    bil = build_model(_config("bilinear"), SPLIT, torch.device("cpu"))
    w = torch.randn(6, 6, dtype=torch.float64)
    with torch.no_grad():
        bil.sampler.W.copy_(w)  # a learnt W: the score is u W iᵀ
    u, i = (t.detach().double() for t in bil.encoder())
    torch.testing.assert_close(make_scorer(bil)(0, 4).double(), u @ w @ i.T, rtol=1e-5, atol=1e-6)


def test_a_step_returns_the_loss_before_the_update_and_the_clamp_fraction():
    model = build_model(_config("cosine"), SPLIT, torch.device("cpu"))
    loss_fn = cl.make_loss("dcl", tau_plus=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    before = model.encoder.user.weight.detach().clone()
    users, items = SPLIT.train.users, SPLIT.train.items
    u, i = model.encoder()
    want = loss_fn(build_batch(model.sampler, u, i, users, items, None, mode="in_batch", train_keys=None,
                               num_items=5))
    got = train_step(model, loss_fn, opt, users, items, None, mode="in_batch", train_keys=None, num_items=5)
    assert float(got.loss) == pytest.approx(float(want.detach())) and not got.loss.requires_grad
    assert got.clamped_frac is not None and 0.0 <= float(got.clamped_frac) <= 1.0
    assert not torch.equal(model.encoder.user.weight.detach(), before)  # the step updated the embeddings
