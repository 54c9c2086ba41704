"""Tests a plugin author writes, using contrastlab.testing."""

from __future__ import annotations

import json
from pathlib import Path

import contrastlab_toy.plugin
import torch

import contrastlab as cl
from contrastlab.testing import fresh_plugin_manager, run_cli


def test_margin_loss_is_zero_when_positive_wins_by_the_margin() -> None:
    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy"):
        loss = cl.make_loss("toy_margin", margin=1.0)
    batch = cl.ContrastiveBatch(
        pos_logits=torch.tensor([[5.0], [0.0]]), neg_logits=torch.tensor([[1.0, 3.0], [0.5, -1.0]])
    )
    # row 0: max(0, 1 + 3 - 5) = 0 ; row 1: max(0, 1 + 0.5 - 0) = 1.5
    assert loss(batch).item() == 0.75


def test_toy_task_trains_with_its_loss(tmp_path: Path) -> None:
    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy"):
        code, out = run_cli(
            [
                "train",
                "--plugin",
                "toy_clusters",
                "--loss",
                "toy_margin",
                "--logdir",
                str(tmp_path),
                "--set",
                "train.steps=150",
            ]
        )
    assert code == 0, out
    summary = json.loads(next(tmp_path.glob("*/*/*/summary.json")).read_text())
    assert summary["metrics"]["eval/nn_accuracy"] > 0.5  # 4 classes: chance is 0.25
