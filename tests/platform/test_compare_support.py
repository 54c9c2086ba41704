"""Test support for ``platform compare``/``report`` (no tests here).

* A tiny task plugin ``toy`` with its own losses/sampler/encoder, registered through the real hook mechanism, so
  compare can run the real ``platform train`` in subprocesses without depending on the first-party plugins.
  Subprocesses load it through :data:`TOY_BASE` (a ``platform`` command that registers the toy first).
* :func:`write_synthetic_run`: a run directory in the exact on-disk format ``platform train`` writes.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import torch
import yaml
from pydantic import Field

import contrastlab as cl

HERE = Path(__file__).resolve().parent


class ToyPlain(torch.nn.Module):
    """A loss without hyperparameters (stands in for infonce)."""

    name = "toy_plain"
    description = "toy loss without hyperparameters"
    hyperparameters = ()
    label_kinds = frozenset()


class ToyDebiased(torch.nn.Module):
    """A loss with ``tau_plus`` (stands in for dcl)."""

    name = "toy_debiased"
    description = "toy loss with tau_plus"
    hyperparameters = (cl.HParam("tau_plus", 0.1, "class prior", range="[0, 1)", check=lambda v: 0 <= v < 1),)
    label_kinds = frozenset()

    def __init__(self, tau_plus: float = 0.1) -> None:
        super().__init__()
        self.tau_plus = tau_plus


class ToySupervised(torch.nn.Module):
    """A label-aware loss (the toy plugin provides no labels)."""

    name = "toy_supervised"
    description = "toy loss that needs class labels"
    hyperparameters = ()
    label_kinds = frozenset({"class"})


class ToySampler(torch.nn.Module):
    """Placeholder sampler."""

    name = "toy_pairs"
    description = "toy sampler"
    hyperparameters = (cl.HParam("temperature", 0.5, "temperature", range="(0, inf)", check=lambda v: v > 0),)
    accepts = frozenset({"two_views"})

    def __init__(self, temperature: float = 0.5, *, embed_dim: int | None = None) -> None:
        super().__init__()


class ToyEncoder(torch.nn.Module):
    """Placeholder encoder."""

    name = "toy_linear"
    description = "toy encoder"
    hyperparameters = ()


class ToyTrain(cl.Section):
    """Training section of the toy plugin."""

    steps: int = 6
    """Steps to run."""
    fail_seed: int = -1
    """A run with this seed raises at step 3 (tests failure capture)."""


class ToyConfig(cl.TaskConfig):
    """Config of the toy plugin."""

    loss: cl.ComponentSpec = Field(default_factory=lambda: cl.ComponentSpec(name="toy_plain"))
    """Loss."""
    sampler: cl.ComponentSpec = Field(default_factory=lambda: cl.ComponentSpec(name="toy_pairs"))
    """Sampler."""
    encoder: cl.ComponentSpec = Field(default_factory=lambda: cl.ComponentSpec(name="toy_linear"))
    """Encoder."""
    checkpoint_every: int = 2
    """Checkpoint period."""
    train: ToyTrain = Field(default_factory=ToyTrain)
    """Training options."""


def toy_score(seed: int, tau_plus: float, step: int) -> float:
    """The deterministic 'accuracy' the toy plugin reports."""
    return 0.5 + tau_plus + 0.01 * seed + 0.02 * step


class ToyTask(cl.TaskPlugin):
    """Deterministic stand-in task: logs train/loss and eval/score, checkpoints, returns {score, loss}."""

    name = "toy"
    description = "toy task for compare tests"
    config_model = ToyConfig
    presets = {"smoke": {"train": {"steps": 6}}, "tiny": {"train": {"steps": 2}}}
    primary_metric = "score"
    higher_is_better = True

    def train(self, config: Any, run: Any) -> dict[str, float]:
        """Run the toy loop under ``run``."""
        state = run.load_checkpoint()
        start = int(state["step"]) if state else 0
        tau = float(config.loss.hparams().get("tau_plus", 0.0))
        score = 0.0
        for step in range(start + 1, config.train.steps + 1):
            if config.seed == config.train.fail_seed and step == 3:
                raise RuntimeError("toy failure at step 3")
            score = toy_score(config.seed, tau, step)
            run.log({"train/loss": 1.0 / step, "eval/score": score}, step)
            if run.checkpoint_due(step):
                run.save_checkpoint({"score": score}, step)
        return {"score": score, "loss": 1.0 / config.train.steps}


@cl.hookimpl
def register_losses(register: Any) -> None:
    """Toy losses."""
    for cls in (ToyPlain, ToyDebiased, ToySupervised):
        register(cls)


@cl.hookimpl
def register_samplers(register: Any) -> None:
    """Toy sampler."""
    register(ToySampler)


@cl.hookimpl
def register_encoders(register: Any) -> None:
    """Toy encoder."""
    register(ToyEncoder)


@cl.hookimpl
def register_plugins(register: Any) -> None:
    """Toy task."""
    register(ToyTask)


def install() -> None:
    """Register the toy components into the process-wide plugin manager."""
    cl.get_plugin_manager().register_module(sys.modules[__name__], package="toy-test", name="toy_test_plugin")


TOY_BASE = [
    sys.executable,
    "-c",
    f"import sys; sys.path.insert(0, {str(HERE)!r}); import test_compare_support as t; t.install(); "
    "from contrastlab.cli import main; main()",
]
"""A ``platform`` command line that knows the toy plugin (pass as ``base`` to ``run_grid``)."""


def write_synthetic_run(
    root: Path,
    *,
    plugin: str = "toy",
    loss: str = "toy_plain",
    seed: int = 1,
    overrides: list[str] | None = None,
    preset: str = "smoke",
    status: str = "completed",
    final: dict[str, float] | None = None,
    curve: list[float] | None = None,
    error: str | None = None,
    name: str | None = None,
    primary: str = "score",
    events: bool = False,
) -> Path:
    """A run directory in the on-disk format of ``platform train`` (``run.py``)."""
    overrides = overrides or []
    name = name or f"{'_'.join(o.replace('--set ', '') for o in overrides) or 'base'}-s{seed}"
    run_dir = Path(root) / "runs" / plugin / loss / name
    run_dir.mkdir(parents=True, exist_ok=True)
    hp = {
        o.split("=")[0].removeprefix("--set ").split(".")[-1]: float(o.split("=")[1]) for o in overrides if "loss." in o
    }
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"seed": seed, "device": "cpu", "loss": {"name": loss, **hp}}))
    info = {
        "plugin": plugin,
        "loss": loss,
        "seed": seed,
        "preset": preset,
        "overrides": overrides,
        "status": status,
        "error": error,
        "created": "2026-11-21T00:00:00+00:00",
    }
    (run_dir / "run.json").write_text(json.dumps(info))
    curve = curve or []
    with open(run_dir / "metrics.jsonl", "w") as fh:
        for step, value in enumerate(curve, start=1):
            fh.write(json.dumps({"step": step * 10, "wall_time": step * 0.1, "train/loss": 1.0 / step}) + "\n")
            fh.write(json.dumps({"step": step * 10, "wall_time": step * 0.1, f"eval/{primary}": value}) + "\n")
    if events:
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(log_dir=str(run_dir)) as writer:
            for step, value in enumerate(curve, start=1):
                writer.add_scalar(f"eval/{primary}", value, step * 10)
    if status == "completed":
        summary = {
            "plugin": plugin,
            "loss": loss,
            "loss_hparams": hp,
            "seed": seed,
            "preset": preset,
            "metrics": final or {},
            "primary_metric": primary,
            "higher_is_better": True,
            "wall_time_s": 1.5,
            "hardware": {},
            "versions": {},
            "labels_used": False,
        }
        (run_dir / "summary.json").write_text(json.dumps(summary))
    assert not any(math.isnan(v) for v in (final or {}).values())
    return run_dir
