"""The CURL agent on a GPU (marked ``cuda``; skipped without one, run by ``benchmarks/gpu_suite.sh``)."""

from __future__ import annotations

import math

import pytest
import torch

from contrastlab.platform.config import resolve_config
from contrastlab.plugins.curl.task import CurlTask, make_agent, make_env

pytestmark = pytest.mark.cuda

SMALL = ["env.render_size=64", "agent.crop=56", "agent.hidden_dim=64", "agent.batch_size=64",
         "agent.buffer_size=500", "agent.init_steps=80"]


@pytest.mark.parametrize("loss", ["infonce", "dcl", "pucl"])
def test_updates_on_cuda_are_finite_and_train_the_encoder(loss: str) -> None:
    config = resolve_config(CurlTask(), preset="smoke", sets=SMALL, loss=loss, device="cuda")
    agent = make_agent(config, make_env(config, seed=0), "cuda")
    conv = agent.policy.encoder.net.conv
    assert next(conv.parameters()).is_cuda
    before = [p.detach().clone() for p in conv.parameters()]
    agent.learn(120)  # 80 random steps, then 40 updates at batch 64 on the GPU
    assert agent._n_updates == 40
    assert "contrastive_loss" in agent.stats and "critic_loss" in agent.stats
    assert all(math.isfinite(v) for v in agent.stats.values()), agent.stats
    assert any(not torch.equal(b, p) for b, p in zip(before, conv.parameters(), strict=True))
    assert all(torch.isfinite(p).all() for p in agent.policy.parameters())


def test_an_update_makes_no_host_sync() -> None:
    """Issue 10: no ``item()``/``float()``/blocking copy inside an update (statistics stay on the device)."""
    config = resolve_config(CurlTask(), preset="smoke", sets=SMALL, device="cuda")
    agent = make_agent(config, make_env(config, seed=0), "cuda")
    agent.learn(90)  # 80 random steps, 10 warm-up updates
    assert agent.replay_buffer.device_frames is not None
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        agent.train(gradient_steps=4, batch_size=64)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert set(agent.pop_stats()) >= {"critic_loss", "contrastive_loss"}
