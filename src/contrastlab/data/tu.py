"""Loader of the TU graph-classification text format (TUDataset, Morris et al. 2020), offline only.

A dataset ``NAME`` is a set of text files, each with one row per line and values separated by commas:

* ``NAME_A.txt``: one edge per line, ``i, j`` with 1-based global node ids (required);
* ``NAME_graph_indicator.txt``: for node ``i`` (line ``i``), the 1-based id of its graph (required);
* ``NAME_graph_labels.txt``: the class label of graph ``g`` on line ``g`` (required);
* ``NAME_node_labels.txt``: an integer label per node (optional; one-hot encoded as features);
* ``NAME_node_attributes.txt``: a vector of floats per node (optional).

They are read from a folder (``ROOT/NAME_*.txt`` or ``ROOT/NAME/NAME_*.txt``) or from an archive
(``ROOT/NAME.zip``, ``ROOT/NAME.tar.gz``/``.tgz``/``.tar``, or ``ROOT`` itself being such a file), as distributed at
:data:`TU_PAGE`. Nothing is downloaded. Every problem (missing files, malformed rows, node ids out of range,
edges between graphs, an empty dataset) raises :class:`~contrastlab.platform.errors.DataMissingError` with
one line naming the file and line.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from contrastlab.data.graphs import GraphDataset
from contrastlab.platform.errors import ConfigError, DataMissingError

TU_PAGE = "https://chrsmrrs.github.io/datasets/docs/datasets/"
"""Where users get the TU datasets (the page links ``NAME.zip`` for every dataset)."""
TU_ZIP_URL = "https://www.chrsmrrs.com/graphkerneldatasets/{name}.zip"
"""Direct archive address of one dataset (not fetched by contrastlab: users download it themselves)."""
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
"""Archive kinds the loader reads without extracting."""
DEGREE_CAP = 32
"""``node_features: degree`` one-hot encodes min(degree, DEGREE_CAP)."""

NodeFeatures = Literal["auto", "labels", "attributes", "both", "constant", "degree"]
"""``auto``: node labels (one-hot) and attributes when present, else a constant 1; ``labels``/``attributes``/
``both``: those files (an error when missing); ``constant``: 1 per node; ``degree``: one-hot node degree."""

Reader = Callable[[str], "str | None"]


def how_to_get(name: str, root: Path) -> str:
    """The sentence telling a user where to put dataset ``name``."""
    return (f"put {name}.zip (or the folder {name}/ with {name}_A.txt, {name}_graph_indicator.txt, "
            f"{name}_graph_labels.txt) in {root} or pass --set data.root=DIR; get it from {TU_PAGE} "
            f"({TU_ZIP_URL.format(name=name)})")


def _archive_reader(path: Path, name: str) -> Reader:
    """A reader of the ``NAME_<suffix>.txt`` members of a zip/tar archive (matched by base name, read at once)."""
    prefix = f"{name}_"
    texts: dict[str, str] = {}
    try:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                for member in zf.namelist():
                    base = Path(member).name
                    if base.startswith(prefix) and base.endswith(".txt"):
                        texts[base] = zf.read(member).decode("utf-8", "replace")
        else:
            with tarfile.open(path) as tf:
                for info in tf.getmembers():
                    base = Path(info.name).name
                    handle = tf.extractfile(info) if info.isfile() and base.startswith(prefix) else None
                    if handle is not None and base.endswith(".txt"):
                        texts[base] = handle.read().decode("utf-8", "replace")
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
        raise DataMissingError(f"corrupt archive {path}: {exc}; replace it with the original {name}.zip "
                               f"from {TU_PAGE}") from None
    return lambda suffix: texts.get(f"{name}_{suffix}.txt")


def _folder_reader(folder: Path, name: str) -> Reader:
    def read(suffix: str) -> str | None:
        path = folder / f"{name}_{suffix}.txt"
        return path.read_text(errors="replace") if path.is_file() else None

    return read


def locate(name: str, root: Path) -> tuple[Path, Reader]:
    """Where dataset ``name`` lives under ``root`` and a reader of its files; missing data raises."""
    if not name or any(ch in name for ch in "/\\") or name in {".", ".."}:
        raise ConfigError(f"data.name must be a TU dataset name such as PTC_MR, got '{name}'")
    if root.is_file():
        if not str(root).endswith(ARCHIVE_SUFFIXES):
            raise DataMissingError(f"{root} is neither a folder nor a .zip/.tar.gz archive; "
                                   f"{how_to_get(name, root.parent)}")
        return root, _archive_reader(root, name)
    if not root.is_dir():
        raise DataMissingError(f"TU dataset folder {root} does not exist; {how_to_get(name, root)}")
    for folder in (root, root / name):
        if (folder / f"{name}_A.txt").is_file():
            return folder, _folder_reader(folder, name)
    for suffix in ARCHIVE_SUFFIXES:
        path = root / f"{name}{suffix}"
        if path.is_file():
            return path, _archive_reader(path, name)
    raise DataMissingError(f"TU dataset {name} not found in {root}; {how_to_get(name, root)}")


def parse_table(text: str, where: str, kind: type = int, width: int | None = None) -> np.ndarray:
    """Rows of comma/space separated numbers → ``[rows, width]`` array; the first bad line raises one line."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    tokens: list[str] = []
    for number, line in enumerate(lines, 1):
        parts = line.replace(",", " ").split()
        width = width if width is not None else len(parts)
        if not parts or len(parts) != width:
            raise DataMissingError(f"malformed row in {where} line {number}: expected {width} value(s), got {line!r}")
        tokens.extend(parts)
    dtype = np.int64 if kind is int else np.float64
    try:
        values = np.array(tokens, dtype=dtype)
    except ValueError:
        for number, line in enumerate(lines, 1):
            for part in line.replace(",", " ").split():
                try:
                    kind(part)
                except ValueError:
                    what = "an integer" if kind is int else "a number"
                    raise DataMissingError(f"malformed row in {where} line {number}: {part!r} is not {what}") from None
        raise
    if kind is float and not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0]) // max(1, width or 1) + 1
        raise DataMissingError(f"malformed row in {where} line {bad}: non-finite value")
    return values.reshape(len(lines), width or 0)


def _one_hot_columns(table: np.ndarray) -> np.ndarray:
    """One-hot encode each integer column (values mapped to their rank among the column's distinct values)."""
    blocks = []
    for col in table.T:
        _, inverse = np.unique(col, return_inverse=True)
        blocks.append(np.eye(int(inverse.max()) + 1, dtype=np.float32)[inverse])
    return np.concatenate(blocks, axis=1)


def load_tu(name: str, root: str | Path, node_features: NodeFeatures = "auto") -> GraphDataset:
    """Load TU dataset ``name`` from ``root`` (a folder or an archive; see the module docstring)."""
    root = Path(root).expanduser()
    source, read = locate(name, root)
    files = {s: read(s) for s in ("A", "graph_indicator", "graph_labels", "node_labels", "node_attributes")}
    for required in ("A", "graph_indicator", "graph_labels"):
        if files[required] is None:
            raise DataMissingError(f"{source} has no {name}_{required}.txt; {how_to_get(name, root)}")
    where = lambda s: f"{source}:{name}_{s}.txt" if source.is_file() else str(source / f"{name}_{s}.txt")  # noqa: E731
    indicator = parse_table(files["graph_indicator"], where("graph_indicator"), int, 1)[:, 0]  # type: ignore[arg-type]
    n = indicator.size
    if n == 0:
        raise DataMissingError(f"empty dataset: {where('graph_indicator')} lists no nodes")
    if indicator.min() < 1:
        line = int(np.flatnonzero(indicator < 1)[0]) + 1
        raise DataMissingError(f"graph id out of range in {where('graph_indicator')} line {line}: ids start at 1")
    num_graphs = int(indicator.max())
    counts = np.bincount(indicator - 1, minlength=num_graphs)
    if (counts == 0).any():
        raise DataMissingError(f"graph {int(np.flatnonzero(counts == 0)[0]) + 1} has no nodes in "
                               f"{where('graph_indicator')} (graph ids must be 1..{num_graphs} without gaps)")
    graph_labels = parse_table(files["graph_labels"], where("graph_labels"), int, 1)[:, 0]  # type: ignore[arg-type]
    if graph_labels.size != num_graphs:
        raise DataMissingError(f"{where('graph_labels')} has {graph_labels.size} rows but "
                               f"{where('graph_indicator')} defines {num_graphs} graphs")
    values, labels = np.unique(graph_labels, return_inverse=True)
    edges = parse_table(files["A"], where("A"), int, 2) if files["A"].strip() else np.zeros((0, 2), np.int64)  # type: ignore[union-attr]
    bad = np.flatnonzero((edges < 1).any(1) | (edges > n).any(1))
    if bad.size:
        raise DataMissingError(f"node id out of range in {where('A')} line {int(bad[0]) + 1}: "
                               f"{edges[bad[0]].tolist()} (valid: 1..{n})")
    edges = edges - 1
    cross = np.flatnonzero(indicator[edges[:, 0]] != indicator[edges[:, 1]])
    if cross.size:
        raise DataMissingError(f"edge between two graphs in {where('A')} line {int(cross[0]) + 1}: "
                               f"{(edges[cross[0]] + 1).tolist()}")
    x, described = _features(files, where, n, edges, node_features, name)
    order = np.argsort(indicator, kind="stable")                     # TU files list nodes by graph; be lenient
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(n)
    return GraphDataset.from_edges(
        name, torch.from_numpy(x[order]), torch.from_numpy(new_id[edges].T.copy()),
        torch.from_numpy(indicator[order] - 1), torch.from_numpy(labels.astype(np.int64)),
        [int(v) for v in values], described)


def _features(files: dict[str, str | None], where: Callable[[str], str], n: int, edges: np.ndarray,
              mode: NodeFeatures, name: str) -> tuple[np.ndarray, str]:
    """Node feature matrix ``[n, F]`` and its description, following ``mode`` (see :data:`NodeFeatures`)."""
    blocks: list[np.ndarray] = []
    names: list[str] = []
    for kind, fname in (("labels", "node_labels"), ("attributes", "node_attributes")):
        text = files[fname]
        wanted = mode in ("auto", "both") or mode == kind
        if not wanted:
            continue
        if text is None:
            if mode != "auto":
                raise ConfigError(f"data.node_features={mode} but {name} has no {name}_{fname}.txt; use "
                                  "data.node_features=auto, constant or degree")
            continue
        table = parse_table(text, where(fname), int if kind == "labels" else float)
        if table.shape[0] != n:
            raise DataMissingError(f"{where(fname)} has {table.shape[0]} rows but the dataset has {n} nodes")
        block = _one_hot_columns(table) if kind == "labels" else table.astype(np.float32)
        blocks.append(block)
        names.append(f"node_{kind}({block.shape[1]})")
    if mode == "degree":
        pairs = np.unique(np.sort(edges, axis=1), axis=0) if edges.size else np.zeros((0, 2), np.int64)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]                   # undirected, no self-loops, each edge once
        degree = np.bincount(pairs.reshape(-1), minlength=n)
        blocks.append(np.eye(DEGREE_CAP + 1, dtype=np.float32)[np.minimum(degree, DEGREE_CAP).astype(np.int64)])
        names.append(f"degree({DEGREE_CAP + 1})")
    if not blocks:
        return np.ones((n, 1), dtype=np.float32), "constant"
    return np.concatenate(blocks, axis=1).astype(np.float32), "+".join(names)
