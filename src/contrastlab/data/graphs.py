"""In-memory graph-classification datasets and mini-batches of graphs, in plain torch (no PyG objects).

A :class:`GraphDataset` stores every graph of a dataset in one block (the layout of the TU format, Morris et al.
2020): node features ``x [n, F]``, undirected edges stored in both directions ``edge_index [2, E]`` (global node
ids, grouped by graph), offsets ``node_ptr``/``edge_ptr [G + 1]`` and one class label per graph. Selecting graphs
gives a :class:`GraphBatch`: the disjoint union of the selected graphs with batch-local node ids and a
``batch [n]`` vector naming each node's graph (the layout GNN message passing and sum pooling expect).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import Tensor


@dataclass(frozen=True)
class GraphBatch:
    """The disjoint union of ``num_graphs`` graphs."""

    x: Tensor
    """``[n, F]`` float node features."""
    edge_index: Tensor
    """``[2, E]`` long directed edges (source, target) between batch-local node ids; undirected edges appear in
    both directions."""
    batch: Tensor
    """``[n]`` long graph id (``0..num_graphs-1``) of every node, non-decreasing."""
    num_graphs: int
    """Number of graphs ``G`` (a graph may have no edges, never zero nodes)."""

    @property
    def num_nodes(self) -> int:
        """``n``, the total number of nodes."""
        return int(self.x.shape[0])

    def node_counts(self) -> Tensor:
        """``[G]`` nodes per graph."""
        return torch.bincount(self.batch, minlength=self.num_graphs)

    def node_ptr(self) -> Tensor:
        """``[G + 1]`` offsets of every graph's first node (nodes are grouped by graph)."""
        return torch.cat([self.batch.new_zeros(1), self.node_counts().cumsum(0)])

    def to(self, device: torch.device | str) -> GraphBatch:
        """The batch on ``device``."""
        return replace(self, x=self.x.to(device), edge_index=self.edge_index.to(device), batch=self.batch.to(device))


def segment_ids(counts: Tensor) -> Tensor:
    """``[sum(counts)]``: ``i`` repeated ``counts[i]`` times."""
    return torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts)


def ranges(starts: Tensor, counts: Tensor) -> Tensor:
    """Concatenation of ``arange(starts[i], starts[i] + counts[i])`` over ``i`` (vectorised)."""
    seg = segment_ids(counts)
    offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)[:-1]])
    return starts[seg] + torch.arange(int(counts.sum()), device=counts.device) - offsets[seg]


def coalesce_undirected(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Both directions of every edge, duplicates removed, sorted by (source, target). ``[2, E] → [2, E']``."""
    if edge_index.numel() == 0:
        return edge_index.new_zeros((2, 0))
    both = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    key = torch.unique(both[0] * num_nodes + both[1])  # sorted
    return torch.stack([key // num_nodes, key % num_nodes])


@dataclass
class GraphDataset:
    """Every graph of a graph-classification dataset, in one block (see the module docstring)."""

    name: str
    """Dataset name (e.g. ``PTC_MR``)."""
    x: Tensor
    """``[n, F]`` float node features of all graphs."""
    edge_index: Tensor
    """``[2, E]`` long global node ids, both directions, grouped by graph (sorted by source node)."""
    node_ptr: Tensor
    """``[G + 1]`` long: graph ``g`` owns nodes ``node_ptr[g]:node_ptr[g+1]``."""
    edge_ptr: Tensor
    """``[G + 1]`` long: graph ``g`` owns edge columns ``edge_ptr[g]:edge_ptr[g+1]``."""
    labels: Tensor
    """``[G]`` long class index ``0..C-1`` (used only by the evaluation readout)."""
    label_values: list[int] = field(default_factory=list)
    """Original label of each class index (e.g. ``[-1, 1]`` for PTC_MR)."""
    features: str = ""
    """How ``x`` was built (e.g. ``node_labels(18)``, ``constant``)."""

    @classmethod
    def from_edges(cls, name: str, x: Tensor, edge_index: Tensor, node_graph: Tensor, labels: Tensor,
                   label_values: list[int] | None = None, features: str = "") -> GraphDataset:
        """Build from global ``edge_index`` (any order, either direction) and a non-decreasing ``node_graph [n]``.

        Edges are made undirected, deduplicated and grouped by graph. Edges must not cross graphs (the TU
        loader checks this before calling).
        """
        n, num_graphs = int(x.shape[0]), int(labels.numel())
        edges = coalesce_undirected(edge_index.long(), n)
        counts_n = torch.bincount(node_graph, minlength=num_graphs)
        counts_e = torch.bincount(node_graph[edges[0]], minlength=num_graphs)
        zero = torch.zeros(1, dtype=torch.long)
        return cls(name, x.float(), edges, torch.cat([zero, counts_n.cumsum(0)]), torch.cat([zero, counts_e.cumsum(0)]),
                   labels.long(), list(label_values or range(int(labels.max()) + 1)), features)

    def __len__(self) -> int:
        return int(self.labels.numel())

    @property
    def num_classes(self) -> int:
        """``C``, the number of classes."""
        return max(len(self.label_values), int(self.labels.max()) + 1 if len(self) else 0)

    @property
    def num_features(self) -> int:
        """``F``, the node feature size."""
        return int(self.x.shape[1])

    def batch(self, idx: Tensor) -> GraphBatch:
        """The graphs ``idx`` (``[k]`` long) as one :class:`GraphBatch`, in that order."""
        idx = idx.long().cpu()
        start_n, count_n = self.node_ptr[idx], self.node_ptr[idx + 1] - self.node_ptr[idx]
        start_e, count_e = self.edge_ptr[idx], self.edge_ptr[idx + 1] - self.edge_ptr[idx]
        new_start = torch.cat([count_n.new_zeros(1), count_n.cumsum(0)[:-1]])              # [k]
        nodes = ranges(start_n, count_n)                                                    # [n_b]
        cols = ranges(start_e, count_e)                                                     # [E_b]
        shift = (new_start - start_n)[segment_ids(count_e)]                                 # [E_b]
        return GraphBatch(self.x[nodes], self.edge_index[:, cols] + shift, segment_ids(count_n), int(idx.numel()))

    def stats(self) -> dict[str, float | int | str]:
        """Summary numbers for ``summary.json``: graphs, classes, features, mean nodes/edges per graph."""
        g = max(1, len(self))
        return {"name": self.name, "graphs": len(self), "classes": self.num_classes, "node_features": self.num_features,
                "features": self.features, "mean_nodes": round(int(self.node_ptr[-1]) / g, 2),
                "mean_undirected_edges": round(int(self.edge_ptr[-1]) / 2 / g, 2),
                "class_counts": torch.bincount(self.labels, minlength=self.num_classes).tolist()}
