"""The graph model (GIN + projection head), its two objectives, one optimisation step, and frozen embeddings.

Data path (DESIGN.md) in ``graphcl`` mode (You et al., NeurIPS 2020, §3.2)::

    graphs --augment ×2--> views --GIN + sum readout--> h --projection g(·)--> z1, z2 --two_view--> batch --loss

``infograph`` mode (Sun et al., ICLR 2020, §3.2, local–global mutual information) contrasts every node ("patch")
embedding with its own graph's embedding (the positive) and the other graphs of the batch (the candidate
negatives). InfoGraph scores these pairs with a JSD estimator; here any registered loss scores them, with
cosine/temperature logits built into a :class:`~contrastlab.ContrastiveBatch` (A = nodes, N = G − 1), which is
how a debiased loss replaces InfoGraph's objective in PUCL Table 2 (the paper does not describe its pairing).

Labels never enter training: the graph labels are read only by the evaluation readout (the label-leak guard).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import contrastlab as cl
from contrastlab.data.graph_augment import GraphAugmentSpec, augment
from contrastlab.data.graphs import GraphBatch, GraphDataset
from contrastlab.encoders.heads import ProjectionHead, feature_dim
from contrastlab.plugins.graph.config import GraphConfig


class GraphModel(nn.Module):
    """GIN encoder, a graph projection head and (infograph mode) a node projection head."""

    def __init__(self, encoder: nn.Module, proj_hidden: int | None, proj_dim: int | None, local: bool) -> None:
        super().__init__()
        d = feature_dim(encoder)
        self.encoder = encoder
        self.head = ProjectionHead(d, proj_hidden or d, proj_dim or d, batch_norm=False)
        self.local_head = ProjectionHead(d, proj_hidden or d, proj_dim or d, batch_norm=False) if local else None

    def forward(self, b: GraphBatch) -> tuple[Tensor, Tensor, Tensor]:
        """``(h [G, d], z [G, p], node embeddings [n, d])`` of a batch of graphs."""
        h, nodes = self.encoder(b.x, b.edge_index, b.batch, b.num_graphs)
        return h, self.head(h), nodes


def build_model(config: GraphConfig, in_dim: int) -> GraphModel:
    """The configured encoder (from the registry, for ``in_dim`` node features) with its projection head(s)."""
    encoder = cl.make_encoder(config.encoder.name, in_dim=in_dim, **config.encoder.hparams())
    return GraphModel(encoder, config.model.proj_hidden, config.model.proj_dim, config.model.mode == "infograph")


def local_global_batch(z_nodes: Tensor, z_graphs: Tensor, batch: Tensor, temperature: float) -> cl.ContrastiveBatch:
    """InfoGraph pairs as a ContrastiveBatch: anchors are nodes, column 0 of the positives is the node's own graph.

    ``z_nodes [n, p]``, ``z_graphs [G, p]``, ``batch [n]``; logits are ``cos / t`` (bounded), the own graph's
    column is masked out of the candidate negatives, so every row has ``N = G − 1``.
    """
    logits = F.normalize(z_nodes, dim=1) @ F.normalize(z_graphs, dim=1).T / temperature      # [n, G]
    pos = logits.gather(1, batch[:, None])                                                    # [n, 1]
    mask = torch.ones_like(logits, dtype=torch.bool)
    mask[torch.arange(batch.numel(), device=batch.device), batch] = False                     # [n, G]
    return cl.ContrastiveBatch(pos_logits=pos, neg_logits=logits, neg_mask=mask, temperature=temperature,
                               bounded=True, meta={"sampler": "local_global"})


class GraphTrainer:
    """Holds the model, sampler, loss and optimiser; :meth:`step` does one optimisation step."""

    def __init__(self, config: GraphConfig, in_dim: int, device: torch.device) -> None:
        self.config, self.device = config, device
        self.model = build_model(config, in_dim).to(device)
        self.sampler = cl.make_sampler(config.sampler.name, **config.sampler.hparams()).to(device)
        self.loss = cl.make_loss(config.loss.name, **config.loss.hparams()).to(device)
        params = nn.ModuleList([self.model, self.sampler, self.loss]).parameters()
        self.optimizer = torch.optim.Adam(params, lr=config.train.lr, weight_decay=config.train.weight_decay)
        a = config.augment
        self.spec = GraphAugmentSpec(tuple(a.methods), a.drop_nodes, a.perturb_edges, a.mask_attributes, a.subgraph)
        self.temperature = float(config.sampler.hparams().get("temperature", 0.2))

    def compute_loss(self, b: GraphBatch, generator: torch.Generator) -> Tensor:
        """Loss of one batch of graphs (CPU batch; views are made on the CPU, then moved to the device)."""
        if self.config.model.mode == "infograph":
            b = b.to(self.device)
            _, z, nodes = self.model(b)
            assert self.model.local_head is not None
            return self.loss(local_global_batch(self.model.local_head(nodes), z, b.batch, self.temperature))
        v1 = augment(b, self.spec, generator).to(self.device)
        v2 = augment(b, self.spec, generator).to(self.device)
        _, z1, _ = self.model(v1)                                                              # [B, p]
        _, z2, _ = self.model(v2)                                                              # [B, p]
        return self.loss(self.sampler(z1, z2))                                                 # never labels

    def step(self, b: GraphBatch, generator: torch.Generator) -> tuple[Tensor, dict[str, Tensor]]:
        """One optimisation step; returns the detached loss and the loss's ``last_stats`` (tensors, no sync)."""
        self.model.train()
        loss = self.compute_loss(b, generator)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach(), dict(getattr(self.loss, "last_stats", {}) or {})

    def state_dict(self) -> dict:
        """Everything needed to resume: model, sampler/loss parameters and optimiser."""
        return {"model": self.model.state_dict(), "sampler": self.sampler.state_dict(),
                "loss": self.loss.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.model.load_state_dict(state["model"])
        self.sampler.load_state_dict(state["sampler"])
        self.loss.load_state_dict(state["loss"])
        self.optimizer.load_state_dict(state["optimizer"])


@torch.no_grad()
def embed_dataset(model: GraphModel, data: GraphDataset, batch_size: int, device: torch.device) -> Tensor:
    """Frozen graph embeddings ``h [G, d]`` (encoder output, before the projection head), in dataset order."""
    was_training = model.training
    model.eval()
    out = []
    for start in range(0, len(data), batch_size):
        idx = torch.arange(start, min(start + batch_size, len(data)))
        h, _, _ = model(data.batch(idx).to(device))
        out.append(h.float().cpu())
    model.train(was_training)
    return torch.cat(out)
