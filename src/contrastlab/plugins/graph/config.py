"""Typed config and presets of the ``graph`` plugin (a docstring on every option; see ``platform config``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from contrastlab.data.tu import NodeFeatures
from contrastlab.platform.task import MAX_WIDTH, ComponentSpec, Section, TaskConfig


class SyntheticSection(Section):
    """The generated dataset used when ``data.name: synthetic`` (see ``contrastlab.data.synthetic_graphs``)."""

    graphs: int = Field(default=300, ge=6, le=100_000)
    """Number of graphs (three classes in turn: rings, cliques, trees; at most 100000, generated one by one)."""
    noise: float = Field(default=0.3, ge=0.0, le=1.0)
    """Fraction of every graph's edges rewired at random (higher: classes overlap more)."""
    node_labels: int = Field(default=0, ge=0, le=1000)
    """Random node types written as node labels (class-independent nuisance features, one-hot; 0: none)."""
    seed: int = Field(default=0, ge=0)
    """Seed of the generator; fixed across run seeds so that seeds vary only the training."""


class DataSection(Section):
    """Which graphs to learn from (TU text format, read offline)."""

    name: str = "synthetic"
    """TU dataset name (e.g. PTC_MR, ENZYMES, DD, REDDIT-BINARY, MUTAG), or ``synthetic`` (generated, no files)."""
    root: str | None = None
    """Folder or archive with the TU files (NAME_A.txt, ... or NAME.zip / NAME.tar.gz); null: the cache folder
    ``$CONTRASTLAB_DATA/tu`` (default ``~/.cache/contrastlab/data/tu``). Nothing is downloaded."""
    node_features: NodeFeatures = "auto"
    """Node features: auto (one-hot node labels + attributes when present, else a constant 1), labels,
    attributes, both, constant, or degree (one-hot degree, capped at 32)."""
    synthetic: SyntheticSection = Field(default_factory=SyntheticSection)
    """Generator settings of ``name: synthetic``."""


class AugmentSection(Section):
    """GraphCL augmentations of the two views (You et al. 2020 §3.1); each graph of each view gets one."""

    methods: list[Literal["drop_nodes", "perturb_edges", "mask_attributes", "subgraph", "identity"]] = Field(
        default_factory=lambda: ["drop_nodes", "perturb_edges", "mask_attributes"], min_length=1)
    """Pool of augmentations drawn uniformly per graph and view (the paper preset adds subgraph, as GraphCL's
    random4 pool)."""
    drop_nodes: float = Field(default=0.2, ge=0.0, lt=1.0)
    """Fraction of nodes dropped (GraphCL default ratio 0.2)."""
    perturb_edges: float = Field(default=0.2, ge=0.0, lt=1.0)
    """Fraction of edges dropped, and as many random edges added (GraphCL default ratio 0.2)."""
    mask_attributes: float = Field(default=0.2, ge=0.0, lt=1.0)
    """Fraction of nodes whose features are set to 0 (GraphCL default ratio 0.2)."""
    subgraph: float = Field(default=0.2, ge=0.0, lt=1.0)
    """Fraction of nodes left out of the connected region that subgraph keeps (GraphCL default ratio 0.2)."""


class ModelSection(Section):
    """Training objective and projection head (the encoder is the ``encoder`` component, GIN)."""

    mode: Literal["graphcl", "infograph"] = "graphcl"
    """graphcl: two augmented views of each graph through the two_view sampler (You et al. 2020). infograph:
    local–global pairs, each node against its own graph (positive) and the other graphs of the batch (Sun et al.
    2020), scored by the same loss with cosine/temperature logits; no augmentation."""
    proj_hidden: int | None = Field(default=None, ge=1, le=MAX_WIDTH)
    """Hidden width of the projection head Linear → ReLU → Linear (null: the embedding size L·hidden, GraphCL)."""
    proj_dim: int | None = Field(default=None, ge=1, le=MAX_WIDTH)
    """Output size of the projection head, where the loss is computed (null: the embedding size)."""


class TrainSection(Section):
    """Optimisation (defaults: GraphCL's unsupervised TU setting)."""

    epochs: int = Field(default=20, ge=1)
    """Passes over the dataset (GraphCL unsupervised TU: 20)."""
    batch_size: int = Field(default=128, ge=2)
    """Graphs per step (N = 2·batch − 2 negatives per anchor in graphcl mode); capped at the dataset size."""
    max_steps: int | None = Field(default=None, ge=1)
    """Stop after this many steps (null: epochs × steps per epoch)."""
    lr: float = Field(default=0.01, gt=0.0)
    """Adam learning rate (GraphCL: 0.01)."""
    weight_decay: float = Field(default=0.0, ge=0.0)
    """Adam weight decay (GraphCL: none)."""
    log_every: int = Field(default=5, ge=1)
    """Log training scalars every this many steps."""


class EvalSection(Section):
    """Frozen-embedding readout with stratified K-fold cross-validation (InfoGraph/GraphCL/PUCL protocol)."""

    readouts: list[Literal["svm", "logreg"]] = Field(default_factory=lambda: ["svm"], min_length=1)
    """Classifiers on the frozen graph embeddings: svm (eval/svm_acc, the primary metric) and/or logreg
    (eval/logreg_acc). The first listed must be svm for the primary metric to exist."""
    folds: int = Field(default=10, ge=2)
    """Outer stratified folds (10 in InfoGraph/GraphCL); fewer when a class is smaller."""
    inner_folds: int = Field(default=5, ge=2)
    """Inner folds of the C search inside every outer training part."""
    c_grid: list[Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: [1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0], min_length=1)
    """Values of C searched (InfoGraph/GraphCL: 10^-3 … 10^3); one value skips the search."""
    svm_kernel: Literal["linear", "rbf"] = "linear"
    """Kernel of the SVM readout (the InfoGraph/GraphCL scripts, and the paper preset: rbf)."""
    standardize: bool = True
    """Standardise embeddings with training-fold statistics before the readout (the InfoGraph/GraphCL scripts, and
    the paper preset: false)."""
    every: int = Field(default=0, ge=0)
    """Also evaluate every this many epochs (0: only at the end) to draw the eval/svm_acc curve."""
    initial: bool = True
    """Evaluate the untrained (randomly initialised) encoder at step 0: the eval/svm_acc_init baseline."""
    batch_size: int = Field(default=512, ge=1)
    """Graphs per forward pass when embedding the dataset."""


class GraphConfig(TaskConfig):
    """Config of the ``graph`` plugin: GraphCL/InfoGraph-style graph contrastive learning with any loss."""

    encoder: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="gin"))
    """Graph encoder (gin: GIN with a sum-pooled concatenation of all layers)."""
    sampler: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="two_view", temperature=0.2))
    """Sampler of the two views; its temperature also scales the infograph-mode logits (GraphCL: 0.2)."""
    data: DataSection = Field(default_factory=DataSection)
    """Dataset."""
    augment: AugmentSection = Field(default_factory=AugmentSection)
    """Augmentations of the two views (graphcl mode)."""
    model: ModelSection = Field(default_factory=ModelSection)
    """Objective and projection head."""
    train: TrainSection = Field(default_factory=TrainSection)
    """Optimisation."""
    eval: EvalSection = Field(default_factory=EvalSection)
    """Evaluation."""
    checkpoint_every: int = Field(default=50, ge=1)
    """Save a checkpoint every this many training steps; always at the end."""


PRESETS: dict[str, dict[str, Any]] = {
    # CPU check on the generated dataset (no files), well under a minute. The encoder is deliberately narrow
    # (one GIN layer of 8 units on one-hot degrees): a random projection that narrow loses the class structure,
    # so learning shows against the eval/svm_acc_init baseline; at paper width a random GIN + SVM already
    # separates these graphs (docs/graph.md, "The smoke preset"). The readout keeps 10 outer folds but searches
    # 5 values of C with 3 inner folds (C = 1000 fits dominate the SVM time on barely separable embeddings).
    "smoke": {
        "device": "cpu",
        "encoder": {"name": "gin", "hidden_dim": 8, "num_layers": 1},
        "data": {"name": "synthetic", "node_features": "degree", "synthetic": {"graphs": 300, "noise": 0.3}},
        "train": {"epochs": 40, "batch_size": 128, "log_every": 5},
        "eval": {"every": 20, "inner_folds": 3, "c_grid": [0.01, 0.1, 1.0, 10.0, 100.0]},
        "checkpoint_every": 40,
    },
    # GraphCL unsupervised TU setting (You et al. 2020; the setting PUCL Table 2 compares on): GIN 3 × 32,
    # batch 128, Adam 0.01, 20 epochs, the four augmentations (the script's random4 pool) at ratio 0.2, t = 0.2,
    # 10-fold SVM with C in 10^-3..10^3.
    # The readout follows the InfoGraph/GraphCL evaluation scripts: scikit-learn's SVC() (RBF kernel, default
    # gamma) on the raw embeddings (no scaling), C searched by 5 inner folds of each outer training part.
    # Needs the user's TU files: --set data.name=PTC_MR --set data.root=DIR.
    "paper": {
        "encoder": {"name": "gin", "hidden_dim": 32, "num_layers": 3},
        "sampler": {"name": "two_view", "temperature": 0.2},
        "data": {"name": "PTC_MR"},
        "augment": {"methods": ["drop_nodes", "perturb_edges", "mask_attributes", "subgraph"], "drop_nodes": 0.2,
                    "perturb_edges": 0.2, "mask_attributes": 0.2, "subgraph": 0.2},
        "train": {"epochs": 20, "batch_size": 128, "lr": 0.01, "log_every": 1},
        "eval": {"folds": 10, "inner_folds": 5, "svm_kernel": "rbf", "standardize": False, "every": 5},
        "checkpoint_every": 20,
    },
}
"""smoke: generated data, CPU, well under a minute. paper: GraphCL/PUCL Table 2 settings on a user-provided TU
dataset (PTC_MR by default)."""
