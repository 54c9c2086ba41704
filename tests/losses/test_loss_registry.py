"""The nine losses are registered with documented hyperparameters, label kinds and paper defaults."""

from __future__ import annotations

import torch

import contrastlab as cl
from contrastlab.losses import LOSSES

NAMES = {"infonce", "dcl", "hcl", "bcl", "pucl", "punce", "debiased_pos", "supcon", "unbiased"}
FIXED_HPARAMS = {
    "dcl": {"tau_plus"}, "hcl": {"tau_plus", "beta"}, "bcl": {"tau_plus", "alpha", "beta"}, "pucl": {"alpha", "c"},
    "punce": {"prior"}, "debiased_pos": {"tau_plus", "aggregation"}, "supcon": {"aggregation"},
}


def test_all_nine_registered():
    assert set(cl.list_losses()) >= NAMES
    assert {c.name for c in LOSSES} == NAMES


def test_label_kinds():
    assert cl.loss_label_kinds("supcon") == {"class", "pu"}
    assert cl.loss_label_kinds("unbiased") == {"class"}
    assert cl.loss_label_kinds("punce") == {"pu"}
    for name in NAMES - {"supcon", "unbiased", "punce"}:
        assert cl.loss_label_kinds(name) == frozenset()
    assert type(cl.make_loss("unbiased")).oracle is True


def test_hyperparameters_documented_and_defaults_valid():
    for cls in LOSSES:
        names = {hp.name for hp in cls.hyperparameters}
        assert FIXED_HPARAMS.get(cls.name, set()) <= names
        assert cls.description and "\n" not in cls.description
        for hp in cls.hyperparameters:
            assert hp.description and hp.range and hp.source, (cls.name, hp.name)
            hp.validate(hp.default, cls.name)
        loss = cl.make_loss(cls.name)
        assert isinstance(loss, torch.nn.Module)
        for hp in cls.hyperparameters:
            assert getattr(loss, hp.name) == hp.default


def test_paper_defaults():
    assert cl.make_loss("dcl").tau_plus == 0.1
    hcl = cl.make_loss("hcl")
    assert (hcl.tau_plus, hcl.beta, hcl.detach_weights) == (0.1, 1.0, False)
    bcl = cl.make_loss("bcl")
    assert (bcl.tau_plus, bcl.alpha, bcl.beta) == (0.1, 0.9, 0.9)
    assert cl.make_loss("debiased_pos").aggregation == "outer"
    assert cl.make_loss("supcon").aggregation == "out"


def test_every_sampler_registered():
    assert {"two_view", "multi_view", "query_key", "queue"} <= set(cl.list_samplers())
