"""Extending contrastlab without touching the core (issue 14): a new loss and a new task plugin, each in < 40 lines,
registered through the hook exactly as a third-party package would. (A new sampler: tests/samplers/test_contract.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from pydantic import Field
from torch import Tensor
from typer.testing import CliRunner

import contrastlab as cl
from contrastlab.cli import app
from contrastlab.losses import ContrastiveLoss
from contrastlab.testing import fresh_plugin_manager, gaussian_clusters, noisy_views


# ---------------------------------------------------------------- a new loss (the whole of it)
class MarginNCE(ContrastiveLoss):
    """InfoNCE with an additive margin m on the positive logit: softplus(logsumexp_j ℓ_j − (ℓ⁺ − m))."""

    name = "margin_nce"
    description = "InfoNCE with an additive margin on the positive"
    hyperparameters = (cl.HParam("margin", 0.2, "margin m subtracted from ℓ⁺", "[0, inf)", "test", lambda v: v >= 0),)

    def per_anchor(self, batch: cl.ContrastiveBatch) -> Tensor:
        """``[A]`` per-anchor losses."""
        neg = batch.neg_logits.masked_fill(~batch.valid_mask(), float("-inf"))
        return torch.nn.functional.softplus(torch.logsumexp(neg, 1) - batch.pos_logits[:, 0] + self.margin)


# ---------------------------------------------------------------- a new task plugin (the whole of it)
class ClusterConfig(cl.TaskConfig):
    """Contrastive learning of a linear map on Gaussian clusters."""

    steps: int = Field(default=20, ge=1)
    """Training steps."""


class ClusterTask(cl.TaskPlugin[ClusterConfig]):
    """Learns ``W`` so that noisy views of the same point agree; reports the final loss."""

    name, description, config_model = "clusters", "toy: contrastive linear map on clusters", ClusterConfig
    presets = {"smoke": {"sampler": {"name": "two_view"}}}
    sampler_inputs = frozenset({"two_views"})
    primary_metric, higher_is_better = "train/loss", False

    def train(self, config: ClusterConfig, run) -> dict[str, float]:
        """``config.steps`` Adam steps of the configured loss on two noisy views."""
        x, _ = gaussian_clusters(128, 8)
        W = torch.nn.Linear(8, 8)
        opt, loss_fn = torch.optim.Adam(W.parameters(), 0.05), cl.make_loss(config.loss.name, **config.loss.hparams())
        pairs = cl.make_sampler(config.sampler.name, embed_dim=8, **config.sampler.hparams())
        for step in range(1, config.steps + 1):
            v1, v2 = noisy_views(x, generator=torch.Generator().manual_seed(step))
            loss = loss_fn(pairs(W(v1), W(v2)))
            opt.zero_grad(), loss.backward(), opt.step()
            run.log({"train/loss": float(loss.detach())}, step)
        return {"train/loss": float(loss.detach())}


class Package:
    """The hook module of the third-party package."""

    @cl.hookimpl
    def register_losses(self, register) -> None:
        register(MarginNCE)

    @cl.hookimpl
    def register_plugins(self, register) -> None:
        register(ClusterTask)


# ---------------------------------------------------------------- the tests
def test_new_loss_and_new_plugin_train_through_the_cli(tmp_path: Path) -> None:
    with fresh_plugin_manager(Package(), package="toy-extension"):
        assert "margin_nce" in cl.list_losses() and "clusters" in cl.list_plugins()
        result = CliRunner().invoke(app, ["train", "--plugin", "clusters", "--loss", "margin_nce", "--set",
                                          "loss.margin=0.5", "--set", "steps=15", "--logdir", str(tmp_path)])
        assert result.exit_code == 0, result.output
        (summary_path,) = tmp_path.glob("clusters/margin_nce/*/summary.json")
        rows = [json.loads(line) for line in (summary_path.parent / "metrics.jsonl").read_text().splitlines()]
        losses = [r["train/loss"] for r in rows if "train/loss" in r]
        assert len(losses) == 15 and losses[-1] < losses[0]  # it learns
        assert json.loads(summary_path.read_text())["primary_metric"] == "train/loss"
        # the core's checks apply to the new components too: a bad hyperparameter and a label-aware loss
        bad = CliRunner().invoke(app, ["train", "--plugin", "clusters", "--loss", "margin_nce", "--set",
                                       "loss.margin=-1", "--logdir", str(tmp_path / "x")])
        assert bad.exit_code != 0 and "margin" in bad.output and not (tmp_path / "x").exists()
        refused = CliRunner().invoke(app, ["train", "--plugin", "clusters", "--loss", "supcon",
                                           "--logdir", str(tmp_path / "y")])
        assert refused.exit_code != 0 and "labels" in refused.output and not (tmp_path / "y").exists()


def test_new_loss_matches_its_formula() -> None:
    with fresh_plugin_manager(Package(), package="toy-extension"):
        b = cl.make_sampler("two_view", temperature=0.5)(torch.randn(6, 4, dtype=torch.float64),
                                                          torch.randn(6, 4, dtype=torch.float64))
        got = cl.make_loss("margin_nce", margin=0.0, reduction="none")(b)
        torch.testing.assert_close(got, cl.make_loss("infonce", reduction="none")(b))  # m = 0 is InfoNCE
