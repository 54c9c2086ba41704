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

import inspect
from pathlib import Path

from contrastlab.data import cifar, fashion_mnist, image_folder, stl10, synthetic  # noqa: F401  (registration)
from contrastlab.data.base import _LOADERS, _SPLITS, CACHE_ENV, ImageDataset, register_dataset
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.registry import unknown_name_message

__all__ = ["CACHE_ENV", "ImageDataset", "dataset_names", "dataset_splits", "load_dataset", "register_dataset"]


def dataset_names() -> list[str]:
    """Names accepted by :func:`load_dataset`."""
    return sorted(_LOADERS)


def dataset_splits(name: str) -> tuple[str, ...]:
    """Valid split names of dataset ``name``."""
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
    if name not in _LOADERS:
        raise ConfigError(unknown_name_message("dataset", name, list(_LOADERS)))
    if split not in _SPLITS[name]:
        raise ConfigError(f"dataset '{name}': unknown split '{split}'; valid: {', '.join(_SPLITS[name])}")
    loader = _LOADERS[name]
    accepted = inspect.signature(loader).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        options = sorted(k for k in accepted if k not in {"root", "split", "download"})
        unknown = sorted(set(kwargs) - set(options))
        if unknown:
            raise ConfigError(f"dataset '{name}' has no option {', '.join(map(repr, unknown))}; its options: "
                              f"{', '.join(options) or 'none'}")
    return loader(root=Path(root).expanduser() if root else None, split=split, download=download, **kwargs)
