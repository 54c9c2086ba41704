"""Typed config and presets of the ``simclr`` plugin (every field is documented; see ``platform config``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contrastlab.platform.task import MAX_WIDTH, ComponentSpec, Section, TaskConfig

MAX_IMAGE_SIZE = 1024
"""Largest image side accepted (the datasets are held in memory; STL-10 is 96 px)."""
MAX_VIEWS = 64
"""Most augmented views per image accepted (every view of a batch is one encoder input)."""


class DataSection(Section):
    """Which images to train on and how batches are formed."""

    dataset: str = "fashion_mnist"
    """Dataset: fashion_mnist, cifar10, cifar100, stl10, image_folder or synthetic."""
    root: str | None = None
    """Directory with the standard files/archives; null searches the default places (Debian package, cache)."""
    download: bool = True
    """Download the standard archive into the cache when it is not found locally (needs network)."""
    train_split: str = "train"
    """Split used for contrastive training (stl10: train+unlabeled is the 105k SimCLR set of DCL/BCL)."""
    train_subset: int | None = Field(default=None, ge=1)
    """Use a random subset of this many training images (null: all)."""
    test_subset: int | None = Field(default=None, ge=1)
    """Use a random subset of this many test images for kNN/linear evaluation (null: all)."""
    image_size: int | None = Field(default=None, ge=4, le=MAX_IMAGE_SIZE)
    """Resize image_folder images to this side length (null: the first image's size)."""
    views: int = Field(default=2, le=MAX_VIEWS)
    """Augmented views per image V; V > 2 gives M = V−1 positives (DCL/HCL/PUCL with M > 1, DebiasedPos
    aggregation) through the multi_view sampler."""
    labels: Literal["none", "class"] = "none"
    """Observed labels given to label-aware losses: none, or class (true class labels; the oracle `unbiased`
    loss of DCL Fig. 2 and `supcon`). Unsupervised losses never receive labels either way."""
    positive_noise: float = Field(default=0.0, ge=0.0, le=1.0)
    """Probability that a positive view is replaced by a view of another random image (type-I errors; the
    DebiasedPos setting)."""
    tau_plus_from_classes: bool = True
    """Set loss.tau_plus = 1/C from the dataset's class count when the user did not set it (DCL/HCL/BCL τ+ =
    1/C protocol, BCL Table 3)."""
    on_device: bool = True
    """Keep the uint8 training images on the training device (no host→device copy per step)."""


class AugmentSection(Section):
    """Overrides of the per-dataset SimCLR augmentation (null keeps the dataset's value)."""

    size: int | None = Field(default=None, ge=4, le=MAX_IMAGE_SIZE)
    """Output crop size in pixels (dataset default: 28 Fashion-MNIST, 32 CIFAR, 96 STL-10)."""
    crop_scale_min: float | None = Field(default=None, gt=0.0, le=1.0)
    """Smallest crop area fraction (default 0.08; 0.2 for Fashion-MNIST)."""
    jitter_p: float = Field(default=0.8, ge=0.0, le=1.0)
    """Probability of colour jitter (0.4, 0.4, 0.4, 0.1)."""
    gray_p: float = Field(default=0.2, ge=0.0, le=1.0)
    """Probability of grayscale conversion."""
    blur_p: float | None = Field(default=None, ge=0.0, le=1.0)
    """Probability of Gaussian blur (default 0.5 for crops ≥ 64 px, else 0)."""


class ModelSection(Section):
    """Projection head and compute options."""

    head_hidden: int = Field(default=512, ge=1, le=MAX_WIDTH)
    """Hidden units of the projection MLP (DCL code: 512)."""
    proj_dim: int = Field(default=128, ge=1, le=MAX_WIDTH)
    """Output size of the projection head; the loss is computed on it (128-d as in SimCLR/DCL)."""
    head_batch_norm: bool = True
    """BatchNorm in the projection head."""
    sync_bn: bool = False
    """Convert BatchNorm to SyncBatchNorm under DDP (GPU only)."""
    channels_last: bool = True
    """Use the channels_last memory format (faster convolutions on GPU)."""
    bf16: bool = True
    """bf16 autocast for the encoder on CUDA (the loss is computed in float32)."""
    compile: bool = False
    """Wrap the model in torch.compile."""
    key_momentum: float = Field(default=0.99, ge=0.0, lt=1.0)
    """EMA momentum of the key encoder used with the queue/query_key samplers (MoCo)."""


class TrainSection(Section):
    """Optimisation (defaults: the DCL/HCL/BCL protocol)."""

    epochs: int = Field(default=400, ge=1)
    """Passes over the training set."""
    batch_size: int = Field(default=256, ge=2)
    """Images per step and process (N = 2·batch − 2 negatives per anchor with two_view)."""
    max_steps: int | None = Field(default=None, ge=1)
    """Stop after this many steps (null: epochs × steps per epoch)."""
    optimizer: Literal["adam", "sgd", "lars"] = "adam"
    """adam (DCL/HCL/BCL), sgd (momentum), or lars (SimCLR large batch)."""
    lr: float = Field(default=1e-3, gt=0.0)
    """Learning rate (DCL/HCL/BCL: Adam 1e-3)."""
    weight_decay: float = Field(default=1e-6, ge=0.0)
    """Weight decay (DCL/HCL/BCL: 1e-6)."""
    momentum: float = Field(default=0.9, ge=0.0, lt=1.0)
    """Momentum of sgd/lars."""
    schedule: Literal["constant", "cosine"] = "constant"
    """Learning-rate schedule over all steps (cosine decays to 0 after the warm-up)."""
    warmup_epochs: float = Field(default=0.0, ge=0.0)
    """Linear warm-up length in epochs."""
    log_every: int = Field(default=20, ge=1)
    """Log training scalars every this many steps."""


class EvalSection(Section):
    """kNN monitor during training and linear evaluation at the end."""

    knn_every: int = Field(default=1, ge=0)
    """Run the kNN monitor every this many epochs (0: only at the end)."""
    knn_k: int = Field(default=200, ge=1)
    """Neighbours of the kNN monitor (k = 200, Wu et al. 2018 / DCL code)."""
    knn_temperature: float = Field(default=0.1, gt=0.0)
    """Temperature of the kNN vote weights exp(s/t)."""
    knn_bank_subset: int | None = Field(default=None, ge=1)
    """Use this many random training images as the kNN memory bank (null: all); the linear probe always trains on
    all of them."""
    linear: bool = True
    """Train a linear probe on frozen features at the end."""
    linear_epochs: int = Field(default=100, ge=1)
    """Epochs of the linear probe (DCL protocol: 100)."""
    linear_lr: float = Field(default=1e-3, gt=0.0)
    """Adam learning rate of the linear probe."""
    linear_weight_decay: float = Field(default=1e-6, ge=0.0)
    """Weight decay of the linear probe."""
    batch_size: int = Field(default=512, ge=1)
    """Batch size of feature extraction."""


class SimCLRConfig(TaskConfig):
    """Config of the ``simclr`` plugin: SimCLR/MoCo-style training with any registered loss."""

    encoder: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="resnet18"))
    """Encoder network (resnet18, resnet50, small_cnn, or any registered image encoder)."""
    data: DataSection = Field(default_factory=DataSection)
    """Dataset, views, labels and noise."""
    augment: AugmentSection = Field(default_factory=AugmentSection)
    """Augmentation overrides."""
    model: ModelSection = Field(default_factory=ModelSection)
    """Projection head and compute options."""
    train: TrainSection = Field(default_factory=TrainSection)
    """Optimisation."""
    eval: EvalSection = Field(default_factory=EvalSection)
    """Evaluation."""
    checkpoint_every: int = Field(default=2000, ge=1)
    """Save a checkpoint every this many training steps; always at the end."""


PRESETS: dict[str, dict] = {
    "smoke": {
        "device": "cpu",
        "encoder": {"name": "small_cnn", "width": 16, "feature_dim": 128},
        "data": {"dataset": "fashion_mnist", "train_subset": 6000, "test_subset": 2000},
        "model": {"head_hidden": 128},
        "train": {"epochs": 4, "batch_size": 128, "log_every": 10},
        "eval": {"knn_every": 2, "linear_epochs": 30},
        "checkpoint_every": 100,
    },
    "fmnist": {
        "encoder": {"name": "resnet18"},
        "data": {"dataset": "fashion_mnist"},
        "train": {"epochs": 100, "batch_size": 256},
        "eval": {"knn_every": 5},
    },
    "cifar10-paper": {
        "encoder": {"name": "resnet50"},
        "sampler": {"name": "two_view", "temperature": 0.5},
        "data": {"dataset": "cifar10"},
        "train": {"epochs": 400, "batch_size": 256, "optimizer": "adam", "lr": 1e-3, "weight_decay": 1e-6},
        "eval": {"knn_every": 10},
    },
}
"""smoke: CPU, < 3 min, Fashion-MNIST subset + small CNN. fmnist: ResNet-18 on full Fashion-MNIST (GPU).
cifar10-paper: ResNet-50, batch 256, t = 0.5, 400 epochs, Adam 1e-3 / 1e-6 (DCL/HCL/BCL protocol)."""
