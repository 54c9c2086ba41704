"""The ``graph`` task plugin: unsupervised graph representation learning (GraphCL / InfoGraph style) with any
registered unsupervised loss, evaluated by a cross-validated SVM on the frozen graph embeddings (PUCL Table 2).

Run: ``platform train --plugin graph --loss dcl --preset smoke`` (see docs/graph.md).
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import torch

from contrastlab.data.base import cache_dir
from contrastlab.data.graphs import GraphDataset
from contrastlab.data.synthetic_graphs import write_synthetic_tu
from contrastlab.data.tu import load_tu
from contrastlab.encoders.heads import feature_dim
from contrastlab.evaluation.svm import cross_validated_accuracy
from contrastlab.platform.errors import ConfigError, IncompatibleError
from contrastlab.platform.logwindow import LogWindow
from contrastlab.platform.preflight import unsupervised_losses
from contrastlab.platform.run import Run
from contrastlab.platform.task import EvalOptions, TaskPlugin
from contrastlab.plugins.graph.config import PRESETS, GraphConfig
from contrastlab.plugins.graph.trainer import GraphTrainer, build_model, embed_dataset

SYNTHETIC = "synthetic"
"""``data.name`` of the generated dataset."""
_SECONDS_PER_GRAPH_STEP = {"cpu": 1.5e-4, "cuda": 2e-5}
"""Rough training cost per graph and step (two views), measured on the smoke preset."""
_SECONDS_PER_EVAL_GRAPH = 0.005
"""Rough cost of one cross-validated SVM readout per graph (smoke grid: 5 C values × 3 inner × 10 outer folds)."""


def data_root(config: GraphConfig) -> Path:
    """The folder/archive the TU files are read from (``data.root``, or the cache folder)."""
    return Path(config.data.root).expanduser() if config.data.root else cache_dir("tu")


def load_graphs(config: GraphConfig) -> GraphDataset:
    """The configured dataset: TU files from ``data.root``, or the generated one (written to a temporary folder
    and read back through the same TU loader; deterministic in ``data.synthetic``)."""
    d = config.data
    if d.name == SYNTHETIC:
        s = d.synthetic
        with tempfile.TemporaryDirectory(prefix="contrastlab-graphs-") as tmp:
            write_synthetic_tu(tmp, "SYNTHETIC", num_graphs=s.graphs, seed=s.seed, noise=s.noise,
                               node_labels=s.node_labels)
            data = load_tu("SYNTHETIC", tmp, d.node_features)
        data.name = SYNTHETIC
        return data
    return load_tu(d.name, data_root(config), d.node_features)


def readout_metrics(features: torch.Tensor, data: GraphDataset, config: GraphConfig,
                    suffix: str = "") -> dict[str, float]:
    """``eval/<readout>_acc`` and ``eval/<readout>_acc_std`` (10-fold CV accuracy mean and sd) per readout."""
    e = config.eval
    out: dict[str, float] = {}
    for readout in e.readouts:
        r = cross_validated_accuracy(features, data.labels, readout=readout, folds=e.folds, c_grid=e.c_grid,
                                     inner_folds=e.inner_folds, kernel=e.svm_kernel, standardize=e.standardize,
                                     seed=config.seed)
        out[f"eval/{readout}_acc{suffix}"] = r.mean
        out[f"eval/{readout}_acc_std{suffix}"] = r.std
    return out


def _init_name(tag: str) -> str:
    """``eval/svm_acc`` → ``eval/svm_acc_init``; ``eval/svm_acc_std`` → ``eval/svm_acc_init_std``."""
    return f"{tag[:-4]}_init_std" if tag.endswith("_std") else f"{tag}_init"


def batches_per_epoch(n: int, batch_size: int) -> int:
    """Steps per epoch: ``⌈n / B⌉`` batches, the last one dropped when it would hold a single graph."""
    b = min(batch_size, n)
    full, rest = divmod(n, b)
    return full + (1 if rest >= 2 else 0)


class GraphTask(TaskPlugin[GraphConfig]):
    """Graph contrastive learning (GIN, GraphCL augmentations or InfoGraph local–global pairs) + SVM readout."""

    name = "graph"
    description = "Graph contrastive learning (GraphCL/InfoGraph, GIN) with any loss + 10-fold SVM on TU datasets"
    config_model = GraphConfig
    presets = PRESETS
    default_preset = "smoke"
    sampler_inputs = frozenset({"two_views"})
    encoders = frozenset({"gin"})
    primary_metric = "eval/svm_acc"
    higher_is_better = True
    checkpoint_on_stop = True  # checkpoints carry the log window; an epoch's end is saved after its evaluation

    def __init__(self) -> None:
        self._cache: dict[str, GraphDataset] = {}

    # ------------------------------------------------------------------ config
    def label_kinds(self, config: GraphConfig) -> frozenset[str]:
        """No labels reach the loss: graph labels are used only by the evaluation readout."""
        return frozenset()

    def label_hint(self, config: GraphConfig, needed: frozenset[str]) -> str | None:
        """Why a label-aware loss is refused here, and what to use instead."""
        refused = ("debiased_pos",) if config.model.mode == "infograph" else ()  # see check()
        return ("the graph plugin trains without labels (graph labels are read only by the SVM readout); use an "
                f"unsupervised loss ({', '.join(unsupervised_losses(refused))})")

    def check(self, config: GraphConfig) -> None:
        """Refuse bad input before training: debiased_pos in infograph mode, a readout list without svm, missing or
        unusable data."""
        if config.model.mode == "infograph" and config.loss.name == "debiased_pos":
            raise IncompatibleError("loss 'debiased_pos' cannot run in infograph mode: its positive estimate counts "
                                    "each anchor's similarity with itself, and the anchors (nodes) are never among the "
                                    "candidates (graphs); use model.mode=graphcl, or dcl, hcl, bcl, pucl or infonce")
        if config.data.name == "synthetic" and config.data.root:
            raise ConfigError(f"data.root={config.data.root} is not read: data.name=synthetic generates its data; set "
                              "data.name=<TU dataset name> to read it")
        if config.eval.readouts[0] != "svm":
            raise ConfigError(f"eval.readouts must start with svm (the primary metric eval/svm_acc), got "
                              f"{config.eval.readouts}")
        data = self._data(config)
        counts = torch.bincount(data.labels, minlength=data.num_classes)
        if len(data) < 2 or int(counts.min()) < 2:
            raise ConfigError(f"dataset {data.name} needs >= 2 graphs in every class for cross-validation; "
                              f"class sizes {counts.tolist()}")

    def logged_metrics(self, config: GraphConfig) -> tuple[str, ...]:
        """``eval/<readout>_acc`` and ``_acc_std`` per ``eval.readouts`` (every ``eval.every`` epochs when > 0, and
        at the end), and the training scalars (per-loss statistics left out)."""
        evals = [f"eval/{r}_acc{s}" for r in config.eval.readouts for s in ("", "_std")]
        return (*evals, "train/loss", "train/epoch", "train/graphs_per_s")

    def estimate_seconds(self, config: GraphConfig, device: str) -> float | None:
        """Rough wall time from the measured per-graph costs (generated data; TU data once loaded)."""
        key = self._key(config)
        n = config.data.synthetic.graphs if config.data.name == SYNTHETIC else (
            len(self._cache[key]) if key in self._cache else None)
        if n is None:
            return None
        per = _SECONDS_PER_GRAPH_STEP["cuda" if str(device).startswith("cuda") else "cpu"]
        per_epoch = batches_per_epoch(n, config.train.batch_size)
        steps = config.train.epochs * per_epoch
        if config.train.max_steps:
            steps = min(steps, config.train.max_steps)
        # periodic readouts follow every eval.every-th epoch that ends before the last step (that one: the final)
        epochs_run = -(-steps // per_epoch)
        periodic = max(0, epochs_run - 1) // config.eval.every if config.eval.every else 0
        evals = 1 + int(config.eval.initial) + periodic
        return steps * min(n, config.train.batch_size) * per + evals * n * _SECONDS_PER_EVAL_GRAPH

    # ------------------------------------------------------------------ data
    @staticmethod
    def _key(config: GraphConfig) -> str:
        return config.data.model_dump_json()

    def _data(self, config: GraphConfig) -> GraphDataset:
        key = self._key(config)
        if key not in self._cache:
            self._cache[key] = load_graphs(config)
        return self._cache[key]

    # ------------------------------------------------------------------ training
    def train(self, config: GraphConfig, run: Run) -> dict[str, float]:
        """Contrastive pre-training, with the SVM readout at step 0 (untrained), every ``eval.every`` epochs and
        at the end (the run's pre-flight check has already loaded and checked the data)."""
        data, device = self._data(config), run.device
        trainer = GraphTrainer(config, data.num_features, device)
        run.labels_used = False                      # graph labels reach only the readout, never the loss
        B = min(config.train.batch_size, len(data))
        per_epoch = batches_per_epoch(len(data), B)
        total = config.train.epochs * per_epoch
        total = min(total, config.train.max_steps) if config.train.max_steps else total
        step, init_metrics = 0, {}
        metrics: dict[str, float] = {}  # the last logged train/loss and train/graphs_per_s (kept in checkpoints)
        window = LogWindow()  # per-step loss and loss statistics since the last log
        state = run.load_checkpoint(map_location=device) if run.resumed else None
        if state is not None:
            trainer.load_state_dict(state["trainer"])
            step, init_metrics = int(state["step"]), dict(state.get("init_metrics", {}))
            window.load_state_dict(state.get("log_window"), device)
            metrics.update(state.get("train_metrics", {}))  # a resume from the final checkpoint logs no row
        run.record(dataset=data.stats(), mode=config.model.mode, steps=total, batch_size=B,
                   embedding_dim=feature_dim(trainer.model.encoder),
                   label_use="graph labels are read only by the evaluation readout (frozen embeddings)")
        if step == 0 and config.eval.initial:
            init = self._evaluate(trainer, data, config, device)
            run.log(init, 0)
            init_metrics = {_init_name(k): v for k, v in init.items()}

        def save(at: int, final: bool = False) -> None:
            run.save_checkpoint({"trainer": trainer.state_dict(), "init_metrics": init_metrics,
                                 "log_window": window.state_dict(), "train_metrics": dict(metrics)}, at, final=final)

        seen, t0 = 0, time.perf_counter()
        with run.progress(total, description="graph", unit="step", initial=step) as bar:
            while step < total:
                epoch = step // per_epoch
                order = torch.randperm(len(data), generator=torch.Generator().manual_seed(config.seed * 7919 + epoch))
                for j in range(step - epoch * per_epoch, per_epoch):
                    idx = order[j * B:(j + 1) * B]
                    gen = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
                    loss, last = trainer.step(data.batch(idx), gen)
                    window.add("train/loss", loss)
                    window.add_all(last, prefix="train/")
                    step, seen = step + 1, seen + idx.numel()
                    if step % config.train.log_every == 0 or step == total:
                        means = window.pop()
                        row = {"train/loss": means.pop("train/loss"), "train/epoch": step / per_epoch,
                               "train/graphs_per_s": seen / max(1e-9, time.perf_counter() - t0), **means}
                        run.log(row, step)
                        bar.update(step - bar.done, loss=round(row["train/loss"], 4))
                        # the clamp fraction is summarised by Run.finish (mean of every logged value)
                        metrics.update({k: v for k, v in row.items() if k in ("train/loss", "train/graphs_per_s")})
                    if j < per_epoch - 1 and step < total and run.checkpoint_due(step):
                        save(step)
                    if step >= total:
                        break
                every = config.eval.every
                if every and (epoch + 1) % every == 0 and step < total:
                    run.log(self._evaluate(trainer, data, config, device), step)
                if step < total and run.checkpoint_due(step):  # an epoch's last step: after its evaluation
                    save(step)
        save(step, final=True)
        final = self._evaluate(trainer, data, config, device)
        run.log(final, step)
        metrics.update(final)
        metrics.update(init_metrics)
        return metrics

    @staticmethod
    def _evaluate(trainer: GraphTrainer, data: GraphDataset, config: GraphConfig,
                  device: torch.device) -> dict[str, float]:
        feats = embed_dataset(trainer.model, data, config.eval.batch_size, device)
        return readout_metrics(feats, data, config)

    # ------------------------------------------------------------------ eval
    def evaluate(self, run: Run, options: EvalOptions) -> dict[str, float]:
        """SVM (and logreg) readout of the latest checkpoint's encoder (``platform eval RUN_DIR``)."""
        config = run.config
        data = self._data(config)
        model = build_model(config, data.num_features).to(run.device)
        state = run.load_checkpoint(map_location=run.device, restore_rng=False)
        if state is None:
            raise ConfigError(f"run {run.dir} has no checkpoint")
        model.load_state_dict(state["trainer"]["model"])
        feats = embed_dataset(model, data, config.eval.batch_size, run.device)
        if not math.isfinite(float(feats.abs().sum())):
            raise ConfigError(f"run {run.dir}: the checkpoint's embeddings are not finite")
        return readout_metrics(feats, data, config)
