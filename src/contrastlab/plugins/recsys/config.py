"""Typed config and presets of the ``recsys`` plugin (a docstring on every option; see ``platform config``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from contrastlab.platform.task import ComponentSpec, Section, TaskConfig

FROM_DENSITY = "from-density"
"""Value of ``loss.tau_plus`` that asks for τ⁺ = the interaction density (BCL Appendix D)."""


MAX_SYNTHETIC_PAIRS = 50_000_000
"""Most users × items of the generated dataset (its dense float32 score matrix: 200 MB, twice while sampling)."""


class SyntheticSection(Section):
    """The generated latent-factor dataset (``data.dataset=synthetic``)."""

    users: int = Field(default=400, ge=2, le=1_000_000)
    """Number of users."""
    items: int = Field(default=500, ge=2, le=1_000_000)
    """Number of items (users × items at most 50 million: the generator scores every pair)."""
    factors: int = Field(default=8, ge=1, le=4096)
    """Size of the hidden user/item factors that generate the interactions."""
    min_per_user: int = Field(default=10, ge=1)
    """Fewest items a user interacts with."""
    max_per_user: int = Field(default=40, ge=1)
    """Most items a user interacts with."""
    sharpness: float = Field(default=3.0, ge=0)
    """How strongly the factors decide the choices (0: popularity only, no personal signal)."""
    seed: int = Field(default=0, ge=0)
    """Seed of the generator (the data are the same for every run seed)."""

    @model_validator(mode="after")
    def _fits_in_memory(self) -> SyntheticSection:
        """The generator holds a dense users × items score matrix: refuse one that cannot fit before it is built."""
        if self.users * self.items > MAX_SYNTHETIC_PAIRS:
            raise ValueError(f"users × items = {self.users} × {self.items} is more than {MAX_SYNTHETIC_PAIRS:,} "
                             "(the generator scores every pair)")
        return self


class DataSection(Section):
    """Interactions, implicit-feedback threshold and the train/test split."""

    dataset: Literal["synthetic", "ml-100k", "ml-1m", "csv"] = "synthetic"
    """``synthetic`` (generated), ``ml-100k`` (MovieLens-100k ``u.data``), ``ml-1m`` (MovieLens-1M
    ``ratings.dat``) or ``csv`` (``user,item[,rating[,timestamp]]`` rows)."""
    root: str | None = None
    """MovieLens: the extracted folder, a folder holding it or its zip, or the zip itself (null: the cache
    ``~/.cache/contrastlab/data/movielens``); csv: the file."""
    csv_header: bool | None = None
    """Whether the CSV's first line is a header (null: detect it from column names / a non-numeric rating)."""
    min_rating: float | None = None
    """Keep only ratings >= this as positive interactions (null: every rating is an interaction, as the
    interaction counts of BCL Table 9 show)."""
    test_fraction: float = Field(default=0.2, gt=0, lt=1)
    """Share of each user's items held out for testing (0.2: BCL's 4:1 split)."""
    split_seed: int = Field(default=0, ge=0)
    """Seed of the per-user split (fixed, so every run seed is evaluated on the same split)."""
    synthetic: SyntheticSection = Field(default_factory=SyntheticSection)
    """Generator settings of ``dataset=synthetic``."""


class ModelSection(Section):
    """Scoring options beyond the encoder and the sampler."""

    learn_bilinear: bool = False
    """With ``sampler.similarity=bilinear``: train the matrix W of u W iᵀ / t. Off: W stays the identity, so the
    score is the plain dot product u·i / t of MF/LightGCN."""


class TrainSection(Section):
    """Contrastive training over the training interactions."""

    epochs: int = Field(default=100, ge=1)
    """Passes over the training interactions."""
    batch_size: int = Field(default=2048, ge=2)
    """Interactions (anchors) per step; with in-batch negatives each user has B − 1 candidates."""
    max_steps: int | None = Field(default=None, ge=1)
    """Stop after this many steps (null: epochs × steps per epoch)."""
    lr: float = Field(default=1e-3, gt=0)
    """Adam learning rate (LightGCN: 0.001)."""
    weight_decay: float = Field(default=0.0, ge=0)
    """Adam weight decay on the embedding tables."""
    negatives: Literal["in_batch", "sampled", "both"] = "in_batch"
    """Candidate negatives: the batch's other items, ``num_negatives`` uniformly sampled items, or both."""
    num_negatives: int = Field(default=256, ge=1)
    """Items sampled per step (shared by the batch) with ``negatives=sampled`` or ``both``."""
    mask_known_positives: bool = True
    """Mask negatives that are training items of the anchor's user (incl. the same item twice in a batch)."""
    log_every: int = Field(default=20, ge=1)
    """Log the training loss (and the clamp fraction) every this many steps."""


class EvalSection(Section):
    """Top-K evaluation on the test split (training items masked)."""

    ks: list[int] = Field(default_factory=lambda: [5, 10, 20])
    """Cut-offs K of Precision/Recall/NDCG@K (BCL Table 10: 5, 10, 20); must contain 20 (the primary metric)."""
    every_epochs: int = Field(default=10, ge=0)
    """Evaluate every this many epochs for the learning curve (0: only at the end)."""
    batch_users: int = Field(default=1024, ge=1)
    """Users scored at once ([batch_users, items] scores on the device)."""
    at_init: bool = True
    """Also evaluate the untrained model at step 0 (the random-embedding baseline, first point of the curve)."""


class RecsysConfig(TaskConfig):
    """Config of the ``recsys`` plugin: contrastive collaborative filtering with MF/LightGCN and any loss."""

    loss: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="infonce"))
    """Contrastive loss (any unsupervised registered loss); ``loss.tau_plus=from-density`` sets τ⁺ to the
    interaction density (BCL Appendix D)."""
    sampler: ComponentSpec = Field(
        default_factory=lambda: ComponentSpec(name="query_key", similarity="cosine", temperature=0.2))
    """``query_key``: users are queries, items keys; cosine / t (bounded) or bilinear (dot product, W = I)."""
    encoder: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="lightgcn"))
    """User/item encoder: ``mf`` or ``lightgcn``."""
    tau_plus_from_density: bool = False
    """Set loss.tau_plus to the interaction density whenever the loss has τ⁺ and it was not set explicitly."""
    density: Literal["all", "train"] = "all"
    """Which density τ⁺ = from-density uses: ``all`` interactions / (users × items), as BCL Table 9 reports
    it, or the training split's only (0.8× as large with a 4:1 split)."""
    data: DataSection = Field(default_factory=DataSection)
    """Dataset and split."""
    model: ModelSection = Field(default_factory=ModelSection)
    """Scoring options."""
    train: TrainSection = Field(default_factory=TrainSection)
    """Optimisation."""
    eval: EvalSection = Field(default_factory=EvalSection)
    """Evaluation."""
    checkpoint_every: int = Field(default=1000, ge=1)
    """Save a checkpoint every this many training steps; always at the end."""


_SAMPLER = {"name": "query_key", "similarity": "cosine", "temperature": 0.2}

PRESETS: dict[str, dict[str, Any]] = {
    # CPU, seconds: 400 users × 500 items generated, ~10k interactions, LightGCN d = 32, K = 2.
    "smoke": {
        "device": "cpu",
        "sampler": dict(_SAMPLER),
        "encoder": {"name": "lightgcn", "dim": 32, "layers": 2},
        "data": {"dataset": "synthetic"},
        "train": {"epochs": 20, "batch_size": 256, "lr": 0.01, "log_every": 10},
        "eval": {"every_epochs": 5},
        "checkpoint_every": 100,
    },
    # BCL Appendix D on MovieLens-100k (user's files): 4:1 split, P/R/NDCG@5/10/20, τ⁺ from the density.
    # Not in the paper (our choices, see docs/recsys.md): d = 64, K = 3, Adam 1e-3, batch 2048 (LightGCN's
    # settings), t = 0.2, 100 epochs.
    "paper": {
        "sampler": dict(_SAMPLER),
        "encoder": {"name": "lightgcn", "dim": 64, "layers": 3},
        "data": {"dataset": "ml-100k"},
        "tau_plus_from_density": True,
        "train": {"epochs": 100, "batch_size": 2048, "lr": 1e-3},
        "eval": {"every_epochs": 10},
        "checkpoint_every": 1000,
    },
    # The same on MovieLens-1M.
    "paper-ml1m": {
        "sampler": dict(_SAMPLER),
        "encoder": {"name": "lightgcn", "dim": 64, "layers": 3},
        "data": {"dataset": "ml-1m"},
        "tau_plus_from_density": True,
        "train": {"epochs": 100, "batch_size": 2048, "lr": 1e-3},
        "eval": {"every_epochs": 10},
        "checkpoint_every": 2000,
    },
}
"""smoke: generated data on a CPU in seconds. paper / paper-ml1m: BCL Appendix D on MovieLens-100k / -1M."""
