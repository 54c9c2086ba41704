"""The ``simclr`` task plugin: SimCLR (or MoCo-style queue) pre-training with any registered loss, then linear
evaluation of the frozen encoder. Reproduces the vision experiments of DCL, HCL, BCL, PUCL and DebiasedPos.

Run: ``platform train --plugin simclr --loss dcl --preset smoke``; multi-GPU:
``torchrun --nproc_per_node=K -m contrastlab.cli train --plugin simclr ...`` (see docs/simclr.md).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

import contrastlab as cl
from contrastlab.data.augment import AugmentSpec, augment_spec_for
from contrastlab.data.datasets import ImageDataset, dataset_names, dataset_splits, load_dataset
from contrastlab.losses.floors import clamped_frac_of
from contrastlab.platform.errors import ConfigError, UnknownNameError
from contrastlab.platform.logwindow import LogWindow
from contrastlab.platform.registry import unknown_name_message
from contrastlab.platform.run import Run
from contrastlab.platform.task import ComponentSpec, EvalOptions, TaskPlugin
from contrastlab.plugins.simclr import distributed as D
from contrastlab.plugins.simclr.config import PRESETS, SimCLRConfig
from contrastlab.plugins.simclr.evaluate import evaluate_encoder
from contrastlab.plugins.simclr.trainer import Trainer, build_model, fed_inputs, make_views
from contrastlab.pretraining import TRAIN_IMAGES, seconds_per_image

CLASS_COUNTS = {"fashion_mnist": 10, "cifar10": 10, "cifar100": 100, "stl10": 10, "synthetic": 4}
"""Classes of the built-in datasets (for τ+ = 1/C before any data is loaded)."""


def num_classes_of(config: SimCLRConfig) -> int | None:
    """Class count of the configured dataset without loading it (image folders: count subfolders)."""
    name = config.data.dataset
    if name in CLASS_COUNTS:
        return CLASS_COUNTS[name]
    if name == "image_folder" and config.data.root:
        root = Path(config.data.root).expanduser()
        base = root / "train" if (root / "train").is_dir() else root
        if base.is_dir():
            return sum(1 for p in base.iterdir() if p.is_dir()) or None
    return None


class SimCLRTask(TaskPlugin[SimCLRConfig]):
    """Vision SimCLR with linear evaluation on real offline data, batched GPU augmentation and DDP."""

    name = "simclr"
    description = "Vision SimCLR/MoCo pre-training with any loss + kNN/linear evaluation (Fashion-MNIST, CIFAR, STL)"
    config_model = SimCLRConfig
    presets = PRESETS
    default_preset = "smoke"
    gpu_presets = frozenset({"fmnist", "cifar10-paper"})
    sampler_inputs = frozenset({"two_views", "multi_views", "query_key", "queue"})
    encoders = frozenset({"resnet18", "resnet50", "small_cnn"})
    primary_metric = "eval/linear_top1"
    higher_is_better = True
    checkpoint_on_stop = True  # checkpoints carry the log window; an epoch's end is saved after its kNN check

    def __init__(self) -> None:
        self._cache: dict[tuple, ImageDataset] = {}

    # ------------------------------------------------------------------ config
    def label_kinds(self, config: SimCLRConfig) -> frozenset[str]:
        """``{"class"}`` when ``data.labels: class`` (true labels for supcon / the oracle), else none."""
        return frozenset({"class"}) if config.data.labels == "class" else frozenset()

    def label_hint(self, config: SimCLRConfig, needed: frozenset[str]) -> str | None:
        """PU losses belong to the pu plugin; class-label losses need ``data.labels=class``."""
        if "class" not in needed:
            return "use --plugin pu for PU learning, or an unsupervised loss"
        return f"data.labels={config.data.labels}: set --set data.labels=class (class labels only) or use an " \
               "unsupervised loss"

    def prepare_config(self, config: SimCLRConfig, explicit_keys: frozenset[str]) -> SimCLRConfig:
        """τ+ = 1/C for losses with a ``tau_plus`` hyperparameter unless set; V > 2 switches two_view to
        multi_view (two_view cannot take more than two views)."""
        if config.data.views > 2 and config.sampler.name == "two_view":
            config.sampler = ComponentSpec(name="multi_view", **config.sampler.hparams())
        try:
            hps = {hp.name for hp in cl.registry("loss").get(config.loss.name).hyperparameters}
        except UnknownNameError:
            return config  # reported with the valid names when the components are resolved
        classes = num_classes_of(config)
        if ("tau_plus" in hps and "loss.tau_plus" not in explicit_keys and config.data.tau_plus_from_classes
                and classes):
            config.loss = ComponentSpec(name=config.loss.name, **{**config.loss.hparams(), "tau_plus": 1 / classes})
        return config

    def check(self, config: SimCLRConfig) -> None:
        """Refuse bad input before training: dataset, views, labels, batch size, missing/corrupt data."""
        data = config.data
        if data.dataset not in dataset_names():
            raise ConfigError(unknown_name_message("dataset (data.dataset)", data.dataset, dataset_names()))
        if data.views < 2:
            raise ConfigError(f"data.views={data.views} is invalid; contrastive learning needs >= 2 views")
        if data.train_split not in dataset_splits(data.dataset):  # the loader's message did not name the key
            raise ConfigError(f"data.train_split='{data.train_split}': dataset '{data.dataset}' has the splits "
                              f"{', '.join(dataset_splits(data.dataset))}")
        train = self._dataset(config, data.train_split).subset(data.train_subset, config.seed)
        b = config.train.batch_size
        if len(train) < b:
            raise ConfigError(f"train.batch_size={b} exceeds the {len(train)} training images; "
                              f"lower train.batch_size or raise data.train_subset")
        queue = config.sampler.hparams().get("size")
        stateful = "queue" in cl.registry("sampler").get(config.sampler.name).accepts
        if stateful and isinstance(queue, int) and 0 < queue < b:
            raise ConfigError(f"sampler.size={queue} is smaller than train.batch_size={b}; the queue must hold at "
                              "least one batch of keys")

    def logged_metrics(self, config: SimCLRConfig) -> tuple[str, ...]:
        """``eval/knn_top1`` (every ``eval.knn_every`` epochs and at the end), the linear probe's
        ``eval/linear_*`` (at the end, with ``eval.linear``), and the training scalars."""
        linear = ("eval/linear_top1", "eval/linear_top5", "eval/linear_train_top1") if config.eval.linear else ()
        return ("eval/knn_top1", *linear, "train/loss", "train/lr", "train/images_per_s", "train/epoch",
                "train/clamped_frac")

    def estimate_seconds(self, config: SimCLRConfig, device: str) -> float | None:
        """Rough wall time from per-image costs measured for each encoder (:func:`seconds_per_image`)."""
        size = config.augment.size or augment_spec_for(config.data.dataset, 32).size
        per = seconds_per_image(config.encoder.name, config.encoder.hparams(), device, size)
        n = config.data.train_subset or TRAIN_IMAGES.get(config.data.dataset)
        if per is None or n is None:
            return None
        steps = n // config.train.batch_size * config.train.epochs
        if config.train.max_steps:
            steps = min(steps, config.train.max_steps)
        return steps * config.train.batch_size * config.data.views * per

    # ------------------------------------------------------------------ data
    def _dataset(self, config: SimCLRConfig, split: str) -> ImageDataset:
        d = config.data
        key = (d.dataset, d.root, split, d.image_size)
        if key not in self._cache:
            kwargs = {"image_size": d.image_size} if d.dataset == "image_folder" and d.image_size else {}
            self._cache[key] = load_dataset(d.dataset, root=d.root, split=split, download=d.download, **kwargs)
        return self._cache[key]

    def _splits(self, config: SimCLRConfig) -> tuple[ImageDataset, ImageDataset, ImageDataset]:
        """(contrastive training set, labeled evaluation bank, test set), with the configured subsets."""
        d, seed = config.data, config.seed
        train = self._dataset(config, d.train_split).subset(d.train_subset, seed)
        bank = train if d.train_split == "train" else self._dataset(config, "train").subset(d.train_subset, seed)
        test = self._dataset(config, "test").subset(d.test_subset, seed + 1)
        return train, bank, test

    def augment_spec(self, config: SimCLRConfig, channels: int, image_size: int) -> AugmentSpec:
        """The dataset's augmentation with the config's overrides."""
        a = config.augment
        over = {"size": a.size, "blur_p": a.blur_p, "jitter_p": a.jitter_p, "gray_p": a.gray_p}
        if a.crop_scale_min is not None:
            over["crop_scale"] = (a.crop_scale_min, 1.0)
        return augment_spec_for(config.data.dataset, image_size, channels, **over)

    # ------------------------------------------------------------------ train
    def train(self, config: SimCLRConfig, run: Run) -> dict[str, float]:
        """Pre-train, monitor with kNN, then evaluate with kNN + a linear probe on frozen features."""
        info = D.setup(run.device)
        device = info.device
        train_ds, bank, test = self._splits(config)
        spec = self.augment_spec(config, train_ds.channels, train_ds.image_size)
        from contrastlab.data.augment import SimCLRAugment

        augment = SimCLRAugment(spec)
        trainer = Trainer(config, train_ds.channels, device, distributed=info.distributed)
        run.labels_used = trainer.label_aware
        images = train_ds.images.to(device) if config.data.on_device else train_ds.images
        labels = train_ds.labels.to(device)
        B, V = config.train.batch_size, config.data.views
        per_epoch = len(train_ds) // (B * info.world_size)
        if per_epoch == 0:
            raise ConfigError(f"train.batch_size={B} × {info.world_size} processes exceeds the {len(train_ds)} "
                              "training images")
        total = config.train.epochs * per_epoch
        total = min(total, config.train.max_steps) if config.train.max_steps else total
        step = 0
        metrics: dict[str, float] = {}  # the last logged train/loss and the throughput (kept in checkpoints)
        window = LogWindow()  # per-step loss and clamp fraction since the last log
        state = run.load_checkpoint(map_location=device) if run.resumed else None
        if state is not None:
            trainer.load_state_dict(state["trainer"])
            step = int(state["step"])
            window.load_state_dict(state.get("log_window"), device)
            metrics.update(state.get("train_metrics", {}))  # a resume from the final checkpoint logs no row
        tau_plus = config.loss.hparams().get("tau_plus")
        run.record(dataset=config.data.dataset, num_classes=train_ds.num_classes, train_images=len(train_ds),
                   test_images=len(test), views=V, positive_noise=config.data.positive_noise,
                   label_mode=config.data.labels, world_size=info.world_size, tau_plus=tau_plus,
                   tau_plus_is_one_over_C=tau_plus is not None and math.isclose(tau_plus, 1 / train_ds.num_classes),
                   augment={k: v for k, v in spec.__dict__.items()}, steps=total)
        log_every, seen, t0 = config.train.log_every, 0, time.perf_counter()

        def save(at: int, final: bool = False) -> None:
            run.save_checkpoint({"trainer": trainer.state_dict(), "log_window": window.state_dict(),
                                 "train_metrics": dict(metrics)}, at, final=final)

        with run.progress(total, description="simclr", unit="step", initial=step) as bar:
            while step < total:
                epoch = step // per_epoch
                order = D.epoch_indices(len(train_ds), epoch, info, config.seed)
                for j in range(step - epoch * per_epoch, per_epoch):
                    idx = order[j * B:(j + 1) * B].to(device)
                    g = torch.Generator(device=device).manual_seed((config.seed * 1_000_003 + step) * 64 + info.rank)
                    views = make_views(images, idx, augment, V, config.data.positive_noise, g)
                    loss_value = trainer.step(views, labels[idx], trainer.lr_scale(step, total, per_epoch))
                    window.add("train/loss", loss_value)
                    # fraction of anchors at a debiased loss's floor (DCL/HCL/PUCL/DebiasedPos)
                    window.add("train/clamped_frac", clamped_frac_of(trainer.loss))
                    step, seen = step + 1, seen + B
                    if step % log_every == 0 or step == total:
                        means = window.pop()
                        loss = means.pop("train/loss")
                        rate = seen * info.world_size / max(1e-9, time.perf_counter() - t0)
                        if info.is_main:
                            run.log({"train/loss": loss, "train/lr": trainer.optimizer.param_groups[0]["lr"],
                                     "train/images_per_s": rate, "train/epoch": step / per_epoch, **means}, step)
                        bar.update(step - bar.done, loss=round(loss, 4))
                        metrics["train/loss"] = loss
                    if info.is_main and j < per_epoch - 1 and step < total and run.checkpoint_due(step):
                        save(step)
                    if step >= total:
                        break
                every = config.eval.knn_every
                if every and (epoch + 1) % every == 0 and step < total and info.is_main:
                    m = evaluate_encoder(trainer.model.encoder, bank, test, spec, config.eval, device, False,
                                         config.seed, trainer.autocast)
                    run.log(m, step)
                if info.is_main and step < total and run.checkpoint_due(step):  # after the epoch's evaluation
                    save(step)
                D.barrier(info)
        if seen:  # else resumed from the final checkpoint: the rate it saved
            metrics["train/images_per_s"] = seen * info.world_size / max(1e-9, time.perf_counter() - t0)
        metrics.setdefault("train/images_per_s", 0.0)
        if info.is_main:
            save(step, final=True)
            final = evaluate_encoder(trainer.model.encoder, bank, test, spec, config.eval, device,
                                     config.eval.linear, config.seed, trainer.autocast)
            run.log(final, step)
            metrics.update(final)
        return dict(D.broadcast_from_main(metrics, info))  # type: ignore[call-overload]

    # ------------------------------------------------------------------ eval
    def evaluate(self, run: Run, options: EvalOptions) -> dict[str, float]:
        """kNN + linear evaluation of the latest checkpoint's encoder (``platform eval RUN_DIR``)."""
        config = run.config
        _, bank, test = self._splits(config)
        model = build_model(config, bank.channels).to(run.device)
        state = run.load_checkpoint(map_location=run.device, restore_rng=False)
        if state is None:
            raise ConfigError(f"run {run.dir} has no checkpoint")
        model.load_state_dict(state["trainer"]["model"])
        spec = self.augment_spec(config, bank.channels, bank.image_size)
        autocast = config.model.bf16 and run.device.type == "cuda"
        return evaluate_encoder(model.encoder, bank, test, spec, config.eval, run.device, config.eval.linear,
                                config.seed, autocast)

    def sampler_inputs_for(self, config: SimCLRConfig) -> frozenset[str]:
        """Every input with two views; only ``multi_views`` with ``data.views > 2``."""
        return fed_inputs(config.data.views)
