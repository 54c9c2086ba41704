"""The sampler contract: built-ins declare what they consume and honour ``embed_dim``; samplers defined in this file
(a third party's, registered through the hook) work with every plugin whose inputs they accept, and the others
refuse them before training with one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import contrastlab as cl
from contrastlab.platform.config import resolve_config
from contrastlab.platform.preflight import check_sampler
from contrastlab.platform.run import Run
from contrastlab.platform.sampler_contract import SAMPLER_INPUTS, choose_input
from contrastlab.samplers import Sampler
from contrastlab.testing import fresh_plugin_manager, run_cli

# ---------------------------------------------------------------- a third-party sampler (the whole of it)


class OneWayPairs(Sampler):
    """Only the first view's samples are anchors: positive ``z2[i]``, negatives ``z2[j ≠ i]``, cosine / t."""

    name = "one_way"
    accepts = frozenset({"two_views"})
    hyperparameters = (cl.HParam("temperature", 0.5, "logits are cos / t", "(0, inf)", "test", lambda v: v > 0),)

    def forward(self, z1: Tensor, z2: Tensor, labels: Tensor | None = None) -> cl.ContrastiveBatch:
        t, B = self.temperature, z1.shape[0]
        logits = F.normalize(z1.float(), dim=1) @ F.normalize(z2.float(), dim=1).T / t  # [B, B]
        off = ~torch.eye(B, dtype=torch.bool, device=z1.device)  # [B, B] the other samples
        return cl.ContrastiveBatch(
            pos_logits=logits.diagonal()[:, None], neg_logits=logits[off].view(B, B - 1), temperature=t,
            anchor_labels=labels, pos_labels=None if labels is None else labels[:, None],
            neg_labels=None if labels is None else labels.expand(B, B)[off].view(B, B - 1),
        )


class ScaledKeys(Sampler):
    """Queries against M key sets, cosine after a learnable per-dimension scale of size ``embed_dim``."""

    name = "scaled_keys"
    accepts = frozenset({"query_key"})
    hyperparameters = (cl.HParam("temperature", 0.2, "logits are cos / t", "(0, inf)", "test", lambda v: v > 0),)

    def __init__(self, *, embed_dim: int | None = None, **hparams) -> None:
        super().__init__(embed_dim=embed_dim, **hparams)
        self.scale = nn.Parameter(torch.ones(embed_dim))  # [d]

    def forward(self, queries: Tensor, keys: Tensor | list[Tensor], labels: Tensor | None = None
                ) -> cl.ContrastiveBatch:
        t, B = self.temperature, queries.shape[0]
        q = F.normalize(queries * self.scale, dim=1) / t  # [B, d]
        ks = [F.normalize(k * self.scale, dim=1) for k in ([keys] if isinstance(keys, Tensor) else keys)]
        off = ~torch.eye(B, dtype=torch.bool, device=q.device)
        return cl.ContrastiveBatch(pos_logits=torch.stack([(q * k).sum(1) for k in ks], 1),  # [B, M]
                                   neg_logits=(q @ ks[0].T)[off].view(B, B - 1), temperature=t)


class ThirdParty:
    """What a plugin package's hook module does."""

    @cl.hookimpl
    def register_samplers(self, register) -> None:
        register(OneWayPairs)
        register(ScaledKeys)


@pytest.fixture
def third_party():
    with fresh_plugin_manager(ThirdParty(), package="test-samplers") as pm:
        yield pm


# ---------------------------------------------------------------- the built-ins

BUILTIN = {"two_view": {"two_views"}, "multi_view": {"multi_views"}, "query_key": {"query_key"}, "queue": {"queue"}}


@pytest.mark.parametrize(("name", "accepts"), BUILTIN.items())
def test_builtins_declare_what_they_consume(name: str, accepts: set[str]) -> None:
    comp = cl.registry("sampler").get(name)
    assert comp.accepts == comp.factory.accepts == accepts
    assert comp.as_dict()["accepts"] == list(accepts)
    sampler = cl.make_sampler(name, embed_dim=6)
    assert sampler.embed_dim == 6 and "embed_dim=6" in repr(sampler)
    assert set(SAMPLER_INPUTS) == {"two_views", "multi_views", "query_key", "queue"}


def test_embed_dim_is_honoured() -> None:
    assert cl.make_sampler("query_key", embed_dim=6).W.shape == (6, 6)
    z = torch.randn(4, 5)
    for name, call in [("two_view", lambda s: s(z, z)), ("multi_view", lambda s: s(torch.stack([z, z]))),
                       ("queue", lambda s: s(z, z)), ("query_key", lambda s: s(z, z))]:
        with pytest.raises(cl.ConfigError, match="6"):
            call(cl.make_sampler(name, embed_dim=6))
        assert call(cl.make_sampler(name, embed_dim=5)).neg_logits.shape[0] >= 4
    with pytest.raises(cl.ConfigError, match="needs embed_dim"):
        cl.make_sampler("query_key")  # bilinear W [d, d] cannot be sized without it
    assert cl.make_sampler("query_key", similarity="cosine").embed_dim is None
    with pytest.raises(cl.ConfigError, match="embed_dim"):
        cl.make_sampler("two_view", embed_dim=0)
    with pytest.raises(cl.UnknownNameError, match="valid: similarity, temperature, floor"):
        cl.make_sampler("query_key", dim=50)  # the old keyword is gone


def test_choose_input_takes_the_first_kind_both_sides_support() -> None:
    assert choose_input({"two_views", "multi_views"}, {"multi_views", "queue"}) == "multi_views"
    assert choose_input({"query_key", "queue"}, SAMPLER_INPUTS) == "query_key"
    assert choose_input({"queue"}, {"two_views"}) is None


class _NoAccepts(nn.Module):
    name = "no_accepts"

    def __init__(self, *, embed_dim: int | None = None) -> None:
        super().__init__()


class _Typo(_NoAccepts):
    name = "typo"
    accepts = frozenset({"two_view"})


class _NoEmbedDim(nn.Module):
    name = "no_embed_dim"
    accepts = frozenset({"two_views"})

    def __init__(self, temperature: float = 0.5) -> None:
        super().__init__()


@pytest.mark.parametrize(("factory", "match"), [
    (_NoAccepts, "declares no inputs; set the class attribute accepts"),
    (_Typo, "unknown input kind 'two_view'.*two_views, multi_views, query_key, queue"),
    (_NoEmbedDim, "must accept the keyword argument embed_dim"),
])
def test_registration_checks_the_contract(factory: type, match: str, capsys, monkeypatch) -> None:
    """A third-party sampler that breaks the contract is refused with the reason; its package is skipped with one
    warning line carrying it (tests/platform/test_plugin_isolation.py), the built-ins keep working."""
    from contrastlab.platform import plugins

    monkeypatch.setattr(plugins, "_warned", set())

    class Bad:
        @cl.hookimpl
        def register_samplers(self, register) -> None:
            register(factory)

    with fresh_plugin_manager(Bad(), package="bad-pkg") as pm:
        samplers = pm.registries["sampler"]
        assert factory.name not in samplers and "two_view" in samplers and "bad-pkg" in pm.skipped
    (warning,) = [line for line in capsys.readouterr().err.splitlines() if "bad-pkg" in line]
    assert re.search(match, warning) and f"sampler '{factory.name}' from package 'bad-pkg'" in warning, warning


# ---------------------------------------------------------------- third-party samplers in the plugins

SIMCLR_TINY = ["data.dataset=synthetic", "data.train_subset=64", "encoder.width=4", "encoder.feature_dim=16",
               "model.head_hidden=16", "model.proj_dim=16", "train.batch_size=16", "augment.size=16"]
CURL_TINY = ["env.render_size=32", "agent.crop=28", "agent.hidden_dim=32", "agent.batch_size=8",
             "agent.buffer_size=200", "agent.init_steps=1000", "encoder.num_filters=8", "encoder.latent_dim=16"]
PU_TINY = ["data.dataset=synthetic", "data.options={size: 96, num_classes: 4, image_size: 12, channels: 1}",
           "data.positive_classes=[0, 1]", "data.n_labeled=16", "data.train_size=null", "data.test_size=null",
           "encoder.width=4", "encoder.feature_dim=8", "pretrain.steps=2", "pretrain.batch_size=16",
           "pretrain.projection_hidden=16", "pretrain.projection_dim=8", "classifier.steps=2",
           "classifier.batch_labeled=8", "classifier.batch_unlabeled=16", "eval_batch_size=64"]


def _plugin(name: str):
    return cl.registry("plugin").get(name).factory()


def test_two_views_sampler_trains_a_simclr_step(third_party) -> None:
    from contrastlab.data import load_dataset
    from contrastlab.data.augment import augment_for
    from contrastlab.plugins.simclr.trainer import Trainer, make_views

    task = _plugin("simclr")
    for loss, labels in (("dcl", ()), ("supcon", ("data.labels=class",))):
        config = resolve_config(task, preset="smoke", loss=loss, sampler="one_way", sets=[*SIMCLR_TINY, *labels])
        assert check_sampler(task, config) == "two_views"
        torch.manual_seed(0)
        trainer = Trainer(config, 3, torch.device("cpu"))
        assert trainer.input == "two_views" and trainer.key_model is None and trainer.sampler.embed_dim == 16
        ds = load_dataset("synthetic", size=64)
        views = make_views(ds.images, torch.arange(16), augment_for("synthetic", 32, size=16), 2, 0.0, None)
        before = [p.detach().clone() for p in trainer.model.parameters()]
        assert torch.isfinite(trainer.step(views, ds.labels[:16]))
        assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
    with pytest.raises(cl.IncompatibleError, match="provides multi_views with this config"):
        check_sampler(task, resolve_config(task, preset="smoke", sampler="one_way", sets=["data.views=3"]))


def test_two_views_sampler_pretrains_pu(third_party, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    forward = OneWayPairs.forward
    monkeypatch.setattr(OneWayPairs, "forward", lambda self, *a, **k: calls.append(1) or forward(self, *a, **k))
    plugin = _plugin("pu")
    config = resolve_config(plugin, preset="smoke", loss="dcl", sampler="one_way", sets=PU_TINY, device="cpu")
    assert check_sampler(plugin, config) == "two_views"
    run = Run.create(plugin, config, tmp_path)
    summary = run.finish(plugin.train(config, run))
    assert len(calls) == 2 and 0.0 <= summary["metrics"]["test/accuracy"] <= 1.0


def test_curl_refuses_a_two_views_sampler_in_one_line(third_party, tmp_path: Path) -> None:
    task = _plugin("curl")
    config = resolve_config(task, preset="smoke", sampler="one_way", device="cpu")
    msg = ("sampler 'one_way' consumes two_views, but plugin 'curl' provides query_key or queue with this config; "
           "compatible samplers: query_key, queue, scaled_keys")
    with pytest.raises(cl.IncompatibleError) as info:
        check_sampler(task, config)
    assert str(info.value) == msg
    code, out = run_cli(["train", "--plugin", "curl", "--loss", "dcl", "--sampler", "one_way",
                         "--logdir", str(tmp_path)])
    assert code != 0 and msg in out and len(out.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_query_key_sampler_runs_a_curl_update_with_two_key_sets(third_party) -> None:
    from contrastlab.plugins.curl.task import make_agent, make_env

    task = _plugin("curl")
    config = resolve_config(task, preset="smoke", loss="dcl", sampler="scaled_keys", device="cpu",
                            sets=[*CURL_TINY, "agent.num_positives=2"])
    assert task.sampler_inputs_for(config) == {"query_key"}  # M = 2 key sets: a queue cannot take them
    assert check_sampler(task, config) == "query_key"
    agent = make_agent(config, make_env(config, seed=0), "cpu")
    assert isinstance(agent.sampler, ScaledKeys) and agent.sampler.scale.shape == (16,)
    agent.learn(20)  # fills the buffer; no update before init_steps
    scale = agent.sampler.scale.detach().clone()
    stats = agent.update(8)
    assert torch.isfinite(stats["contrastive_loss"]) and not torch.equal(scale, agent.sampler.scale)


def test_the_documented_sampler_example_works() -> None:
    """docs/plugins.md's "Writing a sampler" example registers, gives a loss gradients, and curl refuses it with the
    documented message."""
    import re
    import types

    doc = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text()
    section = doc[doc.index("### Writing a sampler"):doc.index("## 2. A task plugin")]
    module = types.ModuleType("doc_sampler")
    exec(compile(re.search(r"```python\n(.*?)```", section, re.S).group(1), "docs/plugins.md", "exec"),
         module.__dict__)
    with fresh_plugin_manager(module, package="doc-sampler"):
        z1, z2 = torch.randn(8, 4, requires_grad=True), torch.randn(8, 4)
        cl.make_loss("dcl")(cl.make_sampler("one_way", embed_dim=4)(z1, z2)).backward()
        assert z1.grad is not None
        msg = re.search(r"`(sampler 'one_way' consumes .*?)`", section, re.S).group(1).replace("\n", " ")
        with pytest.raises(cl.IncompatibleError) as info:
            check_sampler(_plugin("curl"), resolve_config(_plugin("curl"), preset="smoke", sampler="one_way"))
        assert str(info.value) == msg
