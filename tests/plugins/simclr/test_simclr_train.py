"""simclr training: every unsupervised loss trains a step, label-leak guard, views, noise, queue/query_key."""

from __future__ import annotations

import pytest
import torch
from simclr_helpers import tiny_config

import contrastlab as cl
from contrastlab.data import load_dataset
from contrastlab.data.augment import augment_for
from contrastlab.plugins.simclr.trainer import Trainer, make_views, view_indices

UNSUPERVISED = [n for n in cl.list_losses() if not cl.loss_label_kinds(n)]


def _views(V=2, B=16, seed=0):
    ds = load_dataset("synthetic", size=64)
    aug = augment_for("synthetic", 32, size=16)
    idx = torch.arange(B)
    return make_views(ds.images, idx, aug, V, 0.0, torch.Generator().manual_seed(seed)), ds.labels[idx]


def _one_step(config, V=2):
    torch.manual_seed(0)
    trainer = Trainer(config, 3, torch.device("cpu"))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    views, labels = _views(V)
    loss = trainer.step(views, labels)
    changed = any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
    return trainer, float(loss), changed


def test_all_builtin_unsupervised_losses_are_covered():
    assert {"infonce", "dcl", "hcl", "bcl", "pucl", "debiased_pos"} <= set(UNSUPERVISED)


@pytest.mark.parametrize("loss", UNSUPERVISED)
def test_every_unsupervised_loss_trains_one_step(loss):
    trainer, value, changed = _one_step(tiny_config(loss))
    assert torch.isfinite(torch.tensor(value)) and changed and not trainer.label_aware


@pytest.mark.parametrize("loss", ["dcl", "pucl", "debiased_pos", "hcl"])
def test_multi_view_positive_corrections(loss):
    config = tiny_config(loss, "data.views=3")
    assert config.sampler.name == "multi_view"
    _, value, changed = _one_step(config, V=3)
    assert torch.isfinite(torch.tensor(value)) and changed


def test_label_leak_guard():
    seen = []

    def spy(trainer):
        inner = trainer.sampler.forward

        def forward(*args, labels=None):
            seen.append(labels)
            return inner(*args, labels=labels)
        trainer.sampler.forward = forward

    views, labels = _views()
    for loss, extra, expect in (("dcl", ("data.labels=class",), False), ("unbiased", ("data.labels=class",), True)):
        torch.manual_seed(0)
        trainer = Trainer(tiny_config(loss, *extra), 3, torch.device("cpu"))
        spy(trainer)
        trainer.step(views, labels)
        assert trainer.label_aware is expect
        assert (seen[-1] is not None) is expect
        if expect:
            assert torch.equal(seen[-1], labels)


@pytest.mark.parametrize("sampler", ["queue", "query_key"])
def test_momentum_key_encoder_samplers(sampler):
    extra = ("sampler.size=32",) if sampler == "queue" else ()
    config = tiny_config("infonce", *extra, sampler=sampler)
    torch.manual_seed(0)
    trainer = Trainer(config, 3, torch.device("cpu"))
    assert trainer.key_model is not None
    key_before = [p.clone() for p in trainer.key_model.parameters()]
    for seed in range(3):
        views, labels = _views(seed=seed)
        loss = trainer.step(views, labels)
        assert torch.isfinite(loss)
    assert all(not p.requires_grad for p in trainer.key_model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(key_before, trainer.key_model.parameters(), strict=True))
    if sampler == "query_key":   # the bilinear W is optimised with the network
        assert any(p is trainer.sampler.W for g in trainer.optimizer.param_groups for p in g["params"])


def test_positive_noise_replaces_positives_with_other_images():
    idx = torch.arange(100)
    g = torch.Generator().manual_seed(0)
    clean = view_indices(idx, 3, 0.0, 1000, g)
    assert torch.equal(clean, idx.repeat(3, 1))
    noisy = view_indices(idx, 3, 1.0, 1000, g)
    assert torch.equal(noisy[0], idx) and (noisy[1:] != idx).all()
    half = view_indices(idx.repeat(20), 2, 0.3, 1000, g)
    assert 0.25 < float((half[1] != half[0]).float().mean()) < 0.35


def test_optimizers_and_cosine_schedule():
    from contrastlab.plugins.simclr.optim import lr_factor

    for opt in ("sgd", "lars"):
        _, value, changed = _one_step(tiny_config("infonce", f"train.optimizer={opt}", "train.lr=0.1"))
        assert changed and torch.isfinite(torch.tensor(value))
    assert lr_factor(0, 100, 10, "cosine") == pytest.approx(0.1)
    assert lr_factor(10, 100, 10, "cosine") == pytest.approx(1.0)
    assert lr_factor(100, 100, 10, "cosine") == pytest.approx(0.0, abs=1e-9)
    assert lr_factor(50, 100, 0, "constant") == 1.0
