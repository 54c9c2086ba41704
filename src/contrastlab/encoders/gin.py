"""Graph Isomorphism Network encoder with a sum-pooling readout of every layer (InfoGraph / GraphCL).

GIN layer (Xu et al., ICLR 2019, eq. 4.1): ``h_v^{(k)} = MLP^{(k)}((1 + ε) h_v^{(k-1)} + Σ_{u ∈ N(v)} h_u^{(k-1)})``
with ``ε = 0`` (GIN-0) and ``MLP = Linear → ReLU → Linear``, followed by ReLU and batch normalisation as in the
InfoGraph (Sun et al., ICLR 2020, §4) and GraphCL (You et al., NeurIPS 2020, §4) encoders.

Readout (InfoGraph eq. 4 / Xu et al. §4.2): the graph embedding is the concatenation over layers of the sum of
node states, ``h_G = ‖_{k=1..L} Σ_v h_v^{(k)}``, so it has ``L · hidden_dim`` entries; the node ("patch")
embedding is ``‖_k h_v^{(k)}``. Sum pooling keeps the graph size, which mean pooling would discard.

Message passing uses torch-geometric's ``GINConv`` (PyG >= 2.3 runs on plain torch, no compiled extensions);
torch-geometric is imported when an encoder is built, not when contrastlab is imported. PyG writes each
layer class's generated ``propagate`` module to a ``torch_geometric.*.py`` file in the temp dir (once per process)
and never deletes it; the encoder deletes that file once the module is loaded (one file per graph run piled up).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor, nn

from contrastlab.platform.errors import ConfigError
from contrastlab.platform.registry import HParam, int_in


def drop_generated_sources() -> None:
    """Delete the source files PyG generated for its message-passing templates (already imported, so unused).

    PyG's ``module_from_template`` writes the rendered ``propagate`` of a layer class to
    ``<tempdir>/<module name>_<random>.py`` with ``delete=False`` and imports it as ``<module name>``; the code
    lives on in memory, and ``torch.jit.script`` (which would re-read the source) is not used here.
    """
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) if name.startswith("torch_geometric.") else None
        if file and Path(file).name.startswith(f"{name}_") and file.endswith(".py"):
            Path(file).unlink(missing_ok=True)


def sum_pool(h: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
    """``[n, d]`` node states → ``[G, d]`` per-graph sums (``batch [n]`` names each node's graph)."""
    return h.new_zeros(num_graphs, h.shape[1]).index_add_(0, batch, h)


class GINEncoder(nn.Module):
    """``(x [n, F], edge_index [2, E], batch [n], G) → (graph [G, L·hidden], nodes [n, L·hidden])``."""

    name = "gin"
    description = "GIN graph encoder (Xu et al. 2019), sum-pooled concatenation of all layers (InfoGraph/GraphCL)"
    hyperparameters = (
        HParam("hidden_dim", 32, "width of every GIN layer", "[1, 4096]",
               "GraphCL/InfoGraph unsupervised TU setting: 32", int_in(1, 4096)),
        HParam("num_layers", 3, "number of GIN layers L (the embedding has L·hidden_dim entries)", "[1, 16]",
               "GraphCL unsupervised TU scripts: 3 layers", int_in(1, 16)),
        HParam("batch_norm", True, "batch normalisation after every layer", "true | false",
               "InfoGraph/GraphCL GIN encoder", lambda v: isinstance(v, bool)),
    )

    def __init__(self, hidden_dim: int = 32, num_layers: int = 3, batch_norm: bool = True, in_dim: int = 1) -> None:
        super().__init__()
        try:
            from torch_geometric.nn import GINConv
        except ImportError as exc:  # pragma: no cover - the dependency is declared in pyproject.toml
            raise ConfigError(f"the gin encoder needs torch-geometric ({exc}); pip install torch-geometric") from None
        self.in_dim = int(in_dim)
        """Node feature size ``F`` (not a hyperparameter: set from the dataset)."""
        self.hidden_dim, self.num_layers = int(hidden_dim), int(num_layers)
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        width = self.in_dim
        for _ in range(self.num_layers):
            mlp = nn.Sequential(nn.Linear(width, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim))
            self.convs.append(GINConv(mlp, eps=0.0, train_eps=False))
            self.norms.append(nn.BatchNorm1d(hidden_dim) if batch_norm else nn.Identity())
            width = hidden_dim
        drop_generated_sources()

    @property
    def out_dim(self) -> int:
        """Size of the graph embedding, ``num_layers · hidden_dim``."""
        return self.num_layers * self.hidden_dim

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor, num_graphs: int) -> tuple[Tensor, Tensor]:
        """Graph embeddings ``[G, L·hidden]`` and node embeddings ``[n, L·hidden]``."""
        if x.shape[1] != self.in_dim:
            raise ConfigError(f"gin encoder built for {self.in_dim} node features got {x.shape[1]}")
        h, layers = x, []
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = norm(torch.relu(conv(h, edge_index)))              # [n, hidden]
            layers.append(h)
        nodes = torch.cat(layers, dim=1)                            # [n, L·hidden]
        return sum_pool(nodes, batch, num_graphs), nodes


ENCODERS = (GINEncoder,)
