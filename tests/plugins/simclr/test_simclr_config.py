"""simclr config: presets, τ+ = 1/C, views → multi_view, label kinds, and clear errors on bad input."""

from __future__ import annotations

import re

import pytest
from simclr_helpers import tiny_config

import contrastlab as cl
from contrastlab.platform.config import resolve_config
from contrastlab.platform.preflight import check_sampler, preflight
from contrastlab.plugins.simclr import SimCLRTask


def test_registered_with_presets():
    assert "simclr" in cl.list_plugins()
    task = SimCLRTask()
    assert {"smoke", "fmnist", "cifar10-paper"} <= set(task.presets)
    assert task.gpu_presets == {"fmnist", "cifar10-paper"} and task.primary_metric == "eval/linear_top1"
    paper = resolve_config(task, preset="cifar10-paper", loss="dcl")
    assert paper.encoder.name == "resnet50" and paper.train.batch_size == 256 and paper.train.epochs == 400
    assert paper.sampler.hparams()["temperature"] == 0.5 and paper.train.optimizer == "adam"
    assert paper.train.lr == 1e-3 and paper.train.weight_decay == 1e-6
    smoke = resolve_config(task, preset="smoke")
    assert smoke.encoder.name == "small_cnn" and smoke.sampler.name == "two_view" and smoke.device == "cpu"
    assert task.estimate_seconds(smoke, "cpu") < 180 < task.estimate_seconds(paper, "cpu")
    synthetic = resolve_config(task, preset="smoke", sets=["data.dataset=synthetic", "data.train_subset=null"])
    assert task.estimate_seconds(synthetic, "cpu") > 0  # its loader's default size (the ETA was lost once)


@pytest.mark.parametrize(("loss", "dataset", "expected"),
                         [("dcl", "fashion_mnist", 0.1), ("hcl", "cifar100", 0.01), ("bcl", "cifar10", 0.1),
                          ("debiased_pos", "stl10", 0.1)])
def test_tau_plus_defaults_to_one_over_classes(loss, dataset, expected):
    config = resolve_config(SimCLRTask(), preset="smoke", loss=loss, sets=[f"data.dataset={dataset}"])
    assert config.loss.hparams()["tau_plus"] == pytest.approx(expected)


def test_tau_plus_override_and_opt_out():
    task = SimCLRTask()
    assert resolve_config(task, loss="dcl", sets=["loss.tau_plus=0.05"]).loss.hparams()["tau_plus"] == 0.05
    default = cl.registry("loss").get("dcl").defaults()["tau_plus"]
    off = resolve_config(task, loss="dcl", sets=["data.tau_plus_from_classes=false", "data.dataset=cifar100"])
    assert off.loss.hparams()["tau_plus"] == default


def test_views_switch_to_multi_view_and_label_kinds():
    task = SimCLRTask()
    config = tiny_config("dcl", "data.views=4")
    assert config.sampler.name == "multi_view"
    assert task.label_kinds(config) == frozenset()
    assert task.label_kinds(tiny_config("unbiased", "data.labels=class")) == {"class"}


@pytest.mark.parametrize(("sets", "error", "match"), [
    (["data.dataset=imagenet21k"], cl.ConfigError, "cifar10"),
    (["data.views=1"], cl.ConfigError, "data.views"),
    (["train.batch_size=512"], cl.ConfigError, "train.batch_size"),
    (["data.train_split=''"], cl.ConfigError, "data.train_split='': dataset '.*' has the splits"),  # key unnamed
])
def test_bad_input_errors(sets, error, match):
    task = SimCLRTask()
    with pytest.raises(error, match=match):
        task.check(tiny_config("infonce", *sets, task=task))


def test_label_aware_loss_without_labels_is_refused():
    task = SimCLRTask()
    with pytest.raises(cl.IncompatibleError, match=r"data\.labels=class"):
        preflight(task, tiny_config("unbiased", task=task))
    with pytest.raises(cl.IncompatibleError, match="--plugin pu"):
        preflight(task, tiny_config("punce", "data.labels=class", task=task))   # PU labels are not available


def test_two_view_with_more_views_and_small_queue(tmp_path):
    task = SimCLRTask()
    msg = "sampler 'queue' consumes queue, but plugin 'simclr' provides multi_views with this config; " \
          "compatible samplers: multi_view"
    with pytest.raises(cl.IncompatibleError, match=re.escape(msg)):
        check_sampler(task, tiny_config("infonce", "data.views=3", "sampler.name=queue", task=task))
    with pytest.raises(cl.ConfigError, match="queue"):
        task.check(tiny_config("infonce", "sampler.size=8", sampler="queue", task=task))


def test_missing_archive_names_the_file(tmp_path):
    task = SimCLRTask()
    with pytest.raises(cl.DataMissingError, match=r"cifar-10-python\.tar\.gz"):
        task.check(tiny_config("infonce", "data.dataset=cifar10", f"data.root={tmp_path}", task=task))


@pytest.mark.parametrize("key", ["model.head_hidden", "model.proj_dim"])
def test_a_huge_width_is_refused_before_the_run_is_created(key: str) -> None:
    """It was accepted, then failed after the run directory was made (an allocator traceback, a failed run)."""
    with pytest.raises(cl.ConfigError, match=rf"{key}=100000000000: Input should be less than or equal to 65536"):
        resolve_config(SimCLRTask(), preset="smoke", sets=[f"{key}=100000000000"])


@pytest.mark.parametrize(("key", "bound"), [("data.views", 64), ("data.image_size", 1024), ("augment.size", 1024)])
def test_a_huge_view_count_or_image_size_is_refused_before_the_run_is_created(key: str, bound: int) -> None:
    """`--set data.views=100000` or `augment.size=100000` was accepted, then the first batch failed in the allocator
    (a traceback and a failed run)."""
    with pytest.raises(cl.ConfigError, match=rf"{key}=100000: Input should be less than or equal to {bound}"):
        resolve_config(SimCLRTask(), preset="smoke", sets=[f"{key}=100000"])
