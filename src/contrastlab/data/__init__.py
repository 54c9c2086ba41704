"""Datasets (Fashion-MNIST, CIFAR-10/100, STL-10, image folders, synthetic), batched augmentation, PU splits.

Stable entry points::

    from contrastlab.data import load_dataset, dataset_names, ImageDataset
    from contrastlab.data.augment import SimCLRAugment, augment_for, prepare
"""

from contrastlab.data.datasets import ImageDataset, dataset_names, dataset_splits, load_dataset

__all__ = ["ImageDataset", "dataset_names", "dataset_splits", "load_dataset"]
