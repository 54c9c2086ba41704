"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009) from the standard "python version" archives.

Accepted layouts under ``root`` (or the download cache):
* the archive ``cifar-10-python.tar.gz`` / ``cifar-100-python.tar.gz`` (read without extracting), or
* the extracted folder ``cifar-10-batches-py/`` / ``cifar-100-python/``.

Each batch is a pickled dict with ``b"data"`` (``uint8 [n, 3072]``, row-major R, G, B planes of 32×32) and
``b"labels"`` (CIFAR-10) or ``b"fine_labels"`` (CIFAR-100). Unpickling uses a restricted unpickler that only
builds plain containers and numpy arrays, so a malicious archive cannot run code.
"""

from __future__ import annotations

import io
import pickle
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from contrastlab.data.base import ImageDataset, cache_dir, corrupt, download, register_dataset
from contrastlab.platform.errors import DataMissingError


@dataclass(frozen=True)
class _Spec:
    name: str
    archive: str
    folder: str
    url: str
    train: tuple[str, ...]
    test: tuple[str, ...]
    meta: str
    label_key: bytes
    names_key: bytes
    num_classes: int


CIFAR10 = _Spec("cifar10", "cifar-10-python.tar.gz", "cifar-10-batches-py",
                "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
                tuple(f"data_batch_{i}" for i in range(1, 6)), ("test_batch",), "batches.meta",
                b"labels", b"label_names", 10)
CIFAR100 = _Spec("cifar100", "cifar-100-python.tar.gz", "cifar-100-python",
                 "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
                 ("train",), ("test",), "meta", b"fine_labels", b"fine_label_names", 100)


class _SafeUnpickler(pickle.Unpickler):
    """Allow only the numpy reconstruction helpers that the CIFAR pickles need."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype"), ("copyreg", "_reconstructor"),
                ("builtins", "object")}

    def find_class(self, module: str, name: str):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"forbidden global {module}.{name}")


def _unpickle(raw: bytes, where: Path) -> dict:
    try:
        obj = _SafeUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as exc:
        raise corrupt(where, f"cannot unpickle ({exc})", "delete it and download the archive again") from None
    if not isinstance(obj, dict):
        raise corrupt(where, "batch is not a dict", "delete it and download the archive again")
    return obj


def _how(spec: _Spec) -> str:
    return (f"download {spec.url} (or its extracted folder {spec.folder}/) into a directory and pass "
            "--set data.root=DIR")


def _read_members(spec: _Spec, root: Path | None, names: tuple[str, ...], download_ok: bool) -> dict[str, dict]:
    """Read batch files ``names`` (plus meta) from the extracted folder or the archive."""
    dirs = [root] if root else [cache_dir(spec.name)]
    for d in dirs:
        folder = d / spec.folder
        if folder.is_dir():
            out = {}
            for n in names:
                path = folder / n
                if not path.exists():
                    raise DataMissingError(f"{spec.name}: missing file {path}; {_how(spec)}")
                out[n] = _unpickle(path.read_bytes(), path)
            return out
        archive = d / spec.archive
        if archive.exists():
            return _read_archive(spec, archive, names)
    if root is None and download_ok:
        archive = download(spec.url, cache_dir(spec.name) / spec.archive)
        return _read_archive(spec, archive, names)
    where = root or cache_dir(spec.name)
    raise DataMissingError(f"{spec.name}: neither {where / spec.archive} nor {where / spec.folder}/ found; "
                           f"{_how(spec)}")


def _read_archive(spec: _Spec, archive: Path, names: tuple[str, ...]) -> dict[str, dict]:
    wanted = {f"{spec.folder}/{n}": n for n in names}
    out: dict[str, dict] = {}
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                if member.name in wanted and member.isfile():
                    f = tar.extractfile(member)
                    assert f is not None
                    out[wanted[member.name]] = _unpickle(f.read(), archive)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise corrupt(archive, f"cannot read the archive ({exc})", _how(spec)) from None
    missing = [n for n in names if n not in out]
    if missing:
        raise corrupt(archive, f"missing member {spec.folder}/{missing[0]}", _how(spec))
    return out


def _load(spec: _Spec, root: Path | None, split: str, download_ok: bool) -> ImageDataset:
    batches = spec.train if split == "train" else spec.test
    files = _read_members(spec, root, (*batches, spec.meta), download_ok)
    images, labels = [], []
    for b in batches:
        d = files[b]
        if b"data" not in d or spec.label_key not in d:
            raise corrupt(Path(b), f"batch lacks b'data' or {spec.label_key!r}", _how(spec))
        data = np.asarray(d[b"data"], dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise corrupt(Path(b), f"data has shape {data.shape}, expected [n, 3072]", _how(spec))
        images.append(data.reshape(-1, 3, 32, 32))
        labels.append(np.asarray(d[spec.label_key], dtype=np.int64))
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in files[spec.meta].get(spec.names_key, [])]
    if len(names) != spec.num_classes:
        names = [str(i) for i in range(spec.num_classes)]
    return ImageDataset(torch.from_numpy(np.concatenate(images)), torch.from_numpy(np.concatenate(labels)),
                        spec.num_classes, names, spec.name, split)


@register_dataset("cifar10", splits=("train", "test"))
def load_cifar10(root: Path | None, split: str, download: bool = True) -> ImageDataset:
    """Load a CIFAR-10 split as ``uint8 [N, 3, 32, 32]`` (50k train / 10k test)."""
    return _load(CIFAR10, root, split, download)


@register_dataset("cifar100", splits=("train", "test"))
def load_cifar100(root: Path | None, split: str, download: bool = True) -> ImageDataset:
    """Load a CIFAR-100 split (fine labels) as ``uint8 [N, 3, 32, 32]`` (50k train / 10k test)."""
    return _load(CIFAR100, root, split, download)
