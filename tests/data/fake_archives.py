"""Writers of small fake dataset files in the real formats (idx, CIFAR python pickles, STL-10 binary)."""

from __future__ import annotations

import gzip
import io
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np


def write_idx(path: Path, array: np.ndarray) -> None:
    """Gzipped idx file with uint8 data (magic 0x0000080N, big-endian dims)."""
    header = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def write_fashion_mnist(root: Path, n_train: int = 30, n_test: int = 20, seed: int = 0) -> dict:
    """Fake Fashion-MNIST idx files; returns the arrays written."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        y = rng.integers(0, 10, n, dtype=np.uint8)
        write_idx(root / f"{prefix}-images-idx3-ubyte.gz", x)
        write_idx(root / f"{prefix}-labels-idx1-ubyte.gz", y)
        out[split] = (x, y)
    return out


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_cifar(root: Path, hundred: bool = False, per_batch: int = 6, seed: int = 0) -> dict:
    """Fake ``cifar-10-python.tar.gz`` (5 train batches + test) or ``cifar-100-python.tar.gz``."""
    rng = np.random.default_rng(seed)
    folder = "cifar-100-python" if hundred else "cifar-10-batches-py"
    archive = root / ("cifar-100-python.tar.gz" if hundred else "cifar-10-python.tar.gz")
    label_key = b"fine_labels" if hundred else b"labels"
    classes = 100 if hundred else 10
    train_names = ["train"] if hundred else [f"data_batch_{i}" for i in range(1, 6)]
    written = {"train": [], "test": []}
    with tarfile.open(archive, "w:gz") as tar:
        for split, names in (("train", train_names), ("test", ["test"] if hundred else ["test_batch"])):
            for name in names:
                data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
                labels = rng.integers(0, classes, per_batch).tolist()
                _add(tar, f"{folder}/{name}", pickle.dumps({b"data": data, label_key: labels}))
                written[split].append((data, labels))
        meta_name = "meta" if hundred else "batches.meta"
        names_key = b"fine_label_names" if hundred else b"label_names"
        _add(tar, f"{folder}/{meta_name}", pickle.dumps({names_key: [f"c{i}".encode() for i in range(classes)]}))
    return written


def write_stl10(root: Path, n_train: int = 4, n_test: int = 3, n_unlabeled: int = 2, seed: int = 0) -> dict:
    """Fake ``stl10_binary.tar.gz``: images stored column-major as in the real files; labels 1..10."""
    rng = np.random.default_rng(seed)
    out = {}
    with tarfile.open(root / "stl10_binary.tar.gz", "w:gz") as tar:
        for split, n in (("train", n_train), ("test", n_test), ("unlabeled", n_unlabeled)):
            x = rng.integers(0, 256, (n, 3, 96, 96), dtype=np.uint8)        # [n, C, H, W]
            _add(tar, f"stl10_binary/{split}_X.bin", np.ascontiguousarray(x.transpose(0, 1, 3, 2)).tobytes())
            y = rng.integers(1, 11, n, dtype=np.uint8)
            if split != "unlabeled":
                _add(tar, f"stl10_binary/{split}_y.bin", y.tobytes())
            out[split] = (x, y)
    return out
