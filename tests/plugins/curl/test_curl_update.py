"""One whole CURL update against a hand-written one (CURL paper §4 and appendix A, SAC's equations).

The expected update is written here from the equations, with plain ``torch.optim.Adam`` and no code of the agent's
update path: the critic target ``r + γ(1−d)(min_i Q̄_i(s', a') − α log π(a'|s'))`` with the key (target) encoder on
``s'``, the actor loss on detached conv features, CURL's temperature loss, the two EMAs, and InfoNCE on the bilinear
``q W kᵀ`` with the diagonal as the positive. Every parameter the agent steps must end where the hand-written update
puts it.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F

from contrastlab.platform.config import resolve_config
from contrastlab.plugins.curl.task import CurlTask, make_agent, make_env

TINY = ["env.render_size=32", "agent.crop=28", "agent.hidden_dim=32", "agent.batch_size=8",
        "agent.buffer_size=200", "agent.init_steps=1000", "encoder.num_filters=8", "encoder.latent_dim=16",
        "agent.channels_last=false", "agent.actor_features=recompute"]


def encode(features, images):
    """Conv trunk → Linear → LayerNorm of uint8 images."""
    return features.net.head(features.net.conv(images.float() / 255))


def sample_action(actor, trunk):
    """tanh-Gaussian action and its log-probability (with the tanh correction) from a detached conv trunk."""
    h = actor.latent_pi(actor.features_extractor.head(trunk.detach()))
    mu, log_std = actor.mu(h), -10 + 6 * (torch.tanh(actor.log_std(h)) + 1)  # CURL's bound [-10, 2]
    eps = torch.randn_like(mu)
    pi = torch.tanh(mu + log_std.exp() * eps)
    log_prob = (-0.5 * eps**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(1) - torch.log(1 - pi**2 + 1e-6).sum(1)
    return pi, log_prob


def min_q(critic, features, actions):
    x = torch.cat([features, actions], dim=1)
    return torch.min(critic.q_networks[0](x), critic.q_networks[1](x))


def assert_close(expected, actual, atol: float = 1e-5) -> None:
    for (name, e), a in zip(expected, actual, strict=True):
        assert torch.allclose(e, a, atol=atol), name


def test_one_update_equals_a_hand_written_curl_update() -> None:
    # The bilinear W is drawn from the global RNG before SB3 seeds (the platform's Run seeds it first): without this
    # the draw depended on the tests run before in the process, and after test_pixel_conv's MapLinear test one conv
    # weight got a gradient of Adam's eps's size (1e-8), whose first step (between 0 and the lr) then differed by
    # 4e-5 with the summation order
    torch.manual_seed(0)
    config = resolve_config(CurlTask(), preset="smoke", sets=TINY, device="cpu")
    agent = make_agent(config, make_env(config, seed=0), "cpu")
    agent.learn(20)  # random-action transitions; no update yet
    torch.manual_seed(5)
    np.random.seed(5)
    with torch.no_grad():  # the key encoder and the target Q-heads differ from the online ones, as after updates
        for p in agent.critic_target.parameters():
            p.add_(0.05 * torch.randn_like(p))
    views, data = agent.sample_views(8)
    data = data._replace(dones=(torch.arange(8) % 3 == 0).float()[:, None])  # some terminal transitions
    agent.sample_views = lambda batch_size: (views, data)
    before = copy.deepcopy(agent.policy)
    W, log_alpha = agent.sampler.W.detach().clone().requires_grad_(), agent.log_ent_coef.detach().clone()
    agent._n_updates = 1  # the next update also steps the actor, α and the targets
    torch.manual_seed(11)
    stats = agent.update(8)

    enc, key, critic, target, actor = (before.critic.features_extractor, before.critic_target.features_extractor,
                                       before.critic, before.critic_target, before.actor)
    alpha, lr = log_alpha.exp(), agent.encoder_lr
    obs, next_obs = views[0], data.next_observations
    torch.manual_seed(11)  # the same noise for a' ~ π(·|s')
    with torch.no_grad():
        next_pi, next_log_prob = sample_action(actor, enc.net.conv(next_obs.float() / 255))
        soft_v = min_q(target, encode(key, next_obs), next_pi) - alpha * next_log_prob[:, None]
        y = data.rewards + (1 - data.dones) * agent.gamma * soft_v
    q_in = torch.cat([encode(enc, obs), data.actions], dim=1)
    critic_loss = F.mse_loss(critic.q_networks[0](q_in), y) + F.mse_loss(critic.q_networks[1](q_in), y)
    assert math.isclose(float(stats["critic_loss"]), float(critic_loss.detach()), rel_tol=1e-5)
    opt = torch.optim.Adam(critic.parameters(), lr=lr)
    opt.zero_grad()
    critic_loss.backward()
    opt.step()

    trunk = enc.net.conv(obs.float() / 255).detach()  # after the critic step
    pi, log_prob = sample_action(actor, trunk)
    actor_loss = (alpha * log_prob[:, None] - min_q(critic, enc.net.head(trunk).detach(), pi)).mean()
    # Adam's step is blind to a loss's scale (a sum instead of a mean moves the weights alike): the logged
    # statistics pin the values themselves
    assert math.isclose(float(stats["actor_loss"]), float(actor_loss.detach()), rel_tol=1e-5)
    assert math.isclose(float(stats["entropy"]), float(-log_prob.detach().mean()), rel_tol=1e-5)
    assert math.isclose(float(stats["ent_coef"]), float(alpha), rel_tol=1e-6)
    opt = torch.optim.Adam(actor.parameters(), lr=lr)
    opt.zero_grad()
    actor_loss.backward()
    opt.step()
    log_alpha.requires_grad_()
    alpha_loss = (log_alpha.exp() * (-log_prob.detach() + agent.action_space.shape[0])).mean()  # H̄ = −|A|
    assert math.isclose(float(stats["entropy_loss"]), float(alpha_loss.detach()), rel_tol=1e-5)
    opt = torch.optim.Adam([log_alpha], lr=1e-4, betas=(0.5, 0.999))
    opt.zero_grad()
    alpha_loss.backward()
    opt.step()

    with torch.no_grad():  # EMAs: Q-heads τ = 0.01, encoder into the key encoder τ = 0.05
        for tau, src, dst in ((0.01, torch.nn.ModuleList(critic.q_networks), torch.nn.ModuleList(target.q_networks)),
                              (0.05, enc, key)):
            for p, t in zip(src.parameters(), dst.parameters(), strict=True):
                t.mul_(1 - tau).add_(tau * p)

    queries = encode(enc, obs)
    with torch.no_grad():
        keys = encode(key, views[1])
    logits = queries @ W @ keys.T  # [B, B]: row i's positive on the diagonal, the other keys its negatives
    contrastive = F.cross_entropy(logits - logits.max(1, keepdim=True).values.detach(), torch.arange(8))
    assert math.isclose(float(stats["contrastive_loss"]), float(contrastive.detach()), rel_tol=1e-5)
    opt = torch.optim.Adam([*enc.parameters(), W], lr=lr)
    opt.zero_grad()
    contrastive.backward()
    opt.step()

    assert_close(before.named_parameters(), agent.policy.parameters())  # critic, encoder, actor, targets
    assert torch.allclose(W, agent.sampler.W, atol=1e-5)
    assert torch.allclose(log_alpha, agent.log_ent_coef, atol=1e-7)
