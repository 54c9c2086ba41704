"""CURL's update: who trains the conv trunk, the EMA key encoder, and every unsupervised loss dropping in."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl
from contrastlab.platform.config import resolve_config
from contrastlab.plugins.curl.agent import optimized_parameters
from contrastlab.plugins.curl.task import CurlTask, make_agent, make_env

TINY = ["env.render_size=32", "agent.crop=28", "agent.hidden_dim=32", "agent.batch_size=8",
        "agent.buffer_size=200", "agent.init_steps=1000", "encoder.num_filters=8", "encoder.latent_dim=16"]


def tiny_agent(loss: str = "infonce", extra: tuple[str, ...] = (), device: str = "cpu", sampler: str | None = None):
    config = resolve_config(CurlTask(), preset="smoke", sets=[*TINY, *extra], loss=loss, device=device,
                            sampler=sampler)
    agent = make_agent(config, make_env(config, seed=0), device)
    agent.learn(40)  # fills the buffer with random-action transitions; no update (init_steps not reached)
    assert agent._n_updates == 0
    return agent


@pytest.fixture(scope="module")
def agent():
    return tiny_agent()


def conv_params(agent) -> list[torch.Tensor]:
    return list(agent.policy.encoder.net.conv.parameters())


def test_only_critic_and_contrastive_optimizers_hold_the_conv(agent) -> None:
    conv = {id(p) for p in conv_params(agent)}
    def ids(opt):
        return [id(p) for p in optimized_parameters(opt)]
    assert conv <= set(ids(agent.critic.optimizer))
    assert conv <= set(ids(agent.contrastive_optimizer))
    assert not conv & set(ids(agent.actor.optimizer)) and not conv & set(ids(agent.ent_coef_optimizer))
    contrastive = ids(agent.contrastive_optimizer)
    assert len(contrastive) == len(set(contrastive))  # each encoder parameter is stepped once per update
    assert {id(p) for p in agent.sampler.parameters()} <= set(contrastive)  # the bilinear W


def test_one_update_changes_conv_through_critic_and_contrastive_only(agent) -> None:
    changed: list[str] = []
    optimizers = {"critic": agent.critic.optimizer, "actor": agent.actor.optimizer,
                  "alpha": agent.ent_coef_optimizer, "contrastive": agent.contrastive_optimizer}
    originals = {}
    for name, opt in optimizers.items():
        def step(*args, _name=name, _orig=opt.step, **kwargs):
            before = [p.detach().clone() for p in conv_params(agent)]
            out = _orig(*args, **kwargs)
            if any(not torch.equal(b, p) for b, p in zip(before, conv_params(agent), strict=True)):
                changed.append(_name)
            return out
        originals[name] = opt.step
        opt.step = step
    try:
        agent._n_updates = 1  # the next update is an actor/target update (every 2nd)
        stats = agent.update(8)
    finally:
        for name, opt in optimizers.items():
            opt.step = originals[name]
    assert changed == ["critic", "contrastive"]
    assert {"critic_loss", "actor_loss", "contrastive_loss", "contrastive_top1", "ent_coef"} <= set(stats)


def test_actor_gradients_do_not_reach_the_conv(agent) -> None:
    obs = torch.rand(4, 9, 32, 32)
    for p in agent.policy.parameters():
        p.grad = None
    actions, log_prob = agent.actor.action_log_prob(obs)
    (actions.sum() + log_prob.sum()).backward()
    assert all(p.grad is None for p in conv_params(agent))
    assert any(p.grad is not None for p in agent.actor.features_extractor.head.parameters())
    for p in agent.policy.parameters():
        p.grad = None
    live_trunk = agent.policy.encoder.trunk(obs)  # with its graph: the actor's head detaches it itself
    assert live_trunk.requires_grad
    actions, log_prob = agent.policy.actor_from_trunk(live_trunk)
    (actions.sum() + log_prob.sum()).backward()
    assert all(p.grad is None for p in conv_params(agent))
    # the actor is tied to the critic's trunk (same tensors), not a copy
    assert agent.actor.features_extractor.critic_features is agent.policy.encoder


def test_key_encoder_follows_the_ema_rule(agent) -> None:
    online = [p.detach().clone() for p in agent.policy.encoder.parameters()]
    key = [p.detach().clone() for p in agent.policy.key_encoder.parameters()]
    q_online = [p.detach().clone() for p in (p for q in agent.critic.q_networks for p in q.parameters())]
    q_target = [p.detach().clone() for p in (p for q in agent.critic_target.q_networks for p in q.parameters())]
    for p in agent.policy.encoder.parameters():  # make online and key differ
        p.data.add_(0.5)
    agent.soft_update_targets()
    tau_e, tau_q = agent.encoder_tau, agent.tau
    assert (tau_e, tau_q) == (0.05, 0.01)
    for o, k, new in zip(online, key, agent.policy.key_encoder.parameters(), strict=True):
        assert torch.allclose(new, tau_e * (o + 0.5) + (1 - tau_e) * k, atol=1e-6)
    q_new = (p for q in agent.critic_target.q_networks for p in q.parameters())
    for o, k, new in zip(q_online, q_target, q_new, strict=True):
        assert torch.allclose(new, tau_q * o + (1 - tau_q) * k, atol=1e-6)


def test_every_unsupervised_loss_runs_one_update(agent) -> None:
    unsupervised = [n for n in cl.list_losses() if not cl.loss_label_kinds(n)]
    assert "infonce" in unsupervised and "pucl" in unsupervised and "dcl" in unsupervised
    for name in unsupervised:
        agent.contrastive_loss = cl.make_loss(name)
        stats = agent.update(8)
        assert torch.isfinite(torch.as_tensor(stats["contrastive_loss"])), name
        assert 0.0 <= stats["contrastive_top1"] <= 1.0


def test_two_positive_keys() -> None:
    agent = tiny_agent("dcl", ("agent.num_positives=2",))
    seen = {}
    original = agent.sampler.forward

    def spy(queries, keys, labels=None):
        seen["keys"] = keys
        batch = original(queries, keys, labels)
        seen["M"] = batch.num_positives
        return batch

    agent.sampler.forward = spy
    stats = agent.update(8)
    assert isinstance(seen["keys"], list) and len(seen["keys"]) == 2 and seen["M"] == 2
    assert not torch.equal(seen["keys"][0], seen["keys"][1])  # two different random crops
    assert stats["contrastive_loss"] == stats["contrastive_loss"]  # finite (not NaN)


def test_queue_sampler_with_one_key_set() -> None:
    """With M = 1 curl feeds one key set per query once per update, which the contract's ``queue`` consumes."""
    agent = tiny_agent("dcl", ("sampler.name=queue", "sampler.size=32"))
    assert agent.sampler.accepts == {"queue"} and agent.sampler.embed_dim == 16
    for _ in range(2):
        stats = agent.update(8)
        assert torch.isfinite(stats["contrastive_loss"])
    assert int(agent.sampler.filled) == 16  # two updates' keys are queued (and checkpointed with the sampler)
    assert "sampler" in agent.training_state()


def test_update_statistics_not_yet_logged_survive_a_checkpoint() -> None:
    """A checkpoint between two logs (a Ctrl-C saves one at any step) keeps the window's statistics, so the first
    log after ``--resume`` averages the same updates as without the stop."""
    source, target = tiny_agent(), tiny_agent()
    source.train(gradient_steps=3, batch_size=8)
    state = source.training_state()
    assert state["update_stats"]["critic_loss"].shape == (3,)
    target.load_training_state(state)
    expected = source.pop_stats()
    assert expected["critic_loss"] == pytest.approx(float(state["update_stats"]["critic_loss"].mean()))  # the mean
    assert target.pop_stats() == pytest.approx(expected) and "contrastive_loss" in expected
    assert source.training_state()["update_stats"] == {}  # logged: nothing left to carry


def test_a_stack_with_more_channels_than_pixels_stays_channel_first() -> None:
    """SB3 reads an image space whose first axis is not its smallest as channels-last and wraps the env in
    ``VecTransposeImage``: 11 stacked RGB frames of 32 px (33 channels) became a ``(32, 33, 32)`` space, and the
    agent could not be built (a traceback from the replay buffer). The pixel env is channel-first by construction."""
    agent = tiny_agent(extra=("env.frame_stack=11",))
    assert agent.observation_space.shape == (33, 32, 32)
    assert agent.replay_buffer.size() == 40
    batch = agent.replay_buffer.sample(4)
    assert batch.observations.shape == (4, 33, 32, 32)
    stats = agent.update(8)
    assert torch.isfinite(stats["critic_loss"]) and torch.isfinite(stats["contrastive_loss"])


def test_learning_leaves_no_sb3_log_folder_in_the_temp_dir(tmp_path, monkeypatch) -> None:
    """SB3 gives a logger without a folder a fresh ``SB3-<date>`` folder under the temp dir at every ``learn``; the
    platform logs through its Run, so nothing may appear there (2,051 empty folders piled up in a day of runs)."""
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tiny_agent()
    # only SB3's folders count: torch keeps one cache folder of its own there (torchinductor_<user>), made once
    # per process when the first Adam optimiser is built, so it appears here when this test runs first
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("torchinductor_")) == []


def test_constructor_defaults_are_the_configs_curl_values() -> None:
    """``CurlSAC`` built directly (docs/curl.md) gets CURL's appendix-A settings, the same as ``platform train``."""
    import inspect

    from contrastlab.plugins.curl.agent import CurlSAC
    from contrastlab.plugins.curl.config import AgentSection, CurlConfig

    defaults = {n: p.default for n, p in inspect.signature(CurlSAC.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
    section = AgentSection()
    same = ["crop", "hidden_dim", "alpha_lr", "alpha_beta", "init_temperature", "critic_tau", "encoder_tau",
            "actor_update_freq", "target_update_freq", "num_positives", "alpha_loss", "log_std_squash",
            "contrastive_encoder_steps", "actor_features", "fast_sample", "channels_last", "bf16", "compile"]
    assert {n: defaults[n] for n in same} == {n: getattr(section, n) for n in same}
    lr = section.learning_rate("cartpole")
    assert (defaults["actor_lr"], defaults["critic_lr"], defaults["encoder_lr"]) == (lr, lr, lr) == (1e-3,) * 3
    assert defaults["encoder"] == CurlConfig().encoder.name and defaults["encoder_hparams"] is None
    # CURL's numbers, written out: 84 px crops, 1024 hidden, α lr 1e-4 with β₁ 0.5, α₀ 0.1, τ 0.01 / 0.05, every 2
    assert [defaults[n] for n in same[:9]] == [84, 1024, 1e-4, 0.5, 0.1, 0.01, 0.05, 2, 2]


def test_the_env_is_wrapped_in_one_monitor() -> None:
    """SB3's episode statistics (``ep_info_buffer``) come from a ``Monitor``, added once and never twice."""
    from stable_baselines3.common.env_util import is_wrapped
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    from contrastlab.plugins.curl.agent import CurlSAC

    config = resolve_config(CurlTask(), preset="smoke", sets=TINY, device="cpu")
    env = make_env(config, seed=0)
    vec = CurlSAC._wrap_env(env)
    assert isinstance(vec, DummyVecEnv) and isinstance(vec.envs[0], Monitor) and vec.envs[0].env is env
    wrapped = Monitor(env)
    assert CurlSAC._wrap_env(wrapped).envs[0] is wrapped  # already monitored: not wrapped again
    assert not is_wrapped(CurlSAC._wrap_env(env, monitor_wrapper=False).envs[0], Monitor)
    assert CurlSAC._wrap_env(vec) is vec


def test_training_state_round_trip_restores_counters_temperature_and_the_warm_up_actions() -> None:
    source, target = tiny_agent(), tiny_agent()
    source.train(gradient_steps=2, batch_size=8)
    with torch.no_grad():
        source.log_ent_coef.fill_(-1.25)
    source.learning_starts = 77
    source.action_space.sample()  # move the warm-up action generator away from the target's
    state = source.training_state()
    target.learning_starts = 5
    target.load_training_state(state)
    assert (target.num_timesteps, target._n_updates, target._episode_num) == (
        source.num_timesteps, source._n_updates, source._episode_num)
    assert target._n_updates == 2 and float(target.log_ent_coef.detach()) == -1.25
    assert target.learning_starts == 77  # the later of the two (a refill after a resume without the buffer)
    assert [target.action_space.sample().tolist() for _ in range(3)] == [
        source.action_space.sample().tolist() for _ in range(3)]
    target.learning_starts = 500
    target.load_training_state(state)
    assert target.learning_starts == 500  # never earlier than this run's own warm-up


def test_an_older_checkpoint_without_the_newer_keys_loads() -> None:
    """Checkpoints from before ``update_stats``, ``learning_starts`` and ``action_space_rng`` still resume."""
    source, target = tiny_agent(), tiny_agent()
    source.train(gradient_steps=1, batch_size=8)
    state = source.training_state()
    for key in ("update_stats", "learning_starts", "action_space_rng"):
        del state[key]
    rng = target.action_space.np_random.bit_generator.state
    target.load_training_state(state)
    assert target.pop_stats() == {} and target.learning_starts == 1000  # the config's init_steps
    assert target.action_space.np_random.bit_generator.state == rng  # left as seeded from the config


def test_top1_accuracy_counts_strict_wins_of_the_numerator_over_valid_negatives() -> None:
    from contrastlab.plugins.curl.agent import top1_accuracy

    pos = torch.tensor([[3.0, -9.0], [1.0, 9.0], [2.0, 0.0], [5.0, 0.0]])  # column 0 is the numerator
    neg = torch.tensor([[1.0, 2.0, 10.0], [2.0, 0.0, 0.0], [2.0, 1.0, 0.0], [4.0, -3.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True] * 3, [True] * 3, [True] * 3])  # row 0's 10 is not a negative
    # row 0: 3 > 2 (the masked 10 ignored); row 1: 1 < 2; row 2: a tie is no win; row 3: 5 > 4
    batch = cl.ContrastiveBatch(pos_logits=pos, neg_logits=neg, neg_mask=mask)
    assert float(top1_accuracy(batch)) == 0.5
    empty = cl.ContrastiveBatch(pos_logits=pos, neg_logits=torch.empty(4, 0))  # a queue's first call
    assert float(top1_accuracy(empty)) == 1.0


@pytest.mark.parametrize("verbose", [0, 1, 2])
def test_sb3s_own_log_goes_to_stdout_only_when_verbose(verbose: int) -> None:
    """No log folder either way (the platform logs through its Run); ``verbose >= 1`` keeps SB3's stdout table."""
    from stable_baselines3.common.logger import HumanOutputFormat

    from contrastlab.plugins.curl.agent import CurlSAC
    from contrastlab.plugins.curl.task import make_contrastive

    config = resolve_config(CurlTask(), preset="smoke", sets=TINY, device="cpu")
    loss, sampler = make_contrastive(config)
    agent = CurlSAC(make_env(config, seed=0), loss, sampler, crop=28, hidden_dim=32, buffer_size=50,
                    encoder_hparams={"num_filters": 8, "latent_dim": 16}, device="cpu", verbose=verbose)
    formats = agent.logger.output_formats
    assert agent.logger.dir is None
    assert [type(f) for f in formats] == ([HumanOutputFormat] if verbose >= 1 else [])
