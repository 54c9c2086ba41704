"""Model pieces of the ``recsys`` plugin: encoder + ``query_key`` sampler, one training step, and scoring.

The score of (user ``u``, item ``i``) is the sampler's similarity: cosine (``query_key`` ``similarity=cosine``)
or ``u W iᵀ`` (``bilinear``; here ``W`` starts at the identity, and stays there unless ``model.learn_bilinear``,
which makes it the MF/LightGCN dot product). Ranking uses the same score without the temperature (a positive
scale does not change a ranking).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import contrastlab as cl
from contrastlab.losses.floors import clamped_frac_of
from contrastlab.plugins.recsys.config import RecsysConfig
from contrastlab.plugins.recsys.model import normalized_adjacency
from contrastlab.plugins.recsys.pairs import build_batch
from contrastlab.plugins.recsys.split import Split


@dataclass
class Model:
    """The trainable pieces: the user/item encoder and the sampler (which owns the bilinear W, if any)."""

    encoder: nn.Module
    """``mf`` or ``lightgcn``: ``encoder() -> (users [U, d], items [I, d])``."""
    sampler: nn.Module
    """The ``query_key`` sampler that turns embeddings into logits."""

    def parameters(self) -> list[nn.Parameter]:
        """Parameters the optimizer updates (a frozen bilinear W is left out)."""
        params = list(self.encoder.parameters()) + list(self.sampler.parameters())
        return [p for p in params if p.requires_grad]

    def state_dict(self) -> dict:
        """Encoder and sampler weights (for checkpoints)."""
        return {"encoder": self.encoder.state_dict(), "sampler": self.sampler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.encoder.load_state_dict(state["encoder"])
        self.sampler.load_state_dict(state["sampler"])


def build_model(config: RecsysConfig, split: Split, device: torch.device) -> Model:
    """Encoder over the training graph and the configured ``query_key`` sampler, on ``device``."""
    graph = normalized_adjacency(split.train.users, split.train.items, split.num_users, split.num_items)
    encoder = cl.make_encoder(config.encoder.name, num_users=split.num_users, num_items=split.num_items,
                              graph=graph, **config.encoder.hparams())
    dim = int(encoder.dim)
    sampler = cl.make_sampler(config.sampler.name, embed_dim=dim, gather_distributed=False, **config.sampler.hparams())
    weight = getattr(sampler, "W", None)
    if isinstance(weight, nn.Parameter):  # bilinear: start at the dot product (CURL's U[0,1) init is for pixels)
        with torch.no_grad():
            weight.copy_(torch.eye(dim))
        weight.requires_grad_(config.model.learn_bilinear)
    return Model(encoder.to(device), sampler.to(device))


def make_scorer(model: Model) -> Callable[[int, int], Tensor]:
    """``score(u0, u1) -> [u1 − u0, I]``: the model's scores of users ``u0..u1−1`` for every item (no grad)."""
    with torch.no_grad():
        users, items = model.encoder()
        if getattr(model.sampler, "similarity", "cosine") == "cosine":
            users, items = F.normalize(users.float(), dim=1), F.normalize(items.float(), dim=1)
        else:
            users = users.float() @ model.sampler.W.detach().float()
        items_t = items.float().T.contiguous()  # [d, I]
    return lambda u0, u1: users[u0:u1] @ items_t


@dataclass
class StepResult:
    """What one optimisation step reports (tensors: no host sync until they are logged)."""

    loss: Tensor
    """Detached 0-d loss."""
    clamped_frac: Tensor | None
    """The loss's ``last_stats["clamped_frac"]`` (DCL/HCL/PUCL/DebiasedPos), else ``None``."""


def train_step(model: Model, loss_fn: nn.Module, optimizer: torch.optim.Optimizer, users: Tensor, items: Tensor,
               sampled: Tensor | None, *, mode: str, train_keys: Tensor | None, num_items: int) -> StepResult:
    """One step: propagate, build the batch (users × items), apply the loss, update."""
    user_emb, item_emb = model.encoder()
    batch = build_batch(model.sampler, user_emb, item_emb, users, items, sampled, mode=mode,
                        train_keys=train_keys, num_items=num_items)
    loss = loss_fn(batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return StepResult(loss.detach(), clamped_frac_of(loss_fn))
