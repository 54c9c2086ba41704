"""Paper fidelity of the curl agent: the temperature loss, log-σ bounds, encoder steps, actor features, presets.

Each form is pinned against the CURL code (MishaLaskin/curl ``curl_sac.py``): analytically, and side by side with
the reference ``Actor`` when ``../shared/reference/curl`` is present (it is read-only reference code, imported here
for comparison only).
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest
import torch

from contrastlab.platform.config import resolve_config
from contrastlab.plugins.curl.policy import CURL_LOG_STD_BOUNDS, CurlActor, squash_log_std
from contrastlab.plugins.curl.task import CurlTask, make_agent, make_env

TINY = ["env.render_size=32", "agent.crop=28", "agent.hidden_dim=32", "agent.batch_size=8",
        "agent.buffer_size=200", "agent.init_steps=1000", "encoder.num_filters=8", "encoder.latent_dim=16"]
REFERENCE = Path(__file__).resolve().parents[4] / "shared" / "reference" / "curl"


def tiny_agent(*extra: str, fill: bool = True):
    config = resolve_config(CurlTask(), preset="smoke", sets=[*TINY, *extra], device="cpu")
    agent = make_agent(config, make_env(config, seed=0), "cpu")
    if fill:
        agent.learn(20)  # random-action transitions in the buffer; no update yet (init_steps not reached)
    return agent


def reference_curl_sac():
    """The reference ``curl_sac`` module, imported without leaving its generic module names behind."""
    if not (REFERENCE / "curl_sac.py").is_file():
        pytest.skip(f"reference CURL code not found at {REFERENCE}")
    saved = {name: sys.modules.pop(name) for name in ("utils", "encoder", "curl_sac") if name in sys.modules}
    sys.path.insert(0, str(REFERENCE))
    try:
        return importlib.import_module("curl_sac")
    finally:
        sys.path.remove(str(REFERENCE))
        for name in ("utils", "encoder", "curl_sac"):
            sys.modules.pop(name, None)
        sys.modules.update(saved)


# ---------------------------------------------------------------------------------------------- presets
def test_paper_preset_follows_curl_and_smoke_stays_cheap() -> None:
    paper = resolve_config(CurlTask(), preset="paper", device="cpu")
    smoke = resolve_config(CurlTask(), preset="smoke", device="cpu")
    assert paper.env.low_cost_render is False and smoke.env.low_cost_render is True
    assert (paper.agent.alpha_loss, paper.agent.log_std_squash) == ("alpha", "tanh")
    assert (paper.agent.contrastive_encoder_steps, paper.agent.actor_features) == (2, "recompute")
    assert (smoke.agent.contrastive_encoder_steps, smoke.agent.actor_features) == (1, "reuse")


# ---------------------------------------------------------------------------------------------- temperature loss
@pytest.mark.parametrize("form", ["alpha", "log_alpha"])
def test_temperature_gradient(form: str) -> None:
    agent = tiny_agent(f"agent.alpha_loss={form}", fill=False)
    alpha = 0.3
    with torch.no_grad():
        agent.log_ent_coef.fill_(math.log(alpha))
    log_prob = torch.randn(16, requires_grad=True)
    target = float(agent.target_entropy)  # -|A| = -1 for cartpole
    agent.log_ent_coef.grad = None
    agent.temperature_loss(log_prob).backward()
    gap = (-log_prob.detach() - target).mean()
    expected = alpha * gap if form == "alpha" else gap
    assert torch.allclose(agent.log_ent_coef.grad, expected.reshape(1), atol=1e-6)
    assert log_prob.grad is None  # the policy gets no gradient from the temperature loss
    if form == "alpha":  # CURL's code, verbatim in form: (alpha * (-log_pi - target_entropy).detach()).mean()
        log_alpha = torch.tensor(math.log(alpha), requires_grad=True)
        (log_alpha.exp() * (-log_prob - target).detach()).mean().backward()
        assert torch.allclose(agent.log_ent_coef.grad, log_alpha.grad.reshape(1), atol=1e-6)


def test_update_steps_the_temperature_with_the_curl_gradient() -> None:
    agent = tiny_agent()
    seen: dict[str, torch.Tensor] = {}
    loss_fn, step_fn = agent.temperature_loss, agent.ent_coef_optimizer.step

    def spy_loss(log_prob):
        seen["log_prob"] = log_prob.detach().clone()
        return loss_fn(log_prob)

    def spy_step(*args, **kwargs):
        seen["grad"] = agent.log_ent_coef.grad.detach().clone()
        return step_fn(*args, **kwargs)

    agent.temperature_loss, agent.ent_coef_optimizer.step = spy_loss, spy_step
    agent._n_updates = 1  # the next update is an actor/α update (every 2nd)
    alpha = float(agent.log_ent_coef.detach().exp())
    agent.update(8)
    expected = alpha * (-seen["log_prob"] - agent.target_entropy).mean()
    assert torch.allclose(seen["grad"], expected.reshape(1), atol=1e-6)


# ---------------------------------------------------------------------------------------------- log σ
def test_log_std_squash_forms() -> None:
    raw = torch.linspace(-50, 50, 201)
    tanh = squash_log_std(raw, "tanh")
    assert torch.allclose(tanh, -10 + 0.5 * (2 - -10) * (torch.tanh(raw) + 1))
    assert tanh.min() >= -10 and tanh.max() <= 2 and CURL_LOG_STD_BOUNDS == (-10.0, 2.0)
    assert float(squash_log_std(torch.tensor(0.0), "tanh")) == pytest.approx(-4.0)  # midpoint of [-10, 2]
    assert torch.equal(squash_log_std(raw, "clamp"), raw.clamp(-20, 2))
    x = torch.tensor([3.0, 4.0], requires_grad=True)  # above log σ max = 2: clamp has no gradient, tanh has
    squash_log_std(x, "tanh").sum().backward()
    assert (x.grad > 0).all()
    x.grad = None
    squash_log_std(x, "clamp").sum().backward()
    assert (x.grad == 0).all()
    with pytest.raises(ValueError, match="tanh"):
        squash_log_std(raw, "softplus")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["tanh", "clamp"])
def test_every_actor_path_bounds_log_std_the_same_way(mode: str) -> None:
    agent = tiny_agent(f"agent.log_std_squash={mode}", fill=False)
    actor = agent.actor
    assert isinstance(actor, CurlActor) and actor.log_std_squash == mode
    with torch.no_grad():
        actor.log_std.bias.fill_(-40.0)  # far below both lower bounds
    obs = torch.rand(5, 9, 32, 32)
    mean, log_std, _ = actor.get_action_dist_params(obs * 255.0)  # rollouts, predict (SB3 divides by 255)
    trunk = agent.policy.encoder.trunk(obs)
    mean2, log_std2 = actor.dist_params(actor.features_extractor.head_forward(trunk))  # the CURL update
    assert torch.allclose(mean, mean2) and torch.allclose(log_std, log_std2)
    floor = -10.0 if mode == "tanh" else -20.0
    assert torch.allclose(log_std, torch.full_like(log_std, floor), atol=1e-4)


def test_actor_matches_the_reference_actor_side_by_side() -> None:
    """Same weights in our actor and CURL's ``Actor``: same squashed mean, log σ and log π for the same noise."""
    ref_module = reference_curl_sac()
    agent = tiny_agent("agent.log_std_squash=tanh", "env.render_size=84", "agent.crop=84", fill=False)
    actor, encoder = agent.actor, agent.policy.encoder.net
    a_dim = actor.mu.out_features
    ref = ref_module.Actor((9, 84, 84), (a_dim,), 32, "pixel", 16, -10, 2, 4, 8)  # its fc assumes 84 px
    convs = [m for m in encoder.conv if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        actor.log_std.bias.add_(0.5)  # log σ in the curved part of tanh, away from 0
        for mine, theirs in zip(convs, ref.encoder.convs, strict=True):
            theirs.weight.copy_(mine.weight)
            theirs.bias.copy_(mine.bias)
        head = actor.features_extractor.head
        ref.encoder.fc.load_state_dict(head[0].state_dict())
        ref.encoder.ln.load_state_dict(head[1].state_dict())
        ref.trunk[0].load_state_dict(actor.latent_pi[0].state_dict())
        ref.trunk[2].load_state_dict(actor.latent_pi[2].state_dict())
        ref.trunk[4].weight.copy_(torch.cat([actor.mu.weight, actor.log_std.weight]))
        ref.trunk[4].bias.copy_(torch.cat([actor.mu.bias, actor.log_std.bias]))
    obs = torch.rand(6, 9, 84, 84)
    torch.manual_seed(0)
    ref_mu, _, ref_log_pi, ref_log_std = ref(obs * 255.0, detach_encoder=True)  # it divides by 255 itself
    torch.manual_seed(0)
    noise = torch.randn(6, a_dim)  # the noise the reference drew
    mean, log_std, _ = actor.get_action_dist_params(obs * 255.0)  # SB3 divides image observations by 255
    assert torch.allclose(torch.tanh(mean), ref_mu, atol=1e-5)
    assert torch.allclose(log_std, ref_log_std, atol=1e-5)
    gaussian = mean + noise * log_std.exp()
    actor.action_dist.proba_distribution(mean, log_std)
    log_pi = actor.action_dist.log_prob(torch.tanh(gaussian), gaussian)
    assert torch.allclose(log_pi, ref_log_pi.squeeze(1), atol=1e-4)


# ---------------------------------------------------------------------------------------------- encoder steps
def test_two_contrastive_encoder_steps_equal_the_reference_two_optimisers() -> None:
    """CURL's ``encoder_optimizer`` and ``cpc_optimizer`` both step the encoder on one gradient; W steps once."""
    agent = tiny_agent("agent.contrastive_encoder_steps=2", fill=False)
    encoder, w = list(agent.policy.encoder.parameters()), list(agent.sampler.parameters())
    assert w, "the bilinear sampler has a W"
    before_enc = [p.detach().clone().requires_grad_(True) for p in encoder]
    before_w = [p.detach().clone().requires_grad_(True) for p in w]
    originals = [p.detach().clone() for p in [*encoder, *w]]
    anchor, positive = torch.rand(8, 9, 28, 28), torch.rand(8, 9, 28, 28)
    agent.contrastive_update(anchor, [positive])
    lr, betas = agent.encoder_lr, agent.policy.betas
    for mine, ref in zip([*encoder, *w], [*before_enc, *before_w], strict=True):
        ref.grad = mine.grad.detach().clone()
    encoder_optimizer = torch.optim.Adam(before_enc, lr=lr, betas=betas)
    cpc_optimizer = torch.optim.Adam([*before_w, *before_enc], lr=lr, betas=betas)
    encoder_optimizer.step()
    cpc_optimizer.step()
    for mine, ref, start in zip([*encoder, *w], [*before_enc, *before_w], originals, strict=True):
        assert torch.allclose(mine, ref, atol=1e-7, rtol=1e-5)
        assert not torch.equal(mine, start)  # every parameter moved


@pytest.mark.parametrize("steps", [1, 2])
def test_encoder_is_stepped_once_by_the_critic_and_k_times_by_the_contrastive_loss(steps: int) -> None:
    agent = tiny_agent(f"agent.contrastive_encoder_steps={steps}", fill=False)
    groups = agent.contrastive_optimizer.param_groups
    encoder_ids = {id(p) for p in agent.policy.encoder.parameters()}
    assert {id(p) for p in groups[0]["params"]} == encoder_ids
    assert groups[0]["lr"] == pytest.approx(steps * agent.encoder_lr) and groups[1]["lr"] == agent.encoder_lr
    critic_ids = [id(p) for g in agent.critic.optimizer.param_groups for p in g["params"]]
    assert encoder_ids <= set(critic_ids) and len(critic_ids) == len(set(critic_ids))
    assert agent.critic.optimizer.param_groups[0]["lr"] == agent.encoder_lr  # one plain critic step


# ---------------------------------------------------------------------------------------------- actor features
@pytest.mark.parametrize("mode", ["recompute", "reuse"])
def test_actor_features_recomputed_after_the_critic_step(mode: str) -> None:
    agent = tiny_agent(f"agent.actor_features={mode}")
    encoder, policy = agent.policy.encoder, agent.policy
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []
    actor_inputs: list[torch.Tensor] = []
    trunk_fn, actor_fn = encoder.trunk, policy.actor_from_trunk

    def spy_trunk(obs):
        out = trunk_fn(obs)
        calls.append((obs, out.detach().clone()))
        return out

    def spy_actor(trunk_out):
        actor_inputs.append(trunk_out)
        return actor_fn(trunk_out)

    encoder.trunk, policy.actor_from_trunk = spy_trunk, spy_actor
    agent._n_updates = 1  # the next update is an actor update
    agent.update(8)
    # calls: next_obs (target), obs (critic), [obs again (recompute)], ...; actor calls: next_obs, then obs
    critic_obs, critic_trunk = calls[1]
    assert not actor_inputs[1].requires_grad  # detached in both modes
    if mode == "recompute":
        assert calls[2][0] is critic_obs
        assert torch.equal(actor_inputs[1], calls[2][1])
        assert not torch.equal(actor_inputs[1], critic_trunk)  # the critic step moved the conv
    else:
        assert torch.equal(actor_inputs[1], critic_trunk)


@pytest.mark.parametrize("actor_step", [True, False])
def test_recomputed_actor_pass_is_the_contrastive_anchor_pass(actor_step: bool) -> None:
    """``recompute``: the actor's pass over ``obs`` (after the critic step) doubles as the contrastive anchor pass;
    its queries equal ``f_θ(obs)`` computed afresh when the contrastive update starts, and carry the graph."""
    agent = tiny_agent("agent.actor_features=recompute")
    encoder, contrastive = agent.policy.encoder, agent.contrastive_update
    seen: list[tuple[torch.Tensor | None, torch.Tensor]] = []
    passes = [0]
    trunk_fn = encoder.trunk

    def spy_trunk(obs):
        passes[0] += 1
        return trunk_fn(obs)

    def spy_contrastive(anchor, positives, queries=None):
        with torch.no_grad():
            seen.append((queries, encoder(anchor)))  # with the weights the contrastive step starts from
        return contrastive(anchor, positives, queries=queries)

    encoder.trunk, agent.contrastive_update = spy_trunk, spy_contrastive
    agent._n_updates = 1 if actor_step else 0  # the next update is (not) an actor update
    agent.update(8)
    queries, fresh = seen[0]
    if actor_step:
        assert queries is not None and queries.requires_grad
        assert torch.allclose(queries, fresh, atol=1e-6)
        assert passes[0] == 3 + 1  # next_obs, obs (critic), obs (actor = anchor), + the spy's own fresh pass
    else:
        assert queries is None
        assert passes[0] == 2 + 2  # next_obs, obs (critic), + the spy's fresh pass and the anchor pass
