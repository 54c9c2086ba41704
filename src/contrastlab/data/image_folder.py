"""Any image folder with one class per subfolder: ``root/<class>/*.png|jpg|...``.

Class ids follow the sorted subfolder names (of ``root/train`` for every split when it exists, so a test split
without some class keeps the training ids). If ``root/train`` and ``root/test`` exist they are the splits;
otherwise ``root`` itself is the ``train`` split and ``test`` is an error. Images are decoded with Pillow,
converted to RGB (or L with ``channels=1``) and resized to ``image_size`` (default: the first image's size).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from contrastlab.data.base import ImageDataset, corrupt, register_dataset
from contrastlab.platform.errors import ConfigError, DataMissingError

EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")
"""File extensions read as images (case-insensitive)."""
HOW = "pass --set data.root=DIR where DIR holds one subfolder of images per class"


def _class_folders(base: Path) -> list[str]:
    """Sorted names of the class subfolders of ``base``."""
    return sorted(p.name for p in base.iterdir() if p.is_dir())


@register_dataset("image_folder", splits=("train", "test"))
def load_image_folder(root: Path | None, split: str, download: bool = True, image_size: int | None = None,
                      channels: int = 3) -> ImageDataset:
    """Load ``root`` (or ``root/<split>``) as ``uint8 [N, channels, image_size, image_size]``."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow ships with matplotlib
        raise DataMissingError("image_folder needs Pillow: pip install pillow") from None
    if root is None:
        raise DataMissingError(f"image_folder has no default location; {HOW}")
    if channels not in (1, 3):
        raise ConfigError(f"image_folder: channels={channels} is invalid; valid: 1, 3")
    base = root / split if (root / split).is_dir() else root
    if base == root and split != "train":
        raise DataMissingError(f"image_folder: {root / split} not found; only split 'train' exists in {root}")
    if not base.is_dir():
        raise DataMissingError(f"image_folder: {base} is not a directory; {HOW}")
    classes = _class_folders(base)
    if not classes:
        raise DataMissingError(f"image_folder: no class subfolders in {base}; {HOW}")
    if base != root and split != "train" and (root / "train").is_dir():
        # class ids come from root/train in every split, so a class keeps its id when a split lacks a folder
        extra = sorted(set(classes) - set(_class_folders(root / "train")))
        if extra:
            raise ConfigError(f"image_folder: class folder(s) {', '.join(extra)} of {base} have no folder in "
                              f"{root / 'train'}; every {split} class must also be a training class")
        classes = _class_folders(root / "train")
    mode = "L" if channels == 1 else "RGB"
    arrays, labels = [], []
    for cid, cname in enumerate(classes):
        if not (base / cname).is_dir():
            continue
        for path in sorted((base / cname).iterdir()):
            if path.suffix.lower() not in EXTENSIONS:
                continue
            try:
                with Image.open(path) as img:
                    img = img.convert(mode)
                    if image_size is None:
                        image_size = img.size[0]
                    if img.size != (image_size, image_size):
                        img = img.resize((image_size, image_size), Image.BILINEAR)
                    arr = np.asarray(img, dtype=np.uint8)
            except OSError as exc:
                raise corrupt(path, f"cannot decode image ({exc})", "remove or replace the file") from None
            arrays.append(arr[None] if channels == 1 else arr.transpose(2, 0, 1))
            labels.append(cid)
    if not arrays:
        raise DataMissingError(f"image_folder: no images ({', '.join(EXTENSIONS)}) under {base}; {HOW}")
    return ImageDataset(torch.from_numpy(np.stack(arrays)), torch.tensor(labels, dtype=torch.long),
                        len(classes), classes, "image_folder", split)
