"""Typed config and presets of the ``pu`` task plugin (a docstring on every option, CleanRL style)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from contrastlab.data.augment import augment_spec_for
from contrastlab.platform.task import MAX_WIDTH, ComponentSpec, Section, TaskConfig
from contrastlab.pretraining import TEST_IMAGES, TRAIN_IMAGES, seconds_per_image

LOSS_PRIOR_KEYS: dict[str, tuple[str, ...]] = {"punce": ("prior",), "pucl": ("alpha", "c")}
"""Loss hyperparameters that are PU priors and can be filled from the split (``prior.fill_loss``; PUCL only
with ``prior.fill_pucl``)."""


class DataSection(Section):
    """Which dataset, which classes are positive, which positives are labeled."""

    dataset: str = "fashion_mnist"
    """Dataset name (``fashion_mnist``, ``cifar10``, ``synthetic``, ...; see ``contrastlab.data.dataset_names``)."""
    root: str | None = None
    """Directory with the dataset's standard files; ``None`` searches the default places (offline first)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments of the dataset loader (e.g. ``size``, ``num_classes`` for ``synthetic``)."""
    positive_classes: list[int] | None = None
    """Class ids that form the positive class; ``None`` uses the dataset's documented default
    (Fashion-MNIST: 0,2,4,6 = upper-body garments; CIFAR-10: 0,1,8,9 = vehicles; synthetic: 0)."""
    n_labeled: int | None = 1000
    """``n_L``: number of positives that are labeled, drawn at random (SCAR)."""
    labeled_fraction: float | None = None
    """Fraction of the positives that are labeled (``c``, in (0, 1]); when set it replaces ``n_labeled``."""
    scenario: Literal["case_control", "single_training_set"] = "case_control"
    """``case_control`` (puNCE: U = every unlabeled example, prior π of that pool) or ``single_training_set``
    (PUCL: U = the whole training set, prior α = n₊/n); see ``contrastlab.data.pu``."""
    train_size: int | None = Field(default=None, ge=1)
    """Use a random subset of this many training examples (``None``: all); the PU split is made on the subset."""
    test_size: int | None = Field(default=None, ge=1)
    """Use a random subset of this many test examples (``None``: the whole clean test set)."""
    split_seed: int | None = Field(default=None, ge=0, lt=2**32 - 1)
    """Seed of the subsets and of the SCAR labeling (``None``: the run's ``seed``)."""

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, name: str) -> str:
        """An unknown name is refused here: the label check, which runs before the data are loaded, would
        otherwise blame the missing positive classes of dataset 'banana'."""
        from contrastlab.data import dataset_names
        from contrastlab.platform.registry import unknown_name_message

        if name not in dataset_names():
            raise ValueError(unknown_name_message("dataset", name, dataset_names()))
        return name


class PriorSection(Section):
    """The class prior given to the PU risk (and to the prior-aware losses)."""

    mode: Literal["exact", "given", "estimate"] = "exact"
    """``exact``: π = (n₊ − n_L)/(n − n_L) from the split (puNCE A.1.1); ``given``: ``value``; ``estimate``:
    Elkan–Noto (2008) on the training inputs, reported next to the true prior."""
    value: float | None = None
    """The given prior π of the unlabeled pool, in (0, 1) (``mode=given`` only)."""
    fill_loss: bool = True
    """Set ``punce.prior`` = π from this prior unless it is given explicitly (puNCE A.1.1)."""
    fill_pucl: bool = False
    """Also set ``pucl.alpha`` = α (population prior) and ``pucl.c`` = n_L/n₊ from the split. Off by default:
    in PUCL, α is the chance that a contrastive candidate shares the *anchor's latent class* and c the share
    of those that are positive views (paper defaults 0.12 and 0.1), not the PU dataset's binary prior."""
    auto_loss_keys: list[str] = Field(default_factory=list)
    """Filled by the plugin: the loss hyperparameters it sets from the prior (those not set explicitly)."""
    estimator_hidden: int = Field(default=32, ge=0, le=MAX_WIDTH)
    """Hidden width of the Elkan–Noto classifier (0 = logistic regression)."""
    estimator_steps: int = Field(default=300, ge=1)
    """Training steps of the Elkan–Noto classifier."""
    estimator_max_examples: int = Field(default=10_000, ge=100)
    """At most this many unlabeled examples (a uniform subsample, plus every labeled one) are used for the
    estimate, which corrects for the subsampling."""


class PretrainSection(Section):
    """Contrastive pre-training of the encoder (method ``pretrain_probe``)."""

    steps: int = Field(default=2000, ge=0)
    """Optimizer steps of contrastive pre-training."""
    batch_size: int = Field(default=256, ge=2)
    """Images per step (two views each; puNCE used 1024 on MNIST, 2048 on CIFAR)."""
    lr: float = Field(default=1e-3, gt=0)
    """Adam learning rate (the paper's LARS is not used)."""
    weight_decay: float = Field(default=1e-6, ge=0)
    """Adam weight decay."""
    projection_hidden: int = Field(default=512, ge=1, le=MAX_WIDTH)
    """Hidden width of the projection head (discarded after pre-training)."""
    projection_dim: int = Field(default=128, ge=1, le=MAX_WIDTH)
    """Output size of the projection head."""
    crop_scale_min: float | None = Field(default=None, gt=0, le=1)
    """Smallest random-resized-crop area (fraction of the image); ``None``: the dataset's SimCLR value (0.2 for
    Fashion-MNIST, 0.08 for CIFAR, STL-10 and the others)."""


class ClassifierSection(Section):
    """The PU classifier: a linear probe on the (frozen or fine-tuned) encoder, or the end-to-end baseline."""

    risk: Literal["nnpu", "upu", "pn"] = "nnpu"
    """PU risk: ``nnpu`` (Kiryo et al. 2017), ``upu`` (du Plessis et al.) or ``pn`` (unlabeled = negative)."""
    surrogate: Literal["sigmoid", "logistic"] = "sigmoid"
    """Surrogate loss ℓ(z, y): sigmoid σ(−yz) (Kiryo et al.) or logistic log(1 + e^{−yz})."""
    beta: float = Field(default=0.0, ge=0)
    """nnPU β: the ascent rule fires when the negative risk is below −β (Kiryo et al. default 0)."""
    gamma: float = Field(default=1.0, gt=0, le=1)
    """nnPU γ: weight of the gradient-ascent step (Kiryo et al. default 1). It scales the ascent gradient, as the
    authors' code does; under Adam that shrinks the step only relative to Adam's running moments, not by γ."""
    steps: int = Field(default=1000, ge=1)
    """Optimizer steps of the probe (method ``pretrain_probe``)."""
    end_to_end_steps: int | None = Field(default=None, ge=1)
    """Steps of the end-to-end baseline; ``None`` = ``pretrain.steps + classifier.steps`` (equal budget)."""
    batch_labeled: int = Field(default=64, ge=1)
    """Labeled positives per step."""
    batch_unlabeled: int = Field(default=256, ge=1)
    """Unlabeled examples per step."""
    lr: float = Field(default=1e-3, gt=0)
    """Adam learning rate of the linear head, and of the whole network for the end-to-end baseline."""
    weight_decay: float = Field(default=5e-3, ge=0)
    """Adam weight decay (nnPU's MNIST setting 0.005)."""
    fine_tune: bool = False
    """Also train the pre-trained encoder with the PU risk (puNCE Table 3; the paper finds probing better)."""
    fine_tune_lr: float = Field(default=1e-4, gt=0)
    """Adam learning rate of the encoder when ``fine_tune`` is on."""


class PUConfig(TaskConfig):
    """Config of the ``pu`` plugin: PU split, prior, contrastive pre-training, PU classifier."""

    method: Literal["pretrain_probe", "end_to_end"] = "pretrain_probe"
    """``pretrain_probe``: contrastive pre-training with ``loss`` then a PU linear probe; ``end_to_end``: the
    baseline, the same encoder + linear head trained from scratch with the PU risk (no contrastive loss)."""
    loss: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="punce"))
    """Contrastive loss of pre-training (any registered loss; ignored by ``end_to_end``)."""
    encoder: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="small_cnn"))
    """Encoder network; its output (before the projection head) feeds the PU classifier."""
    data: DataSection = Field(default_factory=DataSection)
    """Dataset and PU split."""
    prior: PriorSection = Field(default_factory=PriorSection)
    """Class prior."""
    pretrain: PretrainSection = Field(default_factory=PretrainSection)
    """Contrastive pre-training."""
    classifier: ClassifierSection = Field(default_factory=ClassifierSection)
    """PU classifier and its risk."""
    log_every: int = Field(default=25, ge=1)
    """Log training scalars every this many steps."""
    eval_batch_size: int = Field(default=1024, ge=1)
    """Batch size of feature extraction and evaluation."""


PRESETS: dict[str, dict[str, Any]] = {
    # CPU smoke: 6k Fashion-MNIST training images, a small CNN, a few hundred steps (≈ 25 s on one core).
    "smoke": {
        "encoder": {"name": "small_cnn", "width": 16, "feature_dim": 64},
        "data": {"train_size": 6000, "test_size": 2000, "n_labeled": 200},
        "pretrain": {"steps": 150, "batch_size": 128},
        "classifier": {"steps": 300, "batch_labeled": 32, "batch_unlabeled": 128},
        "checkpoint_every": 100,
    },
    # Paper-like PU-Fashion-MNIST (puNCE §4: n_L ∈ {1k, 3k, 10k}, t = 0.5, batch 1024, 200 epochs on MNIST);
    # sized for a GPU. Change data.n_labeled for the other settings.
    "paper": {
        "encoder": {"name": "resnet18", "stem": "cifar"},
        "data": {"n_labeled": 1000},
        "pretrain": {"steps": 11_700, "batch_size": 1024, "lr": 1e-3},
        "classifier": {"steps": 5000, "batch_labeled": 256, "batch_unlabeled": 1024},
        "checkpoint_every": 1000,
    },
}
"""Named presets: ``smoke`` (CPU, minutes) and ``paper`` (GPU-sized)."""


def estimated_seconds(config: PUConfig, device: str) -> float | None:
    """Rough wall time of a run: pre-training (two views per image), then the classifier (through the encoder
    when it is trained end to end or fine-tuned, else on features extracted once), then the test set.

    ``None`` when the encoder's cost or the dataset's size is unknown. Inference is counted as a training pass
    (the smoke preset's extraction measured about that on a CPU).
    """
    d = config.data
    size = augment_spec_for(d.dataset, 32).size
    per = seconds_per_image(config.encoder.name, config.encoder.hparams(), device, size)
    n_train = d.train_size or d.options.get("size") or TRAIN_IMAGES.get(d.dataset)
    if per is None or n_train is None:
        return None
    n_test = d.test_size or (n_train // 2 if d.options.get("size") else TEST_IMAGES.get(d.dataset, n_train))
    pretrain, classifier = phase_images(config)
    extract = 0 if config.method == "end_to_end" else n_train
    return (pretrain + classifier + extract + n_test) * per


def phase_images(config: PUConfig) -> tuple[int, int]:
    """Images through the encoder in pre-training (two views each) and in the classifier phase (0 when the
    classifier trains on features extracted once)."""
    cc, e2e = config.classifier, config.method == "end_to_end"
    pretrain = 0 if e2e else config.pretrain.steps * config.pretrain.batch_size * 2
    clf_steps = (cc.end_to_end_steps or config.pretrain.steps + cc.steps) if e2e else cc.steps
    return pretrain, clf_steps * (cc.batch_labeled + cc.batch_unlabeled) if e2e or cc.fine_tune else 0


def pretrain_share(config: PUConfig) -> float:
    """The part of a run that is pre-training, as :func:`estimated_seconds` counts it: its progress bar covers
    ``(0, share)`` of the run and the classifier's ``(share, 1)`` (``run.json``'s ``progress``, compare's ETA)."""
    pretrain, classifier = phase_images(config)
    return pretrain / (pretrain + classifier) if pretrain + classifier else 1.0
