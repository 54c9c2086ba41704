"""A small generated graph-classification dataset in the TU text format (for tests and the ``smoke`` preset).

Three classes of graphs with different structure, each a few *motifs* joined into one connected graph:

* class 1, ``rings``: cycles of 5–8 nodes (every motif node has degree 2);
* class 2, ``cliques``: complete graphs of 4–5 nodes;
* class 3, ``trees``: random recursive trees of 5–8 nodes (leaves and hubs).

Consecutive motifs are joined by one bridge edge. Then a fraction ``noise`` of the edges is rewired (removed and
replaced by as many random node pairs of the same graph), so no class is recognisable from one edge, and
``node_labels`` random node types (independent of the class: nuisance features) are written as
``NAME_node_labels.txt``. The output is a deterministic function of the arguments (``seed`` included).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from contrastlab.platform.errors import ConfigError

CLASSES = ("rings", "cliques", "trees")
"""Structure of each class, in label order (graph labels 1, 2, 3 in the files)."""


def _motif(kind: str, rng: np.random.Generator) -> tuple[int, list[tuple[int, int]]]:
    """``(nodes, edges)`` of one motif with local node ids."""
    if kind == "rings":
        k = int(rng.integers(5, 9))
        return k, [(i, (i + 1) % k) for i in range(k)]
    if kind == "cliques":
        k = int(rng.integers(4, 6))
        return k, [(i, j) for i in range(k) for j in range(i + 1, k)]
    k = int(rng.integers(5, 9))
    return k, [(int(rng.integers(0, i)), i) for i in range(1, k)]


def make_graph(label: int, rng: np.random.Generator, motifs: tuple[int, int], noise: float) -> tuple[int, np.ndarray]:
    """One graph of class ``label`` (0-based): ``(nodes, undirected edges [E, 2])`` with local 0-based ids."""
    kind = CLASSES[label]
    nodes, edges = 0, []
    for m in range(int(rng.integers(motifs[0], motifs[1] + 1))):
        k, local = _motif(kind, rng)
        edges += [(a + nodes, b + nodes) for a, b in local]
        if m > 0:                                                   # bridge to a random node of the previous motifs
            edges.append((int(rng.integers(0, nodes)), nodes + int(rng.integers(0, k))))
        nodes += k
    arr = np.array(edges, dtype=np.int64)
    swaps = round(noise * len(arr))
    if swaps:
        keep = rng.permutation(len(arr))[swaps:]
        extra = rng.integers(0, nodes, size=(swaps, 2))
        extra = extra[extra[:, 0] != extra[:, 1]]
        arr = np.concatenate([arr[np.sort(keep)], extra])
    return nodes, arr


def write_synthetic_tu(folder: str | Path, name: str = "SYNTH", num_graphs: int = 300, seed: int = 0,
                       noise: float = 0.25, motifs: tuple[int, int] = (2, 4), node_labels: int = 3,
                       node_attributes: int = 0) -> Path:
    """Write ``folder/NAME/NAME_*.txt`` (TU format) with ``num_graphs`` graphs, classes balanced in turn.

    Args:
        noise: fraction of each graph's edges that are rewired at random, in ``[0, 1]``.
        motifs: inclusive range of the number of motifs per graph.
        node_labels: number of random node types written to ``NAME_node_labels.txt`` (0: no file).
        node_attributes: width of random Gaussian ``NAME_node_attributes.txt`` rows (0: no file).

    Returns the dataset folder ``folder/NAME``.
    """
    if num_graphs < len(CLASSES) or not 0.0 <= noise <= 1.0 or not 1 <= motifs[0] <= motifs[1]:
        raise ConfigError(f"synthetic graphs: need num_graphs >= {len(CLASSES)}, 0 <= noise <= 1 and "
                          f"1 <= motifs[0] <= motifs[1] (got {num_graphs}, {noise}, {motifs})")
    rng = np.random.default_rng(seed)
    out = Path(folder) / name
    out.mkdir(parents=True, exist_ok=True)
    a_rows, indicator, labels = [], [], []
    offset = 0
    for g in range(num_graphs):
        label = g % len(CLASSES)
        n, edges = make_graph(label, rng, motifs, noise)
        for i, j in edges + offset + 1:                             # 1-based, both directions as in TU files
            a_rows += [f"{i}, {j}", f"{j}, {i}"]
        indicator += [str(g + 1)] * n
        labels.append(str(label + 1))
        offset += n
    (out / f"{name}_A.txt").write_text("\n".join(a_rows) + "\n")
    (out / f"{name}_graph_indicator.txt").write_text("\n".join(indicator) + "\n")
    (out / f"{name}_graph_labels.txt").write_text("\n".join(labels) + "\n")
    if node_labels > 0:
        types = rng.integers(0, node_labels, size=offset)
        (out / f"{name}_node_labels.txt").write_text("\n".join(map(str, types)) + "\n")
    if node_attributes > 0:
        attrs = rng.normal(size=(offset, node_attributes))
        (out / f"{name}_node_attributes.txt").write_text(
            "\n".join(", ".join(f"{v:.5f}" for v in row) for row in attrs) + "\n")
    return out
