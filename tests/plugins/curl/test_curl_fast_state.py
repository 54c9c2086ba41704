"""Issue 10 ("Fast CURL"): the fast optimiser and memory layouts carry an agent's training state exactly: fused
Adam against the for-loop update, checkpoints saved under the other kernel or conv layout, the whole-map heads
after real updates."""

from __future__ import annotations

import copy

import pytest
import torch
from test_curl_agent import tiny_agent
from test_curl_fast import run_updates, seed


def test_resume_from_a_for_loop_adam_checkpoint_switches_back_to_the_fused_kernel() -> None:
    """Checkpoints written before the fused kernel store ``fused=None`` in every group; loading one must not turn
    the fused kernel off for the rest of the run."""
    agent = tiny_agent()
    agent.train(gradient_steps=2, batch_size=8)
    state = copy.deepcopy(agent.training_state())
    for key in ("actor_optimizer", "critic_optimizer", "contrastive_optimizer", "ent_coef_optimizer"):
        for group in state[key]["param_groups"]:
            group["fused"] = None  # as the for-loop kernel saved it
        for param_state in state[key]["state"].values():
            param_state["step"] = param_state["step"].cpu()
    agent.load_training_state(state)
    optimizers = agent.optimizers()
    assert all(group["fused"] for opt in optimizers for group in opt.param_groups)
    agent.train(gradient_steps=2, batch_size=8)
    assert all(torch.isfinite(p).all() for p in agent.policy.parameters())


def test_fused_adam_gives_the_for_loop_update() -> None:
    """Every optimiser of the agent runs Adam's fused kernel; switching them to the for-loop kernel gives the same
    parameters after two updates (to float rounding)."""
    agent = tiny_agent(extra=("agent.actor_features=recompute",))
    optimizers = agent.optimizers()
    assert all(group["fused"] for opt in optimizers for group in opt.param_groups)
    saved = copy.deepcopy(agent.training_state())
    fused, fused_stats = run_updates(agent, saved)
    for opt in optimizers:
        for group in opt.param_groups:
            group["fused"] = False
    plain, plain_stats = run_updates(agent, saved)
    for key, value in plain.items():
        assert torch.allclose(fused[key], value, rtol=1e-5, atol=1e-6), key
    assert fused_stats == pytest.approx(plain_stats, rel=1e-5, abs=1e-6)


def test_the_actor_step_computes_no_q_head_weight_gradients() -> None:
    """The actor loss' backward reaches the actor's parameters only (``backward(inputs=...)``): the Q-heads'
    weight gradients of that loss, which CURL's code computes and throws away, are never accumulated. Each
    Q-head parameter takes one gradient per update (the critic loss'), also in the updates with an actor step."""
    agent = tiny_agent(extra=("agent.actor_update_freq=1",))
    q_params = [p for q in agent.critic.q_networks for p in q.parameters()]
    counts = dict.fromkeys(map(id, q_params), 0)
    hooks = [p.register_post_accumulate_grad_hook(lambda p: counts.__setitem__(id(p), counts[id(p)] + 1))
             for p in q_params]
    actor_before = [p.detach().clone() for p in agent.actor.parameters()]
    agent.train(gradient_steps=2, batch_size=8)
    for hook in hooks:
        hook.remove()
    assert set(counts.values()) == {2}  # 2 updates, each with an actor step: the critic loss' gradient only
    assert any(not torch.equal(a, p) for a, p in zip(actor_before, agent.actor.parameters(), strict=True))


def test_whole_map_heads_follow_their_weights_through_real_updates() -> None:
    """At batch >= ``MapLinear.map_min_batch`` with channels-last maps, every head (online, key, actor) gives
    ``F.linear`` of the flattened map with its current weight after updates that change the weights through fused
    Adam and SB3's ``polyak_update``. Neither moves a tensor's version counter, so a head that cached its
    channels-last kernel by version (as one did during stop 19) would keep computing with the old weights."""
    import torch.nn.functional as F

    from contrastlab.encoders.pixel_conv import MapLinear

    agent = tiny_agent(extra=("agent.channels_last=true", "agent.actor_update_freq=1", "agent.target_update_freq=1"))
    heads = {"online": agent.policy.encoder.net.head[0], "key": agent.policy.key_encoder.net.head[0],
             "actor": agent.actor.features_extractor.head[0]}
    assert all(isinstance(head, MapLinear) for head in heads.values())
    batch = MapLinear.map_min_batch
    views, _ = agent.sample_views(batch)
    x = agent.policy.encoder.prepare(views[0])
    with torch.no_grad():
        maps = agent.policy.encoder.trunk(x)  # channels-last [B, C, s, s]
    assert maps.is_contiguous(memory_format=torch.channels_last) and not maps.is_contiguous()
    before = {name: head.weight.detach().clone() for name, head in heads.items()}
    for _ in range(3):
        agent.train(gradient_steps=1, batch_size=batch)
        with torch.no_grad():
            for name, head in heads.items():
                expected = F.linear(maps.flatten(1), head.weight, head.bias)
                assert torch.allclose(head(maps), expected, atol=1e-4, rtol=1e-4), name
    assert all(not torch.equal(before[name], head.weight) for name, head in heads.items())


def test_restored_adam_moments_take_their_parameters_memory_layout() -> None:
    """The fused kernel pairs a weight with its moments by memory position: moments saved channels-last next to an
    NCHW weight (a checkpoint from before channels-last, another channels_last setting) gave wrong steps silently."""
    from contrastlab.plugins.curl.fast import adam, use_fused_kernel

    def step_from(saved: dict, grad: torch.Tensor) -> torch.Tensor:
        param = torch.nn.Parameter(torch.zeros(8, 4, 3, 3))
        optimizer = adam([param], lr=1e-2)
        optimizer.load_state_dict(copy.deepcopy(saved))
        use_fused_kernel(optimizer)
        param.grad = grad
        optimizer.step()
        return param.detach().clone()

    torch.manual_seed(0)
    param = torch.nn.Parameter(torch.zeros(8, 4, 3, 3))
    optimizer = adam([param], lr=1e-2)
    for _ in range(3):
        param.grad = torch.randn_like(param)
        optimizer.step()
    saved = optimizer.state_dict()
    channels_last = copy.deepcopy(saved)
    for key in ("exp_avg", "exp_avg_sq"):
        channels_last["state"][0][key] = saved["state"][0][key].contiguous(memory_format=torch.channels_last)
    grad = torch.randn(8, 4, 3, 3)
    assert torch.equal(step_from(channels_last, grad), step_from(saved, grad))


def test_an_update_from_a_state_saved_with_the_other_conv_layout_is_the_same() -> None:
    """A training state written by a channels-last agent, loaded into an NCHW one, updates as the NCHW agent's own."""
    agent = tiny_agent(extra=("agent.channels_last=true",))
    seed(2)
    agent.train(gradient_steps=3, batch_size=8)  # Adam's moments now exist, channels-last for the conv weights
    saved = copy.deepcopy(agent.training_state())
    nchw = copy.deepcopy(saved)
    nchw["critic_optimizer"]["state"] = {
        k: {n: v.contiguous() if torch.is_tensor(v) else v for n, v in st.items()}
        for k, st in saved["critic_optimizer"]["state"].items()
    }
    nchw["contrastive_optimizer"]["state"] = {
        k: {n: v.contiguous() if torch.is_tensor(v) else v for n, v in st.items()}
        for k, st in saved["contrastive_optimizer"]["state"].items()
    }
    plain = tiny_agent(extra=("agent.channels_last=false",))
    results = []
    for state in (saved, nchw):
        results.append(run_updates(plain, state, n=1)[0])
    for key, value in results[0].items():
        assert torch.equal(value, results[1][key]), key
