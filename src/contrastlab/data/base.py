"""Dataset primitives shared by every loader: :class:`ImageDataset`, :func:`register_dataset`, cache and download
helpers. The catalog (:mod:`contrastlab.data.datasets`) imports the loaders, which import only this module.
"""

from __future__ import annotations

import http.client
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

from contrastlab.platform.errors import DataMissingError

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

    def subset_indices(self, n: int | None, seed: int = 0) -> torch.Tensor | None:
        """Sorted indices of :meth:`subset`'s samples, or ``None`` for the whole set."""
        if n is None or n >= len(self):
            return None
        g = torch.Generator().manual_seed(seed)
        return torch.randperm(len(self), generator=g)[:n].sort().values

    def subset(self, n: int | None, seed: int = 0) -> ImageDataset:
        """A random subset of ``n`` samples (the whole set when ``n`` is ``None`` or ``>= len``)."""
        idx = self.subset_indices(n, seed)
        if idx is None:
            return self
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
    """Download ``url`` to ``dest`` atomically; raise :class:`DataMissingError` when offline or on failure.

    The partial ``<dest name>…part`` file is removed however the download stops (a network error, a truncated
    response, Ctrl-C), so an interrupted download leaves nothing beside ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=dest.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            shutil.copyfileobj(resp, out, length=1 << 20)
        os.replace(tmp, dest)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException)):
            raise DataMissingError(f"could not download {url} ({exc}); {_offline_hint(dest)}") from None
        raise
    return dest


def _offline_hint(dest: Path) -> str:
    return f"put the file at {dest} or pass --set data.root=DIR with the standard files"


def corrupt(path: Path, why: str, how: str) -> DataMissingError:
    """A :class:`DataMissingError` for a corrupt file, naming it and how to replace it."""
    return DataMissingError(f"corrupt dataset file {path}: {why}; {how}")
