"""STL-10 (Coates et al. 2011) from the standard binary archive ``stl10_binary.tar.gz``.

Files (in ``stl10_binary/``): ``train_X.bin``/``train_y.bin`` (5,000 labeled), ``test_X.bin``/``test_y.bin``
(8,000), ``unlabeled_X.bin`` (100,000), ``class_names.txt``. Images are ``uint8`` 3×96×96 stored column-major
(each channel plane transposed); labels are ``uint8`` in 1..10. Unlabeled images get label ``-1``.

Splits: ``train``, ``test``, ``unlabeled`` and ``train+unlabeled`` (the 105k SimCLR training set of DCL/BCL).
Accepted layouts: the extracted ``stl10_binary/`` folder or the archive itself, under ``root`` or the cache.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import torch

from contrastlab.data.base import ImageDataset, cache_dir, corrupt, download, register_dataset
from contrastlab.platform.errors import DataMissingError

URL = "http://ai.stanford.edu/~acoates/stl10/stl10_binary.tar.gz"
"""Standard download location."""
ARCHIVE = "stl10_binary.tar.gz"
FOLDER = "stl10_binary"
CLASS_NAMES = ["airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck"]
HOW = f"download {URL} (or extract it to {FOLDER}/) into a directory and pass --set data.root=DIR"
_PIXELS = 3 * 96 * 96


def _parts(split: str) -> list[tuple[str, str | None]]:
    table = {"train": [("train_X.bin", "train_y.bin")], "test": [("test_X.bin", "test_y.bin")],
             "unlabeled": [("unlabeled_X.bin", None)]}
    table["train+unlabeled"] = table["train"] + table["unlabeled"]
    return table[split]


def _decode_images(raw: bytes, where: Path) -> np.ndarray:
    if len(raw) % _PIXELS:
        raise corrupt(where, f"size {len(raw)} is not a multiple of 3*96*96", HOW)
    # stored as [n, 3, 96(w), 96(h)] (column-major planes) -> [n, 3, h, w]
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3, 96, 96).transpose(0, 1, 3, 2)


def _reader(root: Path | None, download_ok: bool):
    """A function ``name -> bytes`` reading from the folder or the archive, whichever is found first."""
    dirs = [root] if root else [cache_dir("stl10")]
    for d in dirs:
        folder = d / FOLDER
        if folder.is_dir():
            def read_folder(name: str, folder: Path = folder) -> tuple[bytes, Path]:
                path = folder / name
                if not path.exists():
                    raise DataMissingError(f"stl10: missing file {path}; {HOW}")
                return path.read_bytes(), path
            return read_folder
        if (d / ARCHIVE).exists():
            return _archive_reader(d / ARCHIVE)
    if root is None and download_ok:
        return _archive_reader(download(URL, cache_dir("stl10") / ARCHIVE))
    where = root or cache_dir("stl10")
    raise DataMissingError(f"stl10: neither {where / ARCHIVE} nor {where / FOLDER}/ found; {HOW}")


def _archive_reader(archive: Path):
    def read(name: str) -> tuple[bytes, Path]:
        try:
            with tarfile.open(archive, "r:*") as tar:
                try:
                    member = tar.getmember(f"{FOLDER}/{name}")
                except KeyError:
                    raise corrupt(archive, f"missing member {FOLDER}/{name}", HOW) from None
                f = tar.extractfile(member)
                assert f is not None
                return f.read(), archive
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise corrupt(archive, f"cannot read the archive ({exc})", HOW) from None
    return read


@register_dataset("stl10", splits=("train", "test", "unlabeled", "train+unlabeled"))
def load_stl10(root: Path | None, split: str, download: bool = True) -> ImageDataset:
    """Load an STL-10 split as ``uint8 [N, 3, 96, 96]``; unlabeled images have label ``-1``."""
    read = _reader(root, download)
    images, labels = [], []
    for x_name, y_name in _parts(split):
        raw, where = read(x_name)
        x = _decode_images(raw, where)
        if y_name is None:
            y = np.full(x.shape[0], -1, dtype=np.int64)
        else:
            raw_y, where_y = read(y_name)
            y = np.frombuffer(raw_y, dtype=np.uint8).astype(np.int64) - 1
            if y.shape[0] != x.shape[0] or (y.size and (y.min() < 0 or y.max() > 9)):
                raise corrupt(where_y, f"{y.shape[0]} labels in 1..10 expected for {x.shape[0]} images", HOW)
        images.append(x)
        labels.append(y)
    return ImageDataset(torch.from_numpy(np.ascontiguousarray(np.concatenate(images))),
                        torch.from_numpy(np.concatenate(labels)), 10, list(CLASS_NAMES), "stl10", split)
