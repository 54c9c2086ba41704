"""The curl policy's pieces not covered by the whole-update tests: the encoder contract of ``CurlFeatures``."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import torch
from gymnasium import spaces

import contrastlab as cl
from contrastlab.plugins.curl.policy import CurlFeatures

SPACE = spaces.Box(0, 255, (9, 28, 28), np.uint8)


class _Half(torch.nn.Module):
    """An encoder with a ``latent_dim`` and only some of the trunk/head split."""

    latent_dim = 16


@pytest.mark.parametrize("has", [(), ("head",), ("forward_conv",)])
def test_an_encoder_without_both_trunk_and_head_is_refused(has: tuple[str, ...]) -> None:
    net = _Half()
    for name in has:
        setattr(net, name, torch.nn.Identity())
    with mock.patch("contrastlab.make_encoder", return_value=net), \
            pytest.raises(cl.IncompatibleError, match="no conv trunk/head split"):
        CurlFeatures(SPACE, crop=28, encoder="half")


def test_an_encoder_with_trunk_and_head_is_accepted() -> None:
    net = _Half()
    net.head, net.forward_conv = torch.nn.Identity(), torch.nn.Identity()
    with mock.patch("contrastlab.make_encoder", return_value=net) as make:
        features = CurlFeatures(SPACE, crop=28, encoder="half", encoder_hparams={"num_filters": 4})
    make.assert_called_once_with("half", in_channels=9, image_size=28, num_filters=4)
    assert features.net is net and features.features_dim == 16


def test_actor_and_critics_have_the_configured_hidden_width() -> None:
    """``agent.hidden_dim`` sizes both hidden layers of the actor and of every Q-head (CURL: 1024)."""
    from test_curl_agent import tiny_agent  # hidden_dim=32, latent 16

    agent = tiny_agent()
    policy = agent.policy
    nets = [policy.actor.latent_pi, *policy.critic.q_networks, *policy.critic_target.q_networks]
    for net in nets:
        linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
        assert [m.out_features for m in linears][:2] == [32, 32]
    assert policy.actor.mu.in_features == 32 and policy.actor.latent_pi[0].in_features == 16
