"""TensorBoard HPARAMS: the same columns for every run, in the run's own events, no ``hparam/*`` copies."""

from __future__ import annotations

from pathlib import Path

from contrastlab.platform.hparams import NOT_APPLICABLE, hparam_columns
from contrastlab.platform.plugins import PluginManager, registry
from contrastlab.testing import run_cli


def tensorboard_experiment(logdir: Path):
    """The HPARAMS table definition TensorBoard's own backend computes for ``logdir``."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import backend_context

    mux = pem.EventMultiplexer()
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(logdir))
    ctx = backend_context.Context(base_plugin.TBContext(logdir=str(logdir), data_provider=provider, multiplexer=mux))
    request = context.RequestContext()
    metadata = ctx.hparams_metadata(request, "")
    return ctx.experiment_from_metadata(request, "", True, metadata, ctx.hparams_from_data_provider(request, "", 0))


def scalar_tags(run_dir: Path) -> list[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return acc.Tags()["scalars"]


def test_runs_of_different_losses_share_one_table(toy_pm: PluginManager, tmp_path: Path) -> None:
    for loss in ("dcl", "infonce", "toy_margin"):
        code, out = run_cli(
            ["train", "--plugin", "toy_clusters", "--loss", loss, "--logdir", str(tmp_path), "--set", "train.steps=20"]
        )
        assert code == 0, out
    runs = sorted(p for p in tmp_path.glob("*/*/*") if p.is_dir())
    assert len(runs) == 3
    for run in runs:
        assert [p.name for p in run.iterdir() if p.is_dir()] == ["checkpoints"]  # no hparams sub-run
        tags = scalar_tags(run)
        assert "train/loss" in tags and not [t for t in tags if t.startswith("hparam/")]
    experiment = tensorboard_experiment(tmp_path)
    columns = {h.name: h for h in experiment.hparam_infos}
    every_loss_hparam = {f"loss.{hp.name}" for c in registry("loss") for hp in c.hyperparameters}
    assert {"plugin", "loss", "sampler", "seed", "preset"} | every_loss_hparam <= set(columns)
    assert set(columns["loss"].domain_discrete) == {"dcl", "infonce", "toy_margin"}
    assert set(columns["loss.tau_plus"].domain_discrete) == {NOT_APPLICABLE, "0.1"}
    assert set(columns["loss.margin"].domain_discrete) == {NOT_APPLICABLE, "1.0"}
    assert "eval/nn_accuracy" in {m.name.tag for m in experiment.metric_infos}


def test_columns_do_not_depend_on_the_loss(toy_pm: PluginManager) -> None:
    from contrastlab_toy.task import ToyTask

    from contrastlab.platform.config import resolve_config

    task = ToyTask()
    dcl = hparam_columns("toy_clusters", resolve_config(task, loss="dcl"), "smoke")
    infonce = hparam_columns("toy_clusters", resolve_config(task, loss="infonce"), None)
    assert list(dcl) == list(infonce)
    assert dcl["loss.tau_plus"] == 0.1 and infonce["loss.tau_plus"] == NOT_APPLICABLE
    assert infonce["preset"] == NOT_APPLICABLE and dcl["seed"] == 1
