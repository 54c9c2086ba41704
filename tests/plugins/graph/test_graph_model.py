"""Graph augmentations, the GIN encoder and its readout, the local–global batch, and the SVM readout."""

from __future__ import annotations

import pytest
import torch

import contrastlab as cl
from contrastlab.data.graph_augment import (
    GraphAugmentSpec,
    augment,
    drop_nodes,
    mask_attributes,
    perturb_edges,
    subgraph,
)
from contrastlab.data.graphs import GraphBatch, GraphDataset
from contrastlab.evaluation.svm import cross_validated_accuracy
from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.graph.trainer import local_global_batch
from contrastlab.testing import gaussian_clusters


def cycles(sizes: list[int], features: int = 3) -> GraphBatch:
    """A batch of cycle graphs with random node features."""
    edges, offset = [], 0
    for n in sizes:
        edges += [(offset + i, offset + (i + 1) % n) for i in range(n)]
        offset += n
    e = torch.tensor(edges).T
    data = GraphDataset.from_edges("C", torch.randn(offset, features), e,
                                   torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes)),
                                   torch.zeros(len(sizes), dtype=torch.long))
    return data.batch(torch.arange(len(sizes)))


def undirected_edges_per_graph(b: GraphBatch) -> list[int]:
    src, dst = b.edge_index
    return torch.bincount(b.batch[src[src < dst]], minlength=b.num_graphs).tolist()


def test_each_augmentation_removes_the_configured_ratio() -> None:
    b = cycles([10, 20, 5])
    g = torch.Generator().manual_seed(0)
    ratio = torch.full((3,), 0.2)
    dropped = drop_nodes(b, ratio, g)
    assert dropped.node_counts().tolist() == [8, 16, 4] and dropped.num_graphs == 3
    assert dropped.edge_index.max() < dropped.num_nodes and dropped.x.shape == (28, 3)
    same = (dropped.batch[dropped.edge_index[0]] == dropped.batch[dropped.edge_index[1]]).all()
    assert same                                                           # no edge crosses graphs
    masked = mask_attributes(b, ratio, g)
    zero_rows = (masked.x == 0).all(1)
    assert torch.bincount(b.batch[zero_rows], minlength=3).tolist() == [2, 4, 1]
    perturbed = perturb_edges(b, ratio, g)
    assert perturbed.num_nodes == b.num_nodes
    counts = undirected_edges_per_graph(perturbed)
    assert all(n - 2 * int(n * 0.2) <= c <= n for c, n in zip(counts, [10, 20, 5], strict=True))
    kept = drop_nodes(cycles([3]), torch.tensor([0.99]), g)
    assert kept.num_nodes == 1                                            # a graph never loses every node


def test_edge_perturbation_adds_pairs_of_distinct_nodes_only() -> None:
    """An added self-loop is no edge of the graph, and GIN's sum would count the node's own state twice."""
    b = cycles([3, 4, 5] * 10)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        out = perturb_edges(b, torch.full((30,), 0.9), g)
        src, dst = out.edge_index
        assert not (src == dst).any()
        assert (out.batch[src] == out.batch[dst]).all()                  # added pairs stay inside their graph


def _connected(num_nodes: int, edge_index: torch.Tensor) -> bool:
    """Whether a graph with local node ids 0..num_nodes-1 is connected (plain breadth-first search)."""
    neighbours: dict[int, set[int]] = {i: set() for i in range(num_nodes)}
    for a, b in edge_index.T.tolist():
        neighbours[a].add(b)
    seen, todo = {0}, [0]
    while todo:
        for nxt in neighbours[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return len(seen) == num_nodes


def test_subgraph_keeps_a_connected_region_of_the_configured_size() -> None:
    sizes = [10, 20, 5, 40, 100]
    b = cycles(sizes)
    g = torch.Generator().manual_seed(0)
    for r in (0.2, 0.5, 0.9):
        out = subgraph(b, torch.full((5,), r), g)
        kept = out.node_counts().tolist()
        assert kept == [n - int(n * r) for n in sizes] and out.num_graphs == 5
        ptr = out.node_ptr().tolist()
        for k in range(5):                                               # a path of the cycle: connected
            inside = (out.edge_index[0] >= ptr[k]) & (out.edge_index[0] < ptr[k + 1])
            assert _connected(kept[k], out.edge_index[:, inside] - ptr[k])
            rows = out.x[ptr[k]:ptr[k + 1]]                              # features of nodes of the same graph
            assert all(any(torch.equal(row, orig) for orig in b.x[b.batch == k]) for row in rows)
    whole = subgraph(b, torch.zeros(5), g)                               # ratio 0: the batch unchanged
    assert torch.equal(whole.x, b.x) and torch.equal(whole.edge_index, b.edge_index)


def test_subgraph_jumps_to_another_component_when_its_own_is_used_up() -> None:
    # two triangles, no edge between them: keeping 5 of 6 nodes needs both components
    e = torch.tensor([[0, 1, 0, 3, 4, 3], [1, 2, 2, 4, 5, 5]])
    data = GraphDataset.from_edges("T", torch.arange(6.0)[:, None], e, torch.zeros(6, dtype=torch.long),
                                   torch.zeros(1, dtype=torch.long))
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        out = subgraph(data.batch(torch.arange(1)), torch.tensor([0.2]), g)
        assert out.num_nodes == 5 and out.edge_index.shape[1] == 2 * 4   # a whole triangle and an edge of the other


def test_augment_is_deterministic_under_a_seed_and_keeps_graph_count() -> None:
    b = cycles([8, 9, 10, 11] * 8)
    spec = GraphAugmentSpec()
    v1 = augment(b, spec, torch.Generator().manual_seed(5))
    v2 = augment(b, spec, torch.Generator().manual_seed(5))
    v3 = augment(b, spec, torch.Generator().manual_seed(6))
    assert torch.equal(v1.x, v2.x) and torch.equal(v1.edge_index, v2.edge_index) and v1.num_graphs == 32
    assert not (torch.equal(v1.x, v3.x) and torch.equal(v1.edge_index, v3.edge_index))
    only_sub = augment(b, GraphAugmentSpec(methods=("subgraph",), subgraph=0.5), torch.Generator().manual_seed(0))
    assert only_sub.node_counts().tolist() == [4, 5, 5, 6] * 8                 # n − ⌊n/2⌋ for every graph
    pool = GraphAugmentSpec(methods=("drop_nodes", "perturb_edges", "mask_attributes", "subgraph"))
    w1, w2 = (augment(b, pool, torch.Generator().manual_seed(3)) for _ in range(2))
    assert torch.equal(w1.x, w2.x) and torch.equal(w1.edge_index, w2.edge_index) and w1.num_graphs == 32
    ident = augment(b, GraphAugmentSpec(methods=("identity",)), torch.Generator().manual_seed(0))
    assert torch.equal(ident.x, b.x) and torch.equal(ident.edge_index, b.edge_index)
    with pytest.raises(ConfigError, match="unknown graph augmentation 'random_walk'"):
        GraphAugmentSpec(methods=("random_walk",))


def test_gin_shapes_and_permutation_invariant_readout() -> None:
    torch.manual_seed(0)
    enc = cl.make_encoder("gin", in_dim=3, hidden_dim=16, num_layers=3).eval()
    b = cycles([5, 7])
    h, nodes = enc(b.x, b.edge_index, b.batch, b.num_graphs)
    assert h.shape == (2, 48) and nodes.shape == (12, 48) and enc.out_dim == 48
    perm = torch.cat([torch.randperm(5), 5 + torch.randperm(7)])          # relabel nodes within each graph
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(12)
    h2, _ = enc(b.x[perm], inverse[b.edge_index], b.batch, 2)
    torch.testing.assert_close(h2, h, rtol=1e-5, atol=1e-5)
    swapped = cycles([7, 5])
    assert not torch.allclose(h[0], enc(swapped.x, swapped.edge_index, swapped.batch, 2)[0][0])


def test_local_global_batch_pairs_each_node_with_its_graph() -> None:
    z_nodes, z_graphs = torch.randn(5, 4), torch.randn(3, 4)
    batch = torch.tensor([0, 0, 1, 2, 2])
    cb = local_global_batch(z_nodes, z_graphs, batch, 0.5)
    assert cb.pos_logits.shape == (5, 1) and cb.neg_logits.shape == (5, 3)
    assert cb.num_negatives().tolist() == [2.0] * 5 and not cb.neg_mask[2, 1]
    assert float(cl.make_loss("dcl")(cb)) > 0


def test_svm_readout_on_an_easy_case_and_its_errors() -> None:
    x, y = gaussian_clusters(n=60, dim=8, classes=3, spread=0.2, seed=1)
    r = cross_validated_accuracy(x, y, folds=5, seed=0)
    assert r.mean == pytest.approx(1.0) and r.folds == 5 and len(r.chosen_c) == 5
    noise = cross_validated_accuracy(torch.randn(60, 8), y, readout="logreg", folds=5, c_grid=[1.0])
    assert noise.mean < 0.7
    small = cross_validated_accuracy(x[:9], torch.tensor([0, 1, 2] * 3), folds=10, c_grid=[1.0])
    assert small.folds == 3                                               # folds shrink to the smallest class
    with pytest.raises(ConfigError, match="needs >= 2 classes with >= 2 examples"):
        cross_validated_accuracy(x[:3], torch.tensor([0, 1, 1]))
