"""User/item encoders of the ``recsys`` plugin: matrix factorisation (``mf``) and LightGCN (``lightgcn``).

Both are registered encoders (``platform list encoders``) built with
``cl.make_encoder(name, num_users=U, num_items=I, graph=Â, **hparams)`` and called without input:
``users, items = encoder()`` returns the ``[U, d]`` and ``[I, d]`` embedding tables the scores are computed from.

* ``mf``: the tables themselves, ``e_u`` and ``e_i`` (the graph is ignored).
* ``lightgcn`` (He et al., *LightGCN: Simplifying and Powering Graph Convolution Network for Recommendation*,
  SIGIR 2020, eqs. 3–4 and 6–8): layer-0 tables ``E⁽⁰⁾ = [E_U; E_I]``, propagation
  ``E⁽ᵏ⁺¹⁾ = Â E⁽ᵏ⁾`` with the symmetrically normalised bipartite adjacency ``Â = D^{-1/2} A D^{-1/2}``,
  ``A = [[0, R], [Rᵀ, 0]]`` (``R`` the training interactions), and the final embedding the mean of the layer
  outputs ``E = (1/(K+1)) Σ_{k=0..K} E⁽ᵏ⁾`` (α_k = 1/(K+1)). No feature transform, no non-linearity.

``Â`` is a coalesced ``torch.sparse_coo_tensor`` built only from training interactions (test pairs never enter
the graph). Initialisation: ``N(0, init_std²)`` with ``init_std = 0.1``, as LightGCN's PyTorch release does
(the paper text says Xavier); the embedding size 64 and K = 3 layers are LightGCN's reported settings.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

import contrastlab as cl
from contrastlab.platform.registry import int_in
from contrastlab.samplers.base import positive_finite


def normalized_adjacency(users: Tensor, items: Tensor, num_users: int, num_items: int) -> Tensor:
    """``Â = D^{-1/2} A D^{-1/2}`` of the user–item bipartite graph, ``[(U+I), (U+I)]`` sparse COO (float32).

    Node ``u`` is user ``u``; node ``U + i`` is item ``i``. ``A`` has a 1 at ``(u, U+i)`` and ``(U+i, u)`` per
    interaction; isolated nodes have no entries (their ``D^{-1/2}`` would be infinite and is never needed).
    """
    n = num_users + num_items
    rows = torch.cat([users, items + num_users])
    cols = torch.cat([items + num_users, users])
    deg = torch.bincount(rows, minlength=n).double()
    inv_sqrt = deg.clamp_min(1.0).rsqrt()
    values = (inv_sqrt[rows] * inv_sqrt[cols]).float()
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), values, (n, n), check_invariants=True).coalesce()


class MFEncoder(nn.Module):
    """Matrix factorisation: a user table and an item table, scored by the sampler (cosine or bilinear)."""

    name = "mf"
    description = "recsys: matrix factorisation, user and item embedding tables (no input; graph ignored)"
    hyperparameters = (
        cl.HParam("dim", 64, "embedding size d", "[1, 4096]", "LightGCN (He et al. 2020) §4.1.2: 64 for every model",
                  int_in(1, 4096)),
        cl.HParam("init_std", 0.1, "standard deviation of the N(0, σ²) initialisation", "(0, inf)",
                  "LightGCN PyTorch release (normal, std 0.1)", positive_finite),
    )

    def __init__(self, dim: int = 64, init_std: float = 0.1, num_users: int = 1, num_items: int = 1,
                 graph: Tensor | None = None) -> None:
        super().__init__()
        self.dim = int(dim)
        """Embedding size."""
        self.num_users, self.num_items = int(num_users), int(num_items)
        self.user = nn.Embedding(self.num_users, self.dim)
        """``[U, d]`` user table (layer 0)."""
        self.item = nn.Embedding(self.num_items, self.dim)
        """``[I, d]`` item table (layer 0)."""
        nn.init.normal_(self.user.weight, std=float(init_std))
        nn.init.normal_(self.item.weight, std=float(init_std))

    def forward(self) -> tuple[Tensor, Tensor]:
        """``(users [U, d], items [I, d])`` final embeddings."""
        return self.user.weight, self.item.weight


class LightGCNEncoder(MFEncoder):
    """LightGCN: the MF tables propagated ``layers`` times over ``Â`` and averaged (He et al. 2020, eq. 8)."""

    name = "lightgcn"
    description = "recsys: LightGCN, K propagation layers over the normalised user-item graph, mean of layers"
    hyperparameters = (
        *MFEncoder.hyperparameters,
        cl.HParam("layers", 3, "propagation layers K (0 = MF)", "[0, 16]",
                  "LightGCN §4.1.2 / §4.4: K = 3 performs well", int_in(0, 16)),
    )

    def __init__(self, dim: int = 64, init_std: float = 0.1, layers: int = 3, num_users: int = 1,
                 num_items: int = 1, graph: Tensor | None = None) -> None:
        super().__init__(dim, init_std, num_users, num_items)
        self.layers = int(layers)
        """Number of propagation layers K."""
        n = self.num_users + self.num_items
        if graph is None:
            graph = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (n, n),
                                            check_invariants=True)
        if tuple(graph.shape) != (n, n):
            raise cl.ConfigError(f"encoder 'lightgcn': graph must be [{n}, {n}] (users + items), got "
                                 f"{tuple(graph.shape)}")
        self.register_buffer("graph", graph.coalesce(), persistent=False)
        """``Â`` ``[U+I, U+I]`` sparse; not saved in checkpoints (it is rebuilt from the split)."""

    def forward(self) -> tuple[Tensor, Tensor]:
        """``(users [U, d], items [I, d])``: ``(1/(K+1)) Σ_k Âᵏ E⁽⁰⁾``, split back into users and items."""
        e = torch.cat([self.user.weight, self.item.weight])  # [U+I, d]  E⁽⁰⁾
        total = e
        for _ in range(self.layers):
            e = torch.sparse.mm(self.graph, e)  # E⁽ᵏ⁺¹⁾ = Â E⁽ᵏ⁾
            total = total + e
        out = total / (self.layers + 1)
        return out[: self.num_users], out[self.num_users:]


ENCODERS = (MFEncoder, LightGCNEncoder)
"""Encoders the ``recsys`` plugin registers."""
