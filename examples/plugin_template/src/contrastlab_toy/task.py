"""``toy_clusters``: contrastive learning of Gaussian clusters with an MLP, evaluated by 1-NN accuracy.

A complete task plugin in one page: typed config with documented fields, presets, label declaration, the
sampler inputs it feeds (two views: any sampler whose contract accepts ``two_views`` works), a training loop with
logging, progress, checkpoints and resume, and evaluation.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import Field

import contrastlab as cl
from contrastlab.platform.run import Run


class DataSection(cl.Section):
    """The synthetic data."""

    samples: int = Field(default=512, ge=8)
    """Number of training points (the test set has the same size)."""
    dim: int = Field(default=16, ge=2)
    """Input dimension."""
    classes: int = Field(default=4, ge=2)
    """Number of clusters (classes)."""
    noise: float = Field(default=0.1, ge=0)
    """Standard deviation of the Gaussian noise that makes the two views."""


class TrainSection(cl.Section):
    """Optimisation."""

    steps: int = Field(default=200, ge=1)
    """Number of gradient steps."""
    batch_size: int = Field(default=64, ge=2)
    """Points per batch (two views each)."""
    lr: float = Field(default=1e-2, gt=0)
    """Adam learning rate."""
    log_every: int = Field(default=20, ge=1)
    """Log the training loss every this many steps."""


class ToyConfig(cl.TaskConfig):
    """Config of the toy_clusters task."""

    data: DataSection = Field(default_factory=DataSection)
    """Synthetic data settings."""
    train: TrainSection = Field(default_factory=TrainSection)
    """Training settings."""


def make_data(cfg: DataSection, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Points around ``classes`` unit centres (fixed by the seed); returns (x, y)."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.nn.functional.normalize(torch.randn(cfg.classes, cfg.dim, generator=gen), dim=1)
    y = torch.randint(cfg.classes, (2 * cfg.samples,), generator=gen)
    x = centres[y] + 0.5 * torch.randn(2 * cfg.samples, cfg.dim, generator=gen) / cfg.dim**0.5
    return x, y


def nearest_neighbour_accuracy(
    train_z: torch.Tensor, train_y: torch.Tensor, test_z: torch.Tensor, test_y: torch.Tensor
) -> float:
    """1-NN accuracy with cosine similarity."""
    sims = torch.nn.functional.normalize(test_z, dim=1) @ torch.nn.functional.normalize(train_z, dim=1).T
    return (train_y[sims.argmax(dim=1)] == test_y).float().mean().item()


class ToyTask(cl.TaskPlugin[ToyConfig]):
    """Contrastive learning of Gaussian clusters (example third-party task plugin)."""

    name = "toy_clusters"
    description = "Tiny synthetic-cluster contrastive task (example third-party plugin)."
    config_model = ToyConfig
    presets: dict[str, dict[str, Any]] = {
        "smoke": {"train": {"steps": 60}},
        "default": {},
    }
    default_preset = "smoke"
    sampler_inputs = frozenset({"two_views"})  # sampler(z1, z2, labels=None): the sampler contract
    primary_metric = "eval/nn_accuracy"

    def label_kinds(self, config: ToyConfig) -> frozenset[str]:
        """Cluster ids are class labels, so supcon/unbiased can run here."""
        return frozenset({"class"})

    def _build(self, config: ToyConfig, run: Run) -> tuple[torch.nn.Module, Any, Any, torch.optim.Optimizer]:
        encoder = cl.make_encoder(config.encoder.name, in_dim=config.data.dim, **config.encoder.hparams())
        embed_dim = encoder.out_dim  # the size of the embeddings the sampler receives
        sampler = cl.make_sampler(config.sampler.name, embed_dim=embed_dim, **config.sampler.hparams())
        loss = cl.make_loss(config.loss.name, **config.loss.hparams())
        params = list(encoder.parameters()) + list(sampler.parameters())
        return encoder.to(run.device), sampler.to(run.device), loss, torch.optim.Adam(params, lr=config.train.lr)

    def train(self, config: ToyConfig, run: Run) -> dict[str, float]:
        """Train the encoder; log the loss; checkpoint; return the final 1-NN accuracy."""
        encoder, sampler, loss_fn, opt = self._build(config, run)
        x, y = make_data(config.data, config.seed)
        x_train, y_train = x[: config.data.samples], y[: config.data.samples]
        use_labels = bool(cl.loss_label_kinds(config.loss.name))
        run.labels_used = use_labels
        start = 0
        state = run.load_checkpoint() if run.resumed else None
        if state is not None:
            encoder.load_state_dict(state["encoder"])
            sampler.load_state_dict(state["sampler"])
            opt.load_state_dict(state["optimizer"])
            start = state["step"]
        with run.progress(config.train.steps, "toy", initial=start) as bar:
            for step in range(start + 1, config.train.steps + 1):
                idx = torch.randint(config.data.samples, (config.train.batch_size,))
                xb = x_train[idx]
                v1 = xb + config.data.noise * torch.randn_like(xb)
                v2 = xb + config.data.noise * torch.randn_like(xb)
                labels = y_train[idx] if use_labels else None
                loss = loss_fn(sampler(encoder(v1), encoder(v2), labels=labels))
                opt.zero_grad()
                loss.backward()
                opt.step()
                bar.update(1, loss=loss.item())
                if step % config.train.log_every == 0:
                    run.log({"train/loss": loss.item()}, step)
                if run.checkpoint_due(step) or step == config.train.steps:
                    run.save_checkpoint(
                        {
                            "encoder": encoder.state_dict(),
                            "sampler": sampler.state_dict(),
                            "optimizer": opt.state_dict(),
                        },
                        step,
                    )
        metrics = self._eval(config, encoder, x, y)
        run.log(metrics, config.train.steps)
        return metrics

    def _eval(self, config: ToyConfig, encoder: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        n = config.data.samples
        with torch.no_grad():
            z = encoder(x)
        return {"eval/nn_accuracy": nearest_neighbour_accuracy(z[:n], y[:n], z[n:], y[n:])}

    def evaluate(self, run: Run, options: cl.EvalOptions) -> dict[str, float]:
        """Reload the latest checkpoint and recompute the 1-NN accuracy."""
        config: ToyConfig = run.config  # type: ignore[assignment]
        encoder, _sampler, _, _ = self._build(config, run)
        state = run.load_checkpoint()
        encoder.load_state_dict(state["encoder"])
        x, y = make_data(config.data, config.seed)
        return self._eval(config, encoder, x, y)
