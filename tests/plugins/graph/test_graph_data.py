"""The TU loader (folders, archives, node labels/attributes, every malformed input) and the synthetic generator."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest
import torch

from contrastlab.data.synthetic_graphs import write_synthetic_tu
from contrastlab.data.tu import load_tu
from contrastlab.platform.errors import ConfigError, DataMissingError

# Two graphs: a triangle (nodes 1-3, class label -1) and a path 4-5 (class label 1); edges listed both ways.
TOY = {
    "A": "1, 2\n2, 1\n2, 3\n3, 2\n1, 3\n3, 1\n4, 5\n5, 4\n",
    "graph_indicator": "1\n1\n1\n2\n2\n",
    "graph_labels": "-1\n1\n",
    "node_labels": "0\n2\n0\n2\n2\n",
    "node_attributes": "0.5, 1.0\n1.5, 2.0\n2.5, 3.0\n3.5, 4.0\n4.5, 5.0\n",
}


def write_toy(folder: Path, name: str = "TOY", **changes: str | None) -> Path:
    """``folder/NAME_*.txt`` from TOY with some files replaced (or removed with None)."""
    folder.mkdir(parents=True, exist_ok=True)
    for suffix, text in {**TOY, **changes}.items():
        if text is not None:
            (folder / f"{name}_{suffix}.txt").write_text(text)
    return folder


def test_folder_with_node_labels_and_attributes(tmp_path: Path) -> None:
    data = load_tu("TOY", write_toy(tmp_path / "TOY"))                  # ROOT/NAME/NAME_*.txt
    assert len(data) == 2 and data.num_classes == 2 and data.label_values == [-1, 1]
    assert data.labels.tolist() == [0, 1]
    assert data.num_features == 2 + 2 and data.features == "node_labels(2)+node_attributes(2)"
    assert data.x[:, :2].tolist() == [[1, 0], [0, 1], [1, 0], [0, 1], [0, 1]]   # labels {0, 2} → one-hot of rank
    assert data.x[4, 2:].tolist() == [4.5, 5.0]
    assert data.node_ptr.tolist() == [0, 3, 5] and data.edge_ptr.tolist() == [0, 6, 8]
    b = data.batch(torch.tensor([1, 0]))                                 # a path then a triangle, local ids
    assert b.batch.tolist() == [0, 0, 1, 1, 1]
    assert sorted(map(tuple, b.edge_index.T.tolist()))[:2] == [(0, 1), (1, 0)]
    assert b.edge_index.max() == 4 and b.edge_index.shape[1] == 8


def test_nodes_listed_out_of_graph_order_are_regrouped(tmp_path: Path) -> None:
    # node 4 (of graph 2) comes first; node 1..3 form the triangle of graph 1
    data = load_tu("TOY", write_toy(tmp_path, graph_indicator="2\n1\n1\n1\n2\n", node_attributes=None,
                                    A="2, 3\n3, 4\n2, 4\n1, 5\n"))
    assert data.node_ptr.tolist() == [0, 3, 5] and data.edge_ptr.tolist() == [0, 6, 8]
    assert data.x[3:].tolist() == [[1, 0], [0, 1]]                        # node 1 (label 0) then node 5 (label 2)


def test_feature_modes(tmp_path: Path) -> None:
    root = write_toy(tmp_path, node_labels=None, node_attributes=None)   # ROOT/NAME_*.txt, no node files
    assert load_tu("TOY", root).features == "constant"
    degree = load_tu("TOY", root, "degree")
    assert degree.x.argmax(1).tolist() == [2, 2, 2, 1, 1]
    with pytest.raises(ConfigError, match=r"node_features=labels but TOY has no TOY_node_labels\.txt"):
        load_tu("TOY", root, "labels")


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_archives_are_read_without_extracting(tmp_path: Path, kind: str) -> None:
    src = write_toy(tmp_path / "src" / "TOY")
    archive = tmp_path / "data" / f"TOY.{kind}"
    archive.parent.mkdir()
    if kind == "zip":
        with zipfile.ZipFile(archive, "w") as zf:
            for f in src.iterdir():
                zf.write(f, f"TOY/{f.name}")
    else:
        with tarfile.open(archive, "w:gz") as tf:
            tf.add(src, arcname="TOY")
    from_root = load_tu("TOY", archive.parent)                           # ROOT/NAME.zip
    from_file = load_tu("TOY", archive)                                  # ROOT is the archive itself
    assert torch.equal(from_root.x, load_tu("TOY", src).x) and torch.equal(from_file.edge_index, from_root.edge_index)


MALFORMED = [
    ({"A": "1, 2\n2, x\n"}, "TOY_A.txt line 2: 'x' is not an integer"),
    ({"A": "1, 2\n2\n"}, r"TOY_A.txt line 2: expected 2 value\(s\)"),
    ({"A": "1, 2\n2, 9\n"}, "node id out of range in .*TOY_A.txt line 2"),
    ({"A": "0, 1\n"}, "node id out of range in .*TOY_A.txt line 1"),
    ({"A": "3, 4\n"}, "edge between two graphs in .*TOY_A.txt line 1"),
    ({"graph_indicator": ""}, "empty dataset"),
    ({"graph_indicator": "1\n1\n1\n3\n3\n"}, "graph 2 has no nodes"),
    ({"graph_indicator": "1\n1\n0\n2\n2\n"}, "graph id out of range .* line 3"),
    ({"graph_labels": "1\n"}, "has 1 rows but .* defines 2 graphs"),
    ({"node_labels": "0\n1\n"}, "TOY_node_labels.txt has 2 rows but the dataset has 5 nodes"),
    ({"node_attributes": "1, 2\n1\n1, 2\n1, 2\n1, 2\n"}, "node_attributes.txt line 2"),
    ({"node_attributes": "1, 2\n1, nan\n1, 2\n1, 2\n1, 2\n"}, "node_attributes.txt line 2: non-finite"),
    ({"graph_labels": None}, "has no TOY_graph_labels.txt"),
]


@pytest.mark.parametrize(("changes", "message"), MALFORMED)
def test_malformed_input_is_one_line(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(DataMissingError, match=message) as info:
        load_tu("TOY", write_toy(tmp_path, **changes))
    assert "\n" not in str(info.value)


def test_missing_and_corrupt_data_say_where_to_put_files(tmp_path: Path) -> None:
    with pytest.raises(DataMissingError, match=r"TU dataset PTC_MR not found in .*put PTC_MR.zip .*chrsmrrs"):
        load_tu("PTC_MR", tmp_path)
    (tmp_path / "PTC_MR.zip").write_bytes(b"not a zip")
    with pytest.raises(DataMissingError, match="corrupt archive"):
        load_tu("PTC_MR", tmp_path)


def test_synthetic_dataset_is_deterministic_balanced_and_loadable(tmp_path: Path) -> None:
    a = load_tu("S", write_synthetic_tu(tmp_path / "a", "S", num_graphs=30, seed=3, node_labels=4))
    b = load_tu("S", write_synthetic_tu(tmp_path / "b", "S", num_graphs=30, seed=3, node_labels=4))
    c = load_tu("S", write_synthetic_tu(tmp_path / "c", "S", num_graphs=30, seed=4, node_labels=4))
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert not torch.equal(a.edge_index, c.edge_index)
    assert a.stats()["class_counts"] == [10, 10, 10] and a.num_features == 4
    dense = [int(a.edge_ptr[g + 1] - a.edge_ptr[g]) / int(a.node_ptr[g + 1] - a.node_ptr[g]) for g in range(30)]
    assert sum(dense[1::3]) / 10 > sum(dense[0::3]) / 10                  # cliques are denser than rings


def test_isolated_nodes_an_edgeless_graph_and_one_hot_degrees(tmp_path: Path) -> None:
    """Graph 1: path 1-2-3, a self-loop on 3, isolated node 4; graph 2: two nodes and no edge (1-based ids)."""
    files = {"A": "1, 2\n2, 1\n2, 3\n3, 3\n", "graph_indicator": "1\n1\n1\n1\n2\n2\n", "graph_labels": "3\n5\n"}
    for suffix, text in files.items():
        (tmp_path / f"T_{suffix}.txt").write_text(text)
    data = load_tu("T", tmp_path, "degree")
    assert data.node_ptr.tolist() == [0, 4, 6] and data.edge_ptr.tolist() == [0, 5, 5]
    assert data.labels.tolist() == [0, 1] and data.label_values == [3, 5]
    # 2-3 given one way is made undirected; the self-loop is kept once; degrees ignore it and count 2-3 once
    assert data.edge_index.T.tolist() == [[0, 1], [1, 0], [1, 2], [2, 1], [2, 2]]
    assert data.x.shape == (6, 33) and data.x.argmax(1).tolist() == [1, 2, 1, 0, 0, 0]
    assert (data.x.sum(1) == 1).all()
    b = data.batch(torch.tensor([1, 0]))                                  # the edgeless graph first
    assert b.batch.tolist() == [0, 0, 1, 1, 1, 1] and b.edge_index.min() == 2
