"""GraphCL graph augmentations on a whole :class:`GraphBatch` at once (vectorised, seeded by a generator).

GraphCL (You et al., NeurIPS 2020, §3.1 and Table 1) builds the two views of a graph with:

* **node dropping**: discard a ratio of the nodes with their edges (``⌊n·r⌋`` nodes, at least one node kept);
* **edge perturbation**: drop a ratio of the (undirected) edges and add as many random pairs of two distinct nodes
  of the same graph (``⌊|E|·r⌋`` each; a pair that is already an edge is kept once);
* **attribute masking**: set the features of a ratio of the nodes to 0 (``⌊n·r⌋`` nodes);
* **subgraph**: keep a connected region of ``n − ⌊n·r⌋`` nodes grown from a random node by repeatedly adding random
  neighbours of the region (GraphCL's random-walk subgraph; see :func:`subgraph` for the exact sampling);
* **identity** (no change).

Every graph of every view draws one augmentation uniformly from ``methods`` (GraphCL samples augmentations from
a pool; its unsupervised TU experiments use ratio 0.2). The choices are made per graph with a ``torch.Generator``,
so a seed fixes both views.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from contrastlab.data.graphs import GraphBatch, coalesce_undirected, segment_ids
from contrastlab.platform.errors import ConfigError

AUGMENTATIONS = ("drop_nodes", "perturb_edges", "mask_attributes", "subgraph", "identity")
"""Names accepted in :attr:`GraphAugmentSpec.methods`."""


@dataclass(frozen=True)
class GraphAugmentSpec:
    """Which augmentations make a view, and how strong each is."""

    methods: tuple[str, ...] = ("drop_nodes", "perturb_edges", "mask_attributes")
    """Pool of augmentations; each graph of each view gets one of them, uniformly at random."""
    drop_nodes: float = 0.2
    """Fraction of nodes dropped by ``drop_nodes``."""
    perturb_edges: float = 0.2
    """Fraction of edges dropped, and (as many) added, by ``perturb_edges``."""
    mask_attributes: float = 0.2
    """Fraction of nodes whose features are zeroed by ``mask_attributes``."""
    subgraph: float = 0.2
    """Fraction of nodes left out of the connected region ``subgraph`` keeps."""

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in AUGMENTATIONS]
        if not self.methods or unknown:
            raise ConfigError(f"unknown graph augmentation '{unknown[0] if unknown else ''}'; valid: "
                              f"{', '.join(AUGMENTATIONS)}")
        for name in ("drop_nodes", "perturb_edges", "mask_attributes", "subgraph"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"augment.{name}={value} is out of range; valid range: [0, 1)")


def random_rank(groups: Tensor, starts: Tensor, generator: torch.Generator | None) -> Tensor:
    """A uniformly random rank ``0..count-1`` of every item within its group (``groups`` non-decreasing ids)."""
    score = torch.rand(groups.numel(), generator=generator, dtype=torch.float64)
    order = torch.argsort(groups.double() + score)                  # groups stay contiguous, shuffled inside
    rank = torch.empty_like(groups)
    rank[order] = torch.arange(groups.numel()) - starts[groups[order]]
    return rank


def drop_nodes(batch: GraphBatch, ratio: Tensor, generator: torch.Generator | None) -> GraphBatch:
    """Drop ``⌊n_g · ratio[g]⌋`` random nodes of every graph ``g`` (never all of them) and their edges."""
    counts, ptr = batch.node_counts(), batch.node_ptr()
    k = torch.minimum(torch.floor(counts * ratio).long(), counts - 1)               # [G]
    keep = random_rank(batch.batch, ptr, generator) >= k[batch.batch]               # [n]
    new_id = torch.cumsum(keep.long(), 0) - 1
    src, dst = batch.edge_index
    kept_edges = keep[src] & keep[dst]
    edges = new_id[batch.edge_index[:, kept_edges]]
    return GraphBatch(batch.x[keep], edges, batch.batch[keep], batch.num_graphs)


def perturb_edges(batch: GraphBatch, ratio: Tensor, generator: torch.Generator | None) -> GraphBatch:
    """Drop ``⌊|E_g| · ratio[g]⌋`` random undirected edges of every graph and add as many random pairs of two
    distinct nodes of that graph (never a self-loop: GIN's sum would count the node's own state twice)."""
    src, dst = batch.edge_index
    und = batch.edge_index[:, src <= dst]                                           # each undirected edge once
    graph_of = batch.batch[und[0]]                                                  # [E_u], non-decreasing
    e_counts = torch.bincount(graph_of, minlength=batch.num_graphs)
    e_ptr = torch.cat([e_counts.new_zeros(1), e_counts.cumsum(0)])
    m = torch.floor(e_counts * ratio).long()                                        # [G]
    kept = und[:, random_rank(graph_of, e_ptr, generator) >= m[graph_of]]
    counts = batch.node_counts()
    owner = segment_ids(torch.where(counts >= 2, m, 0))                             # [sum m]; 1 node: no pair
    n_g, start = counts[owner], batch.node_ptr()[owner]
    a = (torch.rand(owner.numel(), generator=generator) * n_g).long()              # local ids in [0, n_g)
    b = (a + 1 + (torch.rand(owner.numel(), generator=generator) * (n_g - 1)).long()) % n_g  # b != a
    added = torch.stack([start + a, start + b])                                     # no self-loops
    edges = coalesce_undirected(torch.cat([kept, added], dim=1), batch.num_nodes)
    return GraphBatch(batch.x, edges, batch.batch, batch.num_graphs)


def mask_attributes(batch: GraphBatch, ratio: Tensor, generator: torch.Generator | None) -> GraphBatch:
    """Zero the features of ``⌊n_g · ratio[g]⌋`` random nodes of every graph."""
    counts, ptr = batch.node_counts(), batch.node_ptr()
    k = torch.floor(counts * ratio).long()
    masked = random_rank(batch.batch, ptr, generator) < k[batch.batch]
    return GraphBatch(batch.x.masked_fill(masked[:, None], 0.0), batch.edge_index, batch.batch, batch.num_graphs)


SUBGRAPH_ROUNDS = 32
""":func:`subgraph` adds up to ``⌈target / SUBGRAPH_ROUNDS⌉`` nodes per graph and round, so large graphs (DD,
REDDIT) need about this many rounds rather than one per node."""


def subgraph(batch: GraphBatch, ratio: Tensor, generator: torch.Generator | None) -> GraphBatch:
    """Keep a connected region of ``n_g − ⌊n_g · ratio[g]⌋`` nodes of every graph ``g`` (never fewer than one).

    The region starts at a uniformly random node. Every round adds up to ``k_g = ⌈target_g / SUBGRAPH_ROUNDS⌉``
    nodes drawn uniformly from its frontier (the nodes outside it with a neighbour inside), so graphs of up to
    ``SUBGRAPH_ROUNDS`` kept nodes grow one random neighbour at a time, as GraphCL's sampler does; when the frontier
    is empty (the region fills its connected component), a random node outside it is added, as GraphCL's later code
    does. Edges with a dropped end are removed, like :func:`drop_nodes`.
    """
    counts, ptr = batch.node_counts(), batch.node_ptr()
    target = counts - torch.minimum(torch.floor(counts * ratio).long(), counts - 1)           # [G] nodes to keep
    per_round = torch.div(target + SUBGRAPH_ROUNDS - 1, SUBGRAPH_ROUNDS, rounding_mode="floor")
    g_of = batch.batch
    whole = target == counts                                                                  # nothing to drop
    inside = (random_rank(g_of, ptr, generator) == 0) | whole[g_of]                           # one seed per graph
    src, dst = batch.edge_index
    size = torch.where(whole, counts, torch.ones_like(counts))
    while bool((size < target).any()):
        need = torch.minimum(per_round, target - size)                                       # [G], 0 when done
        frontier = torch.zeros_like(inside)
        frontier[dst[inside[src]]] = True
        frontier &= ~inside
        empty = torch.bincount(g_of[frontier], minlength=batch.num_graphs) == 0
        pool = frontier | (~inside & empty[g_of])                                            # jump if no frontier
        score = torch.rand(g_of.numel(), generator=generator, dtype=torch.float64)
        score = torch.where(pool, score, torch.full_like(score, 2.0))                         # pool first per graph
        order = torch.argsort(g_of.double() * 4 + score)
        rank = torch.empty_like(g_of)
        rank[order] = torch.arange(g_of.numel()) - ptr[g_of[order]]
        take = pool & (rank < torch.where(empty, torch.ones_like(need).clamp_max(need), need)[g_of])
        inside |= take
        size = size + torch.bincount(g_of[take], minlength=batch.num_graphs)
    new_id = torch.cumsum(inside.long(), 0) - 1
    kept_edges = inside[src] & inside[dst]
    return GraphBatch(batch.x[inside], new_id[batch.edge_index[:, kept_edges]], g_of[inside], batch.num_graphs)


def augment(batch: GraphBatch, spec: GraphAugmentSpec, generator: torch.Generator | None = None) -> GraphBatch:
    """One augmented view of ``batch`` (on the CPU): every graph gets one augmentation drawn from ``spec.methods``.

    The number of graphs never changes; a graph keeps at least one node.
    """
    choice = torch.randint(len(spec.methods), (batch.num_graphs,), generator=generator)   # [G]

    def ratio(name: str) -> Tensor:
        chosen = torch.zeros(batch.num_graphs, dtype=torch.bool)
        for i, method in enumerate(spec.methods):
            if method == name:
                chosen |= choice == i
        return torch.where(chosen, torch.tensor(float(getattr(spec, name))), torch.tensor(0.0))

    out = batch
    if "perturb_edges" in spec.methods:
        out = perturb_edges(out, ratio("perturb_edges"), generator)
    if "mask_attributes" in spec.methods:
        out = mask_attributes(out, ratio("mask_attributes"), generator)
    if "drop_nodes" in spec.methods:
        out = drop_nodes(out, ratio("drop_nodes"), generator)
    if "subgraph" in spec.methods:
        out = subgraph(out, ratio("subgraph"), generator)
    return out
