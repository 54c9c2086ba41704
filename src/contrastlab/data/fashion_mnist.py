"""Fashion-MNIST (Xiao et al. 2017): 60k + 10k grayscale 28×28 images, 10 classes, idx format.

Search order for the four standard ``*-idx?-ubyte.gz`` files:
1. ``root`` (``--set data.root=DIR``), if given;
2. the Debian/Ubuntu package ``dataset-fashion-mnist`` (``/usr/share/datasets/fashion-mnist``);
3. the download cache (``~/.cache/contrastlab/data/fashion_mnist``), filled from the standard location
   when ``download`` is true and the machine is online.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch

from contrastlab.data.base import ImageDataset, cache_dir, corrupt, download, find_file, register_dataset
from contrastlab.platform.errors import DataMissingError

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
"""Where Debian's ``dataset-fashion-mnist`` package installs the files."""
URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
"""Standard download location of the idx files."""
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
HOW_TO_GET = ("install it with `apt-get install -y dataset-fashion-mnist` (after apt-get update), "
              "or pass --set data.root=DIR with the four *-ubyte.gz files")


def read_idx(path: Path) -> np.ndarray:
    """Read an idx file (optionally gzipped): magic ``0x00000800 | ndim`` (uint8 data), big-endian dims."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as exc:
        raise corrupt(path, str(exc), HOW_TO_GET) from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise corrupt(path, "not an idx uint8 file (bad magic number)", HOW_TO_GET)
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise corrupt(path, f"expected {int(np.prod(dims))} values for shape {dims}, found {data.size}",
                      HOW_TO_GET)
    return data.reshape(dims)


def _locate(filename: str, root: Path | None, download_ok: bool) -> Path:
    dirs = [root] if root else [DEBIAN_DIR, cache_dir("fashion_mnist")]
    found = find_file(filename, dirs)
    if found is not None:
        return found
    if root is not None:
        raise DataMissingError(f"Fashion-MNIST file {root / filename} not found; {HOW_TO_GET}")
    if not download_ok:
        raise DataMissingError(f"Fashion-MNIST not found (looked in {DEBIAN_DIR}); {HOW_TO_GET}")
    try:
        return download(URL + filename, cache_dir("fashion_mnist") / filename)
    except DataMissingError:
        raise DataMissingError(f"Fashion-MNIST not found and the download failed (offline?); {HOW_TO_GET}") \
            from None


@register_dataset("fashion_mnist", splits=("train", "test"))
def load_fashion_mnist(root: Path | None, split: str, download: bool = True) -> ImageDataset:
    """Load a Fashion-MNIST split as ``uint8 [N, 1, 28, 28]``."""
    image_file, label_file = FILES[split]
    images = read_idx(_locate(image_file, root, download))
    labels = read_idx(_locate(label_file, root, download))
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise corrupt(_locate(image_file, root, False), f"shape {images.shape} does not match labels "
                      f"{labels.shape}", HOW_TO_GET)
    return ImageDataset(torch.from_numpy(images.copy()).unsqueeze(1), torch.from_numpy(labels.astype(np.int64)),
                        10, list(CLASS_NAMES), "fashion_mnist", split)
