"""A small registry of in-memory image datasets for the vision plugins (``simclr``, ``pu``).

Every loader returns an :class:`ImageDataset`: the whole split as a ``uint8`` tensor ``[N, C, H, W]`` plus
``long`` labels ``[N]``. The datasets used by the papers (Fashion-MNIST, CIFAR-10/100, STL-10) fit in memory,
so training indexes a tensor (on the training device) instead of running a per-sample ``DataLoader``.

Stable API (used by the ``simclr`` and ``pu`` plugins)::

    from contrastlab.data import load_dataset, dataset_names
    ds = load_dataset("fashion_mnist", root=None, split="train", download=True)
    ds.images   # uint8 [N, C, H, W]
    ds.labels   # long [N]
    ds.num_classes, ds.class_names, ds.channels, ds.image_size
    small = ds.subset(5000, seed=0)   # stratification-free random subset

Missing or corrupt data raise :class:`contrastlab.DataMissingError` with one line that says how to get it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from contrastlab.platform.errors import ConfigError, DataMissingError
from contrastlab.platform.registry import unknown_name_message

CACHE_ENV = "CONTRASTLAB_DATA"
"""Environment variable naming the download cache directory (default ``~/.cache/contrastlab/data``)."""


@dataclass
class ImageDataset:
    """One split of an image classification dataset, held in memory."""

    images: Tensor
    """``uint8 [N, C, H, W]`` images."""
    labels: Tensor
    """``long [N]`` class ids in ``[0, num_classes)``."""
    num_classes: int
    """Number of classes ``C``."""
    class_names: list[str]
    """Human-readable class names, ``len == num_classes``."""
    name: str = ""
    """Registry name of the dataset (e.g. ``fashion_mnist``)."""
    split: str = ""
    """Split name (``train``, ``test``, ...)."""

    def __post_init__(self) -> None:
        if self.images.dtype != torch.uint8 or self.images.dim() != 4:
            raise ValueError(f"images must be uint8 [N,C,H,W], got {self.images.dtype} {tuple(self.images.shape)}")
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError("labels must be [N] matching images")
        self.labels = self.labels.long()

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def channels(self) -> int:
        """Number of image channels (1 or 3)."""
        return int(self.images.shape[1])

    @property
    def image_size(self) -> int:
        """Image height (images are square for every built-in dataset)."""
        return int(self.images.shape[2])

    def subset(self, n: int | None, seed: int = 0) -> ImageDataset:
        """A random subset of ``n`` samples (the whole set when ``n`` is ``None`` or ``>= len``)."""
        if n is None or n >= len(self):
            return self
        g = torch.Generator().manual_seed(seed)
        idx = torch.randperm(len(self), generator=g)[:n].sort().values
        return ImageDataset(self.images[idx], self.labels[idx], self.num_classes, self.class_names,
                            self.name, self.split)


Loader = Callable[..., ImageDataset]
_LOADERS: dict[str, Loader] = {}
_SPLITS: dict[str, tuple[str, ...]] = {}


def register_dataset(name: str, splits: tuple[str, ...]) -> Callable[[Loader], Loader]:
    """Decorator registering ``loader(root, split, download, **kwargs) -> ImageDataset`` under ``name``."""

    def deco(fn: Loader) -> Loader:
        _LOADERS[name] = fn
        _SPLITS[name] = splits
        return fn

    return deco


def dataset_names() -> list[str]:
    """Names accepted by :func:`load_dataset`."""
    _ensure_builtins()
    return sorted(_LOADERS)


def dataset_splits(name: str) -> tuple[str, ...]:
    """Valid split names of dataset ``name``."""
    _ensure_builtins()
    return _SPLITS[name]


def load_dataset(
    name: str, root: str | Path | None = None, split: str = "train", download: bool = True, **kwargs: object
) -> ImageDataset:
    """Load ``split`` of dataset ``name`` into memory.

    Args:
        name: one of :func:`dataset_names` (``fashion_mnist``, ``cifar10``, ``cifar100``, ``stl10``,
            ``image_folder``, ``synthetic``).
        root: directory holding the standard files/archives; ``None`` searches the default places
            (the Debian package for Fashion-MNIST, then the download cache).
        split: ``train`` or ``test`` (STL-10 also ``unlabeled`` and ``train+unlabeled``).
        download: fetch the standard archive into the cache when it is not found locally.
        **kwargs: loader-specific options (e.g. ``image_size`` for ``image_folder``, ``size`` for ``synthetic``).
    """
    _ensure_builtins()
    if name not in _LOADERS:
        raise ConfigError(unknown_name_message("dataset", name, list(_LOADERS)))
    if split not in _SPLITS[name]:
        raise ConfigError(f"dataset '{name}': unknown split '{split}'; valid: {', '.join(_SPLITS[name])}")
    return _LOADERS[name](root=Path(root).expanduser() if root else None, split=split, download=download,
                          **kwargs)


def _ensure_builtins() -> None:
    from contrastlab.data import cifar, fashion_mnist, image_folder, stl10, synthetic  # noqa: F401


# ------------------------------------------------------------------ files and downloads
def cache_dir(name: str) -> Path:
    """Download cache of dataset ``name``: ``$CONTRASTLAB_DATA/<name>`` or ``~/.cache/contrastlab/data/<name>``."""
    base = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "contrastlab" / "data"
    return Path(base) / name


def find_file(filename: str, dirs: list[Path]) -> Path | None:
    """The first ``dir/filename`` that exists, or ``None``."""
    for d in dirs:
        path = d / filename
        if path.exists():
            return path
    return None


def download(url: str, dest: Path, timeout: float = 30.0) -> Path:
    """Download ``url`` to ``dest`` atomically; raise :class:`DataMissingError` when offline or on failure."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=dest.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            shutil.copyfileobj(resp, out, length=1 << 20)
        os.replace(tmp, dest)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        Path(tmp).unlink(missing_ok=True)
        raise DataMissingError(f"could not download {url} ({exc}); {_offline_hint(dest)}") from None
    return dest


def _offline_hint(dest: Path) -> str:
    return f"put the file at {dest} or pass --set data.root=DIR with the standard files"


def corrupt(path: Path, why: str, how: str) -> DataMissingError:
    """A :class:`DataMissingError` for a corrupt file, naming it and how to replace it."""
    return DataMissingError(f"corrupt dataset file {path}: {why}; {how}")
