"""CUDA checks of every loss (marked ``cuda``; skipped without a GPU, run by ``benchmarks/gpu_suite.sh``).

Each loss is evaluated on the GPU in float32 and compared with the same loss on the CPU in float64 (values and
gradients), through the samplers that build the batch on the device, and under bf16 autocast.
"""

from __future__ import annotations

import pytest
import torch
from test_gradients import SETTINGS, _labels

import contrastlab as cl

pytestmark = pytest.mark.cuda


def _loss_and_grad(name, hp, views, labels, sampler_name="multi_view", **sampler_kw):
    views = views.detach().clone().requires_grad_(True)
    sampler = cl.make_sampler(sampler_name, **sampler_kw).to(views.device)
    value = cl.make_loss(name, **hp)(sampler(views, labels=labels))
    value.backward()
    return value.detach().double().cpu(), views.grad.double().cpu()


@pytest.mark.parametrize(("name", "hp"), SETTINGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SETTINGS)])
def test_cuda_float32_matches_cpu_float64(name, hp, ref):
    B = 64
    views = ref.random_views(B=B, d=32, V=3, seed=5)
    y = _labels(name, ref, B)
    v64, g64 = _loss_and_grad(name, hp, views, y, temperature=0.2)
    v32, g32 = _loss_and_grad(name, hp, views.float().cuda(), None if y is None else y.cuda(), temperature=0.2)
    assert torch.allclose(v32, v64, rtol=1e-4, atol=1e-5), (float(v32), float(v64))
    assert torch.allclose(g32, g64, rtol=1e-3, atol=1e-6 + 1e-3 * float(g64.abs().max()))


@pytest.mark.parametrize("name", ["infonce", "dcl", "hcl", "bcl", "pucl", "debiased_pos"])
def test_cuda_query_key_bilinear_matches_cpu(name, ref):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(128, 50, generator=g, dtype=torch.float64)
    k = torch.randn(128, 50, generator=g, dtype=torch.float64)
    out = []
    for device, dtype in (("cpu", torch.float64), ("cuda", torch.float32)):
        torch.manual_seed(0)
        sampler = cl.make_sampler("query_key", embed_dim=50).to(device=device, dtype=dtype)
        qq = q.to(device, dtype).detach().clone().requires_grad_(True)
        value = cl.make_loss(name)(sampler(qq, k.to(device, dtype)))
        value.backward()
        out.append((value.detach().double().cpu(), qq.grad.double().cpu()))
    (v64, g64), (v32, g32) = out
    assert torch.allclose(v32, v64, rtol=1e-4, atol=1e-5)
    assert torch.allclose(g32, g64, rtol=1e-3, atol=1e-3 * float(g64.abs().max()))


@pytest.mark.parametrize("name", ["infonce", "dcl", "hcl", "bcl", "pucl", "debiased_pos"])
def test_cuda_bf16_autocast_is_finite_and_close(name, ref):
    views = ref.random_views(B=256, d=128, V=2, seed=9).float().cuda()
    proj = torch.nn.Linear(128, 128).cuda()
    sampler = cl.make_sampler("two_view", temperature=0.5)
    loss = cl.make_loss(name)
    full = loss(sampler(proj(views[0]), proj(views[1])))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        z0, z1 = proj(views[0]), proj(views[1])
        assert z0.dtype == torch.bfloat16
        mixed = loss(sampler(z0, z1))
    assert mixed.dtype == torch.float32 and torch.isfinite(mixed)
    mixed.backward()
    assert all(torch.isfinite(p.grad).all() for p in proj.parameters())
    assert abs(float(mixed) - float(full)) < 0.05 * abs(float(full)) + 1e-3


def test_cuda_queue_follows_the_queries_device():
    """A queue sampler built (or restored from a checkpoint) on the CPU and never ``.to(device)``-ed works with CUDA
    embeddings: its buffers move to the queries' device at the first call and keep the FIFO's contents."""
    cpu = cl.make_sampler("queue", size=6, temperature=0.5)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    cpu(q, k)  # fills 4 slots on the CPU
    moved = cl.make_sampler("queue", size=6, temperature=0.5)
    moved.load_state_dict(cpu.state_dict())
    batch = moved(q.cuda(), k.cuda())
    expected = cpu(q, k)
    assert moved.keys.is_cuda and moved.key_labels.is_cuda and moved.ptr.is_cuda
    assert torch.allclose(batch.neg_logits.cpu(), expected.neg_logits, atol=1e-5)
    assert torch.equal(batch.neg_mask.cpu(), expected.neg_mask)
