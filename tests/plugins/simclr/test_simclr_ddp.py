"""DDP: one training step with 2 gloo processes equals the single-process step on the concatenated batch.

Each rank encodes its half of the batch; the two_view sampler gathers the embeddings of both ranks (negatives
from the global batch) and DDP averages the gradients (the trainer averages those of a learnable sampler,
outside DDP, itself). The BatchNorm-free model makes per-rank and global
forward passes identical, so the updated parameters must agree to float64 precision (the test runs in float64,
so the order of floating-point sums cannot decide it).
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from simclr_helpers import tiny_config

from contrastlab.plugins.simclr.distributed import DistInfo, epoch_indices
from contrastlab.plugins.simclr.trainer import Trainer

SETS = ("encoder.norm=none", "model.head_batch_norm=false", "model.channels_last=false", "train.optimizer=sgd",
        "train.lr=0.5", "train.momentum=0.0", "train.weight_decay=0.0", "train.batch_size=8")


def _config(loss, sampler=None):
    return tiny_config(loss, *SETS, sampler=sampler)


def _batch():
    g = torch.Generator().manual_seed(7)
    return torch.randn(2, 8, 3, 16, 16, generator=g), torch.arange(8) % 4


def _worker(rank: int, world: int, init: str, loss: str, sampler: str | None, out: str) -> None:
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)  # float64 so that summation order cannot matter
    # rendezvous through a file of the test's own tmp_path: a port found free and closed again (then bound by
    # rank 0) could be taken in between by another process, e.g. the other pytest worker
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        trainer = Trainer(_config(loss, sampler), 3, torch.device("cpu"), distributed=True)
        views, labels = _batch()
        half = views.shape[1] // world
        loss_value = trainer.step(views[:, rank * half:(rank + 1) * half], labels[rank * half:(rank + 1) * half])
        params = [*trainer.model.parameters(), *trainer.sampler.parameters()]  # + query_key's W (outside DDP)
        torch.save({"params": [p.detach() for p in params], "grads": [p.grad.detach() for p in params],
                    "loss": loss_value}, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()
    # Leave without interpreter teardown: gloo's background threads can abort (SIGABRT, "terminate called without
    # an active exception") while Python destroys modules, which would fail an otherwise finished test.
    os._exit(0)


@pytest.mark.distributed
@pytest.mark.parametrize(("loss", "sampler"), [("dcl", None), ("dcl", "query_key")])
def test_two_process_step_matches_single_process(tmp_path, loss, sampler):
    """query_key: its learnable W sits outside DDP; its gradient must be averaged over the ranks too."""
    out = str(tmp_path / "rank.pt")
    mp.spawn(_worker, args=(2, str(tmp_path / "rendezvous"), loss, sampler, out), nprocs=2, join=True)
    ranks = [torch.load(f"{out}.{r}") for r in range(2)]
    for p0, p1 in zip(ranks[0]["params"], ranks[1]["params"], strict=True):  # the ranks stay in step
        assert torch.equal(p0, p1)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _single_step_and_compare(ranks[0], loss, sampler)
    finally:
        torch.set_default_dtype(previous)


def _single_step_and_compare(ddp: dict, loss: str, sampler: str | None) -> None:
    torch.manual_seed(0)
    single = Trainer(_config(loss, sampler), 3, torch.device("cpu"))
    views, labels = _batch()
    single.step(views, labels)
    params = [*single.model.parameters(), *single.sampler.parameters()]
    assert len(params) == len(ddp["params"]) > len(list(single.model.parameters())) - (sampler is None)
    grads = [p.grad.detach() for p in params]
    scale = max(float(g.abs().max()) for g in grads)
    assert scale > 0                                                     # the step did something
    for g_ddp, g_single in zip(ddp["grads"], grads, strict=True):        # DDP-averaged = full-batch gradient
        assert g_ddp.dtype == torch.float64
        torch.testing.assert_close(g_ddp, g_single, rtol=1e-7, atol=1e-9 * scale)
    for p_ddp, p_single in zip(ddp["params"], params, strict=True):
        torch.testing.assert_close(p_ddp, p_single.detach(), rtol=1e-9, atol=1e-12)


def test_distributed_index_split_partitions_each_epoch():
    parts = [epoch_indices(103, 3, DistInfo(rank=r, world_size=2), seed=5) for r in range(2)]
    assert len(parts[0]) == len(parts[1]) == 51
    assert not set(parts[0].tolist()) & set(parts[1].tolist())
    again = epoch_indices(103, 3, DistInfo(rank=0, world_size=2), seed=5)
    other = epoch_indices(103, 4, DistInfo(rank=0, world_size=2), seed=5)
    assert torch.equal(parts[0], again) and not torch.equal(parts[0], other)
