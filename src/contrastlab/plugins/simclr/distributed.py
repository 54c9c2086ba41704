"""Multi-GPU / multi-node support of the ``simclr`` plugin (``torchrun --nproc_per_node=K``).

``torchrun`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and the rendezvous variables. :func:`setup` then
initialises the process group (NCCL on CUDA, gloo on CPU) and picks ``cuda:LOCAL_RANK``. The samplers gather
embeddings from every rank (the negatives of each anchor come from the global batch); this module only adds the
per-rank data split (:func:`epoch_indices`, a ``DistributedSampler`` over image indices) and the rank helpers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor
from torch.utils.data import DistributedSampler


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job."""

    rank: int = 0
    """Global rank (0 in a single-process run)."""
    world_size: int = 1
    """Number of processes."""
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    """This process's training device."""

    @property
    def is_main(self) -> bool:
        """Rank 0 logs, evaluates and writes checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Whether more than one process takes part."""
        return self.world_size > 1


def setup(device: torch.device) -> DistInfo:
    """Initialise the process group when launched by ``torchrun`` with ``WORLD_SIZE > 1`` (idempotent)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if dist.is_available() and dist.is_initialized():
        return _info(device)
    if world <= 1 or not dist.is_available():
        return DistInfo(device=device)
    if device.type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return _info(device)


def _info(device: torch.device) -> DistInfo:
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return DistInfo(dist.get_rank(), dist.get_world_size(), device)


def epoch_indices(n: int, epoch: int, info: DistInfo, seed: int) -> Tensor:
    """This rank's shuffled image indices for ``epoch`` (``DistributedSampler`` semantics, drop_last)."""
    sampler = DistributedSampler(range(n), num_replicas=info.world_size, rank=info.rank, shuffle=True,
                                 seed=seed, drop_last=True)
    sampler.set_epoch(epoch)
    return torch.tensor(list(sampler), dtype=torch.long)


def barrier(info: DistInfo) -> None:
    """Wait for every rank (no-op in a single process)."""
    if info.distributed:
        dist.barrier()


def broadcast_from_main(obj: object, info: DistInfo) -> object:
    """Rank 0's ``obj`` on every rank (so every process returns the same final metrics)."""
    if not info.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def average_gradients(params: list[Tensor]) -> None:
    """Replace the gradients of ``params`` by their mean over all ranks, in one all-reduce.

    For learnable parts that sit outside ``DistributedDataParallel`` (the ``query_key`` sampler's bilinear ``W``):
    each rank's loss is scaled by the world size, as DDP's averaging expects (``reduce_anchors``), so the mean over
    ranks is the full-batch gradient. A parameter without a gradient counts as zero (every rank takes part). No-op
    without a process group.
    """
    if not params or not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    for p, chunk in zip(params, flat.split([g.numel() for g in grads]), strict=True):
        p.grad = chunk.view_as(p).clone()
