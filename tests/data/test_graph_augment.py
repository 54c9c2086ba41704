"""GraphCL augmentations checked against their definitions (You et al. 2020 §3.1, docs/graph.md).

Every node carries its original global id + 1 as feature 0, so the nodes a view keeps can be read back from its
features; the checks are properties of the definitions (counts, induced edges, ratios, coverage, seeding), never
the indices one seed happens to draw.
"""

from __future__ import annotations

import math

import pytest
import torch

from contrastlab.data.graph_augment import (
    GraphAugmentSpec,
    augment,
    drop_nodes,
    mask_attributes,
    perturb_edges,
    subgraph,
)
from contrastlab.data.graphs import GraphBatch, GraphDataset
from contrastlab.platform.errors import ConfigError


def batch_of(graphs: list[tuple[int, list[tuple[int, int]]]]) -> GraphBatch:
    """A batch from ``(num_nodes, local undirected edges)`` per graph; feature 0 = global id + 1, feature 1 = 7."""
    edges, offset, sizes = [], 0, []
    for n, local in graphs:
        edges += [(offset + a, offset + b) for a, b in local]
        offset += n
        sizes.append(n)
    x = torch.stack([torch.arange(offset, dtype=torch.float) + 1, torch.full((offset,), 7.0)], dim=1)
    e = torch.tensor(edges, dtype=torch.long).T if edges else torch.zeros((2, 0), dtype=torch.long)
    data = GraphDataset.from_edges("T", x, e, torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes)),
                                   torch.zeros(len(sizes), dtype=torch.long))
    return data.batch(torch.arange(len(sizes)))


def cycle(n: int) -> tuple[int, list[tuple[int, int]]]:
    return n, [(i, (i + 1) % n) for i in range(n)]


def path(n: int) -> tuple[int, list[tuple[int, int]]]:
    return n, [(i, i + 1) for i in range(n - 1)]


def edge_set(b: GraphBatch) -> set[tuple[int, int]]:
    """Directed edges of ``b`` as pairs of original global ids (read from feature 0)."""
    ids = b.x[:, 0].long() - 1
    return {(int(ids[s]), int(ids[d])) for s, d in b.edge_index.T.tolist()}


def kept_ids(b: GraphBatch) -> list[int]:
    return (b.x[:, 0].long() - 1).tolist()


def check_induced(orig: GraphBatch, out: GraphBatch) -> None:
    """``out`` is the subgraph of ``orig`` induced by the nodes it keeps (features, graph ids and edges)."""
    ids = torch.tensor(kept_ids(out), dtype=torch.long)
    assert torch.equal(out.x, orig.x[ids]) and torch.equal(out.batch, orig.batch[ids])
    assert ids.tolist() == sorted(set(ids.tolist()))                     # node order kept, no duplicates
    keep = set(ids.tolist())
    induced = {(a, b) for a, b in edge_set(orig) if a in keep and b in keep}
    assert edge_set(out) == induced and out.edge_index.shape[1] == len(induced)
    assert out.num_graphs == orig.num_graphs


def removed(n: int, r: float) -> int:
    return math.floor(n * r)


def test_drop_nodes_keeps_n_minus_floor_nr_nodes_and_exactly_their_edges() -> None:
    graphs = [cycle(10), cycle(7), path(5), cycle(3), (1, []), cycle(12)]
    b = batch_of(graphs)
    ratio = torch.tensor([0.25, 0.5, 0.39, 0.99, 0.5, 0.0])
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        out = drop_nodes(b, ratio, g)
        expect = [max(1, n - removed(n, float(r))) for (n, _), r in zip(graphs, ratio, strict=True)]
        assert out.node_counts().tolist() == expect                       # ⌊n·r⌋ dropped, at least one kept
        check_induced(b, out)


def test_a_ratio_of_one_still_keeps_one_node_per_graph() -> None:
    """drop_nodes "never all of them", subgraph "never fewer than one" (their docstrings), even at ratio 1."""
    b = batch_of([cycle(4), (1, []), path(3)])
    for fn in (drop_nodes, subgraph):
        out = fn(b, torch.ones(3), torch.Generator().manual_seed(0))
        assert out.node_counts().tolist() == [1, 1, 1] and out.edge_index.shape[1] == 0
        check_induced(b, out)


def test_drop_nodes_draws_every_node_and_about_the_ratio() -> None:
    b = batch_of([cycle(10)] * 40)
    g = torch.Generator().manual_seed(1)
    dropped = torch.zeros(b.num_nodes)
    for _ in range(50):
        out = drop_nodes(b, torch.full((40,), 0.3), g)
        mask = torch.ones(b.num_nodes, dtype=torch.bool)
        mask[kept_ids(out)] = False
        dropped += mask.float()
    freq = dropped / 50                                                   # each node: dropped with prob 3/10
    assert freq.min() > 0 and abs(freq.mean().item() - 0.3) < 1e-6
    per_position = freq.view(40, 10).mean(0)                              # no position of a graph is favoured
    assert ((per_position - 0.3).abs() < 0.1).all()


def test_mask_attributes_zeroes_floor_nr_whole_rows_and_leaves_the_rest() -> None:
    graphs = [cycle(10), cycle(7), path(5), (1, []), cycle(9)]
    b = batch_of(graphs)
    ratio = torch.tensor([0.25, 0.5, 0.39, 0.9, 0.0])
    g = torch.Generator().manual_seed(2)
    seen = torch.zeros(b.num_nodes, dtype=torch.bool)
    for _ in range(30):
        out = mask_attributes(b, ratio, g)
        zero = (out.x == 0).all(1)
        assert ((out.x == 0).any(1) == zero).all()                        # a masked node loses every feature
        assert torch.equal(out.x[~zero], b.x[~zero])                      # the others are untouched
        expect = [removed(n, float(r)) for (n, _), r in zip(graphs, ratio, strict=True)]
        assert torch.bincount(b.batch[zero], minlength=5).tolist() == expect
        assert torch.equal(out.edge_index, b.edge_index) and torch.equal(out.batch, b.batch)
        seen |= zero
    assert seen[:22].all()                                                # every node of the first three graphs


def test_perturb_edges_drops_and_adds_floor_er_edges_per_graph() -> None:
    graphs = [cycle(40), path(30), cycle(25), cycle(3), (2, [(0, 1)]), (1, [])]
    b = batch_of(graphs)
    ratio = torch.tensor([0.2, 0.3, 0.5, 0.9, 0.9, 0.9])
    m = [removed(len(e), float(r)) for (_, e), r in zip(graphs, ratio, strict=True)]
    orig = {(a, c) for a, c in edge_set(b) if a < c}
    graph_of = b.batch.tolist()
    g = torch.Generator().manual_seed(3)
    most_lost, most_new = [0] * 6, [0] * 6
    for _ in range(60):
        out = perturb_edges(b, ratio, g)
        assert torch.equal(out.x, b.x) and torch.equal(out.batch, b.batch)
        both = edge_set(out)
        assert all((c, a) in both for a, c in both) and all(a != c for a, c in both)   # undirected, no self-loop
        und = {(a, c) for a, c in both if a < c}
        assert len(both) == 2 * len(und) == out.edge_index.shape[1]
        assert all(graph_of[a] == graph_of[c] for a, c in und)
        for k in range(6):
            lost = sum(1 for a, c in orig - und if graph_of[a] == k)
            new = sum(1 for a, c in und - orig if graph_of[a] == k)
            assert lost <= m[k] and new <= m[k]                           # a new pair may hit a dropped edge
            most_lost[k], most_new[k] = max(most_lost[k], lost), max(most_new[k], new)
    non_edges = [n * (n - 1) // 2 - len(e) for n, e in graphs]           # a triangle has no pair to add
    assert most_lost == m and most_new == [min(a, c) for a, c in zip(m, non_edges, strict=True)]


def test_perturb_edges_can_drop_every_edge_and_add_every_pair() -> None:
    b = batch_of([path(5)] * 20)
    orig = edge_set(b)
    g = torch.Generator().manual_seed(4)
    dropped, added = set(), set()
    for _ in range(40):
        both = edge_set(perturb_edges(b, torch.full((20,), 0.5), g))
        dropped |= orig - both
        added |= both - orig
    assert dropped == orig                                                # every edge is dropped sometimes
    pairs = {(a, c) for k in range(20) for a in range(5 * k, 5 * k + 5) for c in range(5 * k, 5 * k + 5) if a != c}
    assert added == pairs - orig                                          # and every non-edge pair added


def test_subgraph_keeps_exactly_the_induced_edges_of_its_region() -> None:
    graphs = [cycle(10), path(20), (6, [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5)]), (1, []), cycle(70)]
    b = batch_of(graphs)
    ratio = torch.tensor([0.3, 0.5, 0.2, 0.5, 0.4])
    g = torch.Generator().manual_seed(5)
    seeds = set()
    for _ in range(30):
        out = subgraph(b, ratio, g)
        check_induced(b, out)
        expect = [max(1, n - removed(n, float(r))) for (n, _), r in zip(graphs, ratio, strict=True)]
        assert out.node_counts().tolist() == expect
        seeds |= set(kept_ids(out)[:10])
    assert seeds >= set(range(10))                                        # the region starts anywhere


def test_augment_gives_every_graph_one_method_of_the_pool() -> None:
    graphs = [cycle(10)] * 200
    b = batch_of(graphs)
    spec = GraphAugmentSpec(methods=("drop_nodes", "identity"), drop_nodes=0.3)
    out = augment(b, spec, torch.Generator().manual_seed(6))
    counts = out.node_counts()
    assert set(counts.tolist()) == {7, 10}                                # dropped ⌊10·0.3⌋ nodes, or unchanged
    assert 70 <= int((counts == 7).sum()) <= 130                          # chosen uniformly: about half
    for name, ratio in (("perturb_edges", 0.3), ("mask_attributes", 0.3), ("drop_nodes", 0.3), ("subgraph", 0.3)):
        only = augment(b, GraphAugmentSpec(methods=(name,), **{name: ratio}), torch.Generator().manual_seed(7))
        if name == "perturb_edges":
            lost = {(a, c) for a, c in edge_set(b) if a < c} - edge_set(only)
            per_graph = torch.bincount(b.batch[torch.tensor([a for a, _ in lost])], minlength=200)
            assert (per_graph >= 1).float().mean() > 0.9                  # every graph perturbed (⌊10·0.3⌋ = 3)
        elif name == "mask_attributes":
            zero = (only.x == 0).all(1)
            assert torch.bincount(b.batch[zero], minlength=200).tolist() == [3] * 200
        else:
            assert only.node_counts().tolist() == [7] * 200
            check_induced(b, only)


def test_spec_defaults_and_ratio_bounds() -> None:
    spec = GraphAugmentSpec()
    assert spec.methods == ("drop_nodes", "perturb_edges", "mask_attributes")
    assert (spec.drop_nodes, spec.perturb_edges, spec.mask_attributes, spec.subgraph) == (0.2, 0.2, 0.2, 0.2)
    GraphAugmentSpec(drop_nodes=0.0, subgraph=0.999)                      # [0, 1) accepted
    for name, bad in (("drop_nodes", 1.0), ("subgraph", -0.01), ("mask_attributes", 1.5), ("perturb_edges", -1.0)):
        with pytest.raises(ConfigError, match=rf"augment.{name}=.* out of range; valid range: \[0, 1\)"):
            GraphAugmentSpec(**{name: bad})
    with pytest.raises(ConfigError, match="unknown graph augmentation"):
        GraphAugmentSpec(methods=())
    with pytest.raises(ConfigError, match="unknown graph augmentation 'walk'"):
        GraphAugmentSpec(methods=("drop_nodes", "walk"))


def complete(n: int) -> tuple[int, list[tuple[int, int]]]:
    return n, [(a, c) for a in range(n) for c in range(a + 1, n)]


def test_subgraph_grows_one_neighbour_per_round_up_to_32_kept_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/graph.md: one node per round for up to 32 kept nodes, ⌈kept/32⌉ per round above (one draw per round)."""
    real_rand, calls = torch.rand, []

    def counting_rand(*args, **kwargs):
        calls.append(1)
        return real_rand(*args, **kwargs)

    monkeypatch.setattr(torch, "rand", counting_rand)
    # a complete graph always has every outside node on the frontier, so the rounds are ⌈(kept − 1)/per_round⌉
    for n, r, kept, rounds in ((40, 0.2, 32, 31), (66, 0.5, 33, 16), (70, 0.09, 64, 32), (70, 0.5, 35, 17)):
        calls.clear()
        out = subgraph(batch_of([complete(n)]), torch.tensor([r]), torch.Generator().manual_seed(0))
        assert out.num_nodes == kept and len(calls) == 1 + rounds         # one draw for the seed, one per round


def test_perturb_edges_at_ratio_zero_changes_nothing_even_a_self_loop() -> None:
    b = batch_of([(3, [(0, 1), (1, 2), (2, 2)]), cycle(4)])               # a self-loop counts as an edge
    out = perturb_edges(b, torch.zeros(2), torch.Generator().manual_seed(0))
    assert edge_set(out) == edge_set(b) and (2, 2) in edge_set(out)


def components(b: GraphBatch) -> list[int]:
    """Component label (smallest member) of every node of ``b`` (union–find on its edges)."""
    parent = list(range(b.num_nodes))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for a, c in b.edge_index.T.tolist():
        parent[max(find(a), find(c))] = min(find(a), find(c))
    return [find(i) for i in range(b.num_nodes)]


def test_subgraph_jumps_one_node_and_grows_from_it_when_a_component_is_used_up() -> None:
    """Growth adds frontier nodes only, and a jump (empty frontier) adds one node: so every component of the graph
    is kept connected, and at most one component is kept in part (here 2 nodes per round: 49 of 70 kept)."""
    graph = (70, [(3 * t + a, 3 * t + c) for t in range(10) for a, c in ((0, 1), (1, 2), (0, 2))]
             + [(i, i + 1) for i in range(30, 69)])                      # 10 triangles and a path of 40 nodes
    b = batch_of([graph] * 10)
    comp = components(b)
    g = torch.Generator().manual_seed(8)
    for _ in range(5):
        out = subgraph(b, torch.full((10,), 0.3), g)
        ids = kept_ids(out)
        assert out.node_counts().tolist() == [49] * 10
        out_comp = components(out)
        for k in range(10):
            nodes = [i for i, node in enumerate(ids) if 70 * k <= node < 70 * (k + 1)]
            touched = {comp[ids[i]] for i in nodes}
            assert len({out_comp[i] for i in nodes}) == len(touched)   # each component's part connected
            partial = [c for c in touched if sum(1 for i in nodes if comp[ids[i]] == c) < comp.count(c)]
            assert len(partial) <= 1


def test_perturb_edges_adds_every_pair_of_distinct_nodes_equally_often() -> None:
    """Added pairs are uniform over the n(n−1)/2 pairs: pairs of neighbouring local ids are not favoured or
    neglected (a matching 0–3, 1–4, 2–5 leaves the pairs at id distance 1 and 2 free to be added)."""
    b = batch_of([(6, [(0, 3), (1, 4), (2, 5)])] * 200)
    g = torch.Generator().manual_seed(9)
    by_distance = {1: 0, 2: 0}
    for _ in range(20):
        for a, c in edge_set(perturb_edges(b, torch.full((200,), 0.9), g)):
            d = min((c - a) % 6, (a - c) % 6)                             # cyclic distance of local ids
            if a < c and d in by_distance:
                by_distance[d] += 1
    assert 0.85 < by_distance[1] / by_distance[2] < 1.15                   # six pairs each, equally likely
