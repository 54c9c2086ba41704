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


@pytest.mark.parametrize(("layout", "expected"), [
    (["train/a", "train/b", "train/c", "test/a"], 3), (["a", "b"], 2), ([], None), (None, None)])
def test_the_class_count_of_an_image_folder_is_its_class_subfolders(tmp_path, layout, expected) -> None:
    """τ+ = 1/C needs C before loading: an image folder's classes are the subfolders of ``root/train`` (or of
    ``root`` without a train split); none, or no root, gives no count (and no τ+ default) rather than a crash."""
    from contrastlab.plugins.simclr.task import num_classes_of

    sets = ["data.dataset=image_folder"]
    if layout is not None:
        for sub in layout:
            (tmp_path / sub).mkdir(parents=True)
        (tmp_path / "notes.txt").write_text("not a class")
        sets.append(f"data.root={tmp_path}")
    config = resolve_config(SimCLRTask(), preset="smoke", loss="dcl", sets=sets)
    assert num_classes_of(config) == expected
    default = cl.registry("loss").get("dcl").defaults()["tau_plus"]
    assert config.loss.hparams()["tau_plus"] == pytest.approx(1 / expected if expected else default)


def test_linear_accuracy_is_ranked_higher_is_better() -> None:
    assert SimCLRTask().higher_is_better is True


def test_a_batch_as_large_as_the_data_or_the_queue_is_accepted():
    """The bounds are strict: ``train.batch_size`` may equal the training images, ``sampler.size`` the batch."""
    task = SimCLRTask()
    task.check(tiny_config("infonce", "train.batch_size=128", task=task))
    task.check(tiny_config("infonce", "sampler.size=16", sampler="queue", task=task))
    with pytest.raises(cl.ConfigError, match=r"train\.batch_size=129 exceeds the 128 training images"):
        task.check(tiny_config("infonce", "train.batch_size=129", task=task))
    for size in (1, 15):
        with pytest.raises(cl.ConfigError, match=rf"sampler\.size={size} is smaller than train\.batch_size=16"):
            task.check(tiny_config("infonce", f"sampler.size={size}", sampler="queue", task=task))


def test_logged_metrics_name_the_linear_probe_only_when_it_runs():
    task = SimCLRTask()
    linear = {"eval/linear_top1", "eval/linear_top5", "eval/linear_train_top1"}
    assert linear <= set(task.logged_metrics(tiny_config("dcl")))
    off = set(task.logged_metrics(tiny_config("dcl", "eval.linear=false")))
    assert not linear & off and {"eval/knn_top1", "train/loss"} <= off


@pytest.mark.parametrize(("sets", "steps"), [([], 128 // 16 * 3), (["train.max_steps=5"], 5)])
def test_the_time_estimate_is_steps_times_images_per_step_times_the_cost_of_one(monkeypatch, sets, steps):
    """steps = min(⌊n/B⌋ · epochs, max_steps), each of B·V encoded images at the measured per-image cost."""
    from contrastlab.plugins.simclr import task as simclr_task

    seen = []

    def per_image(name, hparams, device, size):
        seen.append(size)
        return 0.5

    monkeypatch.setattr(simclr_task, "seconds_per_image", per_image)
    task = SimCLRTask()
    config = tiny_config("dcl", "train.epochs=3", "data.views=3", *sets, task=task)
    assert task.estimate_seconds(config, "cpu") == pytest.approx(steps * 16 * 3 * 0.5)
    assert seen == [16]  # augment.size


def test_an_unknown_image_count_gives_no_estimate():
    task = SimCLRTask()
    config = tiny_config("dcl", "data.dataset=image_folder", "data.train_subset=null", task=task)
    assert task.estimate_seconds(config, "cpu") is None


def test_the_evaluation_bank_is_the_labeled_train_split_whatever_the_contrastive_split():
    """STL-10 pre-trains on ``unlabeled`` (labels −1): the kNN bank and the linear probe still use ``train``."""
    import torch

    from contrastlab.data.base import ImageDataset

    def fake(split: str, n: int, label: int) -> ImageDataset:
        return ImageDataset(torch.zeros(n, 1, 4, 4, dtype=torch.uint8), torch.full((n,), label), 2, ["a", "b"],
                            "synthetic", split)

    sets = {"train": fake("train", 10, 0), "unlabeled": fake("unlabeled", 30, -1), "test": fake("test", 6, 1)}

    class Fake(SimCLRTask):
        def _dataset(self, config, split):
            return sets[split]

    train, bank, test = Fake()._splits(tiny_config("dcl", "data.train_split=unlabeled", "data.train_subset=null",
                                                   "data.test_subset=null"))
    assert (train.split, bank.split, test.split) == ("unlabeled", "train", "test")
    train, bank, _ = Fake()._splits(tiny_config("dcl", "data.train_subset=null", "data.test_subset=null"))
    assert train is bank is sets["train"]


def test_image_size_reaches_only_the_image_folder_loader(monkeypatch):
    """``data.image_size`` resizes image folders; the fixed-size datasets' loaders never get it."""
    from contrastlab.plugins.simclr import task as simclr_task

    calls = []
    monkeypatch.setattr(simclr_task, "load_dataset", lambda name, **kwargs: calls.append((name, kwargs)))
    for dataset in ("image_folder", "synthetic"):
        config = tiny_config("dcl", f"data.dataset={dataset}", "data.image_size=24", "data.root=/nonexistent")
        SimCLRTask()._dataset(config, "train")
    assert [(n, k.get("image_size")) for n, k in calls] == [("image_folder", 24), ("synthetic", None)]


@pytest.mark.parametrize(("sets", "scale"), [([], 0.08), (["augment.crop_scale_min=0.3"], 0.3)])
def test_the_crop_scale_override_keeps_the_full_image_as_its_top(sets, scale):
    task = SimCLRTask()
    spec = task.augment_spec(tiny_config("dcl", *sets, task=task), 1, 16)
    assert spec.crop_scale == (scale, 1.0) and spec.size == 16
