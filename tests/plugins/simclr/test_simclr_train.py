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


def _spy_on_sampler_labels(trainer, seen):
    """Record in ``seen`` the ``labels`` each call of ``trainer``'s sampler receives."""
    inner = trainer.sampler.forward

    def forward(*args, labels=None):
        seen.append(labels)
        return inner(*args, labels=labels)
    trainer.sampler.forward = forward


def test_label_leak_guard():
    seen = []
    views, labels = _views()
    for loss, extra, expect in (("dcl", ("data.labels=class",), False), ("unbiased", ("data.labels=class",), True)):
        torch.manual_seed(0)
        trainer = Trainer(tiny_config(loss, *extra), 3, torch.device("cpu"))
        _spy_on_sampler_labels(trainer, seen)
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


def test_fed_inputs_follow_the_number_of_views():
    from contrastlab.plugins.simclr.trainer import fed_inputs

    assert fed_inputs(2) == {"two_views", "multi_views", "query_key", "queue"}
    assert fed_inputs(3) == fed_inputs(5) == {"multi_views"}


def test_a_false_positive_is_any_other_image_with_equal_probability():
    """DebiasedPos's type-I error: a swapped view comes from a uniformly random *different* image."""
    g = torch.Generator().manual_seed(0)
    idx = torch.arange(4).repeat(3000)
    src = view_indices(idx, 2, 1.0, 4, g)
    offsets = torch.bincount((src[1] - src[0]) % 4, minlength=4).double() / len(idx)
    assert offsets[0] == 0 and torch.allclose(offsets[1:], torch.full((3,), 1 / 3, dtype=torch.float64), atol=0.03)
    pair = view_indices(torch.tensor([0, 1] * 50), 3, 1.0, 2, g)   # two images: the other one, always
    assert torch.equal(pair[1:], 1 - pair[0].repeat(2, 1))


def test_the_key_encoder_is_an_exponential_moving_average_of_the_online_one():
    """MoCo: θ_k ← m θ_k + (1 − m) θ_q for parameters; buffers (BatchNorm statistics) are copied."""
    config = tiny_config("infonce", "model.key_momentum=0.9", sampler="query_key")
    torch.manual_seed(0)
    trainer = Trainer(config, 3, torch.device("cpu"))
    with torch.no_grad():
        for p in trainer.key_model.parameters():
            p.normal_()
        for b in trainer.model.buffers():
            b.add_(1)
    keys = [p.clone() for p in trainer.key_model.parameters()]
    queries = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.update_key_model()
    for new, k, q in zip(trainer.key_model.parameters(), keys, queries, strict=True):
        torch.testing.assert_close(new, 0.9 * k + 0.1 * q)
    assert all(torch.equal(a, b) for a, b in zip(trainer.key_model.buffers(), trainer.model.buffers(), strict=True))


def test_learning_rate_of_a_step_and_the_warm_up_length():
    from contrastlab.plugins.simclr.optim import lr_factor

    config = tiny_config("infonce", "train.lr=0.01", "train.schedule=cosine", "train.warmup_epochs=0.5")
    torch.manual_seed(0)
    trainer = Trainer(config, 3, torch.device("cpu"))
    views, labels = _views()
    loss = trainer.step(views, labels)                              # lr_scale defaults to 1: the configured lr
    assert not loss.requires_grad and loss.dim() == 0
    assert all(g["lr"] == pytest.approx(0.01) for g in trainer.optimizer.param_groups)
    trainer.step(views, labels, lr_scale=0.25)
    assert all(g["lr"] == pytest.approx(0.0025) for g in trainer.optimizer.param_groups)
    for step in (0, 3, 5, 40):                                      # 0.5 epochs of 10 steps: 5 warm-up steps
        assert trainer.lr_scale(step, 100, 10) == pytest.approx(lr_factor(step, 100, 5, "cosine"))


def test_projections_are_float32_on_the_cpu_and_float64_for_a_float64_model():
    """bf16 autocast is for CUDA only (model.bf16 is on by default): on the CPU ``embed`` is the head's output."""
    config = tiny_config("infonce")
    assert config.model.bf16
    torch.manual_seed(0)
    trainer = Trainer(config, 3, torch.device("cpu"))
    views, _ = _views()
    trainer.model.eval()
    with torch.no_grad():
        z = trainer.embed(views[0])
        _, ref = trainer.model(views[0].contiguous())
    assert z.dtype == torch.float32
    torch.testing.assert_close(z, ref, rtol=1e-5, atol=1e-5)       # bf16 would be off by ~1e-2
    trainer.model.double()
    with torch.no_grad():
        assert trainer.embed(views[0].double()).dtype == torch.float64


@pytest.mark.parametrize("sampler", ["query_key", None])
def test_a_checkpoint_restores_the_networks_and_the_key_encoder(sampler):
    config = tiny_config("infonce", sampler=sampler)
    torch.manual_seed(0)
    trained = Trainer(config, 3, torch.device("cpu"))
    views, labels = _views()
    trained.step(views, labels)
    state = trained.state_dict()
    assert (state["key_model"] is None) is (sampler is None)
    torch.manual_seed(1)
    fresh = Trainer(config, 3, torch.device("cpu"))
    fresh.load_state_dict(state)
    for a, b in ((trained.model, fresh.model), (trained.key_model, fresh.key_model)):
        if a is not None:
            assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert fresh.optimizer.state_dict()["state"].keys() == trained.optimizer.state_dict()["state"].keys()
    if sampler is not None:                                         # a state without the key encoder keeps its own
        fresh.load_state_dict({k: v for k, v in state.items() if k != "key_model"})
        assert all(torch.equal(x, y) for x, y in zip(fresh.key_model.parameters(), trained.key_model.parameters(),
                                                     strict=True))


def test_swapped_views_come_from_the_whole_dataset():
    """make_views draws a false positive among all images (not just the first few) and keeps the anchor's."""
    images = torch.arange(50, dtype=torch.uint8).view(50, 1, 1, 1).expand(50, 1, 2, 2).contiguous()
    out = make_views(images, torch.arange(10), lambda x, generator: x.float(), 2, 1.0,
                     torch.Generator().manual_seed(0))
    src = out[:, :, 0, 0, 0]                                        # the source image of every view [V, B]
    assert out.shape == (2, 10, 1, 2, 2) and torch.equal(src[0], torch.arange(10).float())
    assert (src[1] != src[0]).all() and src[1].max() >= 10


def test_compile_and_the_memory_format_follow_the_config():
    plain = Trainer(tiny_config("infonce", "model.channels_last=false"), 3, torch.device("cpu"))
    assert plain.net is plain.model and plain.memory_format == torch.contiguous_format
    fast = Trainer(tiny_config("infonce", "model.compile=true", "model.channels_last=true"), 3, torch.device("cpu"))
    assert fast.net is not fast.model and fast.memory_format == torch.channels_last   # compiled lazily: no forward
    conv = next(m for m in fast.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_compute_loss_keeps_labels_from_label_free_losses():
    seen = []
    torch.manual_seed(0)
    trainer = Trainer(tiny_config("dcl"), 3, torch.device("cpu"))
    _spy_on_sampler_labels(trainer, seen)
    views, labels = _views()
    assert torch.isfinite(trainer.compute_loss(views, labels)) and seen == [None]


def test_sync_bn_under_ddp_on_the_cpu_is_a_config_error_before_any_step():
    """SyncBatchNorm runs on CUDA only: asking for it in a CPU (gloo) DDP run is refused with one line naming the
    setting, not torch's traceback from inside the DDP constructor; a single process ignores it (nothing to sync)."""
    from contrastlab.platform.errors import ConfigError

    config = tiny_config("infonce", "model.sync_bn=true")
    with pytest.raises(ConfigError, match=r"model\.sync_bn=true needs CUDA") as caught:
        Trainer(config, 3, torch.device("cpu"), distributed=True)
    assert "\n" not in str(caught.value)
    single = Trainer(config, 3, torch.device("cpu"))
    assert not any(isinstance(m, torch.nn.SyncBatchNorm) for m in single.model.modules())
