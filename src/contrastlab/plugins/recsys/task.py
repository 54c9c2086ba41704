"""The ``recsys`` task plugin: contrastive collaborative filtering (BCL Appendix D) with any unsupervised loss.

``platform train --plugin recsys --loss bcl --preset smoke``. Users are anchors, each training interaction's item
is the positive, the other items of the batch (or sampled items) are the candidate negatives; the
``ContrastiveBatch`` comes from the ``query_key`` sampler (:mod:`.pairs`), the encoder is MF or LightGCN
(:mod:`.model`), and the final metrics are Precision/Recall/NDCG@5/10/20 on the per-user 4:1 test split with
training items masked (:mod:`.metrics`). Only interactions reach the loss: they are the data, not labels, so
label-aware losses (``supcon``, ``punce``, ``unbiased``) are refused before training and ``labels_used`` is false.
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch

import contrastlab as cl
from contrastlab.data.base import cache_dir
from contrastlab.platform.errors import ConfigError, ContrastlabError, IncompatibleError, UnknownNameError
from contrastlab.platform.logwindow import LogWindow
from contrastlab.platform.preflight import unsupervised_losses
from contrastlab.platform.registry import suggest
from contrastlab.platform.run import Run
from contrastlab.platform.task import ComponentSpec, EvalOptions, TaskPlugin
from contrastlab.plugins.recsys.config import FROM_DENSITY, PRESETS, RecsysConfig
from contrastlab.plugins.recsys.data import Interactions, load_interactions
from contrastlab.plugins.recsys.metrics import metric_names, popularity_scorer, ranking_metrics
from contrastlab.plugins.recsys.split import Split, split_per_user
from contrastlab.plugins.recsys.trainer import Model, build_model, make_scorer, train_step

TRAIN_SIZES = {"ml-100k": 80_000, "ml-1m": 800_167}
"""Approximate training interactions of the MovieLens sets (BCL Table 9), for the time estimate only."""
_SECONDS_PER_FLOP = {"cpu": 4.5e-10, "cuda": 5e-12}
"""Rough seconds per multiply-add of a step: CPU fitted to the smoke preset and a MovieLens-1M-sized step on a
2-core CPU (≈ 1.1 s per step at batch 2048); the CUDA value is a guess (no GPU was available)."""

REFUSED_LOSSES = {"debiased_pos": "its positive estimate counts each anchor's similarity with itself, and users "
                                  "are never among the candidate items here (docs/recsys.md)"}
"""Losses that run but cannot mean anything in this layout, with the reason (refused before training)."""


def loss_hparam_names(loss: str) -> set[str]:
    """Hyperparameter names of the registered loss ``loss`` (unknown names raise with the valid ones)."""
    return {hp.name for hp in cl.get_plugin_manager().registries["loss"].get(loss).hyperparameters}


def losses_with(hparam: str) -> list[str]:
    """Registered losses that have the hyperparameter ``hparam`` (those this plugin refuses left out)."""
    return sorted(c.name for c in cl.get_plugin_manager().registries["loss"]
                  if c.name not in REFUSED_LOSSES and any(hp.name == hparam for hp in c.hyperparameters))


class RecsysTask(TaskPlugin[RecsysConfig]):
    """Collaborative filtering: MF/LightGCN user and item embeddings trained with any contrastive loss."""

    name = "recsys"
    description = "Recommendation: MF/LightGCN trained with any loss; Precision/Recall/NDCG@K (MovieLens, CSV)"
    config_model = RecsysConfig
    presets = PRESETS
    default_preset = "smoke"
    gpu_presets = frozenset({"paper", "paper-ml1m"})
    sampler_inputs = frozenset({"query_key"})
    encoders = frozenset({"mf", "lightgcn"})
    primary_metric = "eval/ndcg@20"
    higher_is_better = True
    checkpoint_on_stop = True  # checkpoints carry the log window; an epoch's end is saved after its evaluation

    def __init__(self) -> None:
        self._cache: dict[str, tuple[Interactions, Split]] = {}

    # ------------------------------------------------------------------ data
    def problem(self, config: RecsysConfig) -> tuple[Interactions, Split]:
        """The loaded interactions and their split (cached per data section)."""
        key = json.dumps(config.data.model_dump(mode="json"), sort_keys=True)
        if key not in self._cache:
            d = config.data
            data = load_interactions(d.dataset, d.root, min_rating=d.min_rating, csv_header=d.csv_header,
                                     synthetic=d.synthetic.model_dump())
            self._cache = {key: (data, split_per_user(data, d.test_fraction, d.split_seed))}
        return self._cache[key]

    def density(self, config: RecsysConfig) -> float:
        """The interaction density τ⁺ = from-density uses (``config.density``: all interactions or train only)."""
        data, split = self.problem(config)
        return data.density if config.density == "all" else split.train_density

    # ------------------------------------------------------------------ config
    def label_kinds(self, config: RecsysConfig) -> frozenset[str]:
        """None: batches carry interactions only (users and items have no observed classes)."""
        return frozenset()

    def label_hint(self, config: RecsysConfig, needed: frozenset[str]) -> str | None:
        """The unsupervised losses to use instead, those refused here (:data:`REFUSED_LOSSES`) left out."""
        return f"choose an unsupervised loss ({', '.join(unsupervised_losses(REFUSED_LOSSES))})"

    def prepare_config(self, config: RecsysConfig, explicit_keys: frozenset[str]) -> RecsysConfig:
        """Resolve ``loss.tau_plus=from-density`` (and ``tau_plus_from_density``) to the interaction density,
        before the loss's hyperparameters are range-checked; a loss without τ⁺ gets a one-line error."""
        hps = config.loss.hparams()
        asked = isinstance(hps.get("tau_plus"), str) and hps["tau_plus"].strip().lower() in {FROM_DENSITY,
                                                                                           "from_density"}
        try:
            names = loss_hparam_names(config.loss.name)
        except UnknownNameError:
            return config  # reported with the valid names when the components are resolved
        given = hps.get("tau_plus")
        if isinstance(given, str) and not asked and "tau_plus" in names and not _is_number(given):
            raise ConfigError(f"loss.tau_plus={given!r}: give a number or {FROM_DENSITY} (τ⁺ = the interaction "
                              f"density).{suggest(given, [FROM_DENSITY])}")
        if asked and "tau_plus" not in names:
            raise ConfigError(f"loss.tau_plus={FROM_DENSITY}: loss '{config.loss.name}' has no tau_plus "
                              f"hyperparameter; losses with one: {', '.join(losses_with('tau_plus'))}")
        auto = config.tau_plus_from_density and "tau_plus" in names and "loss.tau_plus" not in explicit_keys
        if not (asked or auto):
            return config
        try:
            value = self.density(config)
        except ContrastlabError:
            if asked:
                raise  # the string cannot stay: say why the data could not be read
            return config  # the auto default keeps the loss's default; check() reports the data problem
        if not 0.0 < value < 1.0:
            raise ConfigError(f"loss.tau_plus={FROM_DENSITY}: the density {value:.4g} is not in (0, 1)")
        config.loss = ComponentSpec(name=config.loss.name, **{**hps, "tau_plus": value})
        return config

    def check(self, config: RecsysConfig) -> None:
        """Refuse a loss that cannot work on users vs items, bad cut-offs, missing or malformed data and impossible
        sizes (labels: the core pre-flight)."""
        if config.loss.name in REFUSED_LOSSES:
            raise IncompatibleError(f"plugin 'recsys' cannot use loss '{config.loss.name}': "
                                    f"{REFUSED_LOSSES[config.loss.name]}; use dcl, hcl, bcl, pucl or infonce")
        if config.data.dataset == "synthetic" and config.data.root:
            raise ConfigError(f"data.root={config.data.root} is not read: data.dataset=synthetic generates its "
                              "data; set data.dataset=csv (or ml-100k, ml-1m) to read it")
        ks = config.eval.ks
        if not ks or min(ks) < 1 or 20 not in ks:
            raise ConfigError(f"eval.ks={ks} must be positive cut-offs including 20 (the primary metric "
                              f"{self.primary_metric})")
        if config.data.synthetic.min_per_user > config.data.synthetic.max_per_user:
            raise ConfigError("data.synthetic.min_per_user must be <= data.synthetic.max_per_user")
        _, split = self.problem(config)
        if max(ks) > split.num_items:
            raise ConfigError(f"eval.ks={ks}: K={max(ks)} exceeds the {split.num_items} items")
        if config.train.batch_size > len(split.train):
            raise ConfigError(f"train.batch_size={config.train.batch_size} exceeds the {len(split.train)} "
                              "training interactions; lower train.batch_size")
        if config.train.negatives != "in_batch" and config.train.num_negatives > split.num_items:
            raise ConfigError(f"train.num_negatives={config.train.num_negatives} exceeds the {split.num_items} "
                              "items; lower it")

    def logged_metrics(self, config: RecsysConfig) -> tuple[str, ...]:
        """``eval/<precision|recall|ndcg>@K`` for every ``eval.ks`` (every ``eval.every_epochs`` and at the end),
        and the training scalars."""
        return (*metric_names(config.eval.ks), "train/loss", "train/epoch", "train/clamped_frac")

    def estimate_seconds(self, config: RecsysConfig, device: str) -> float | None:
        """Rough wall time: steps × (logits + graph propagation) multiply-adds × a per-device constant."""
        d, t = config.data, config.train
        n = TRAIN_SIZES.get(d.dataset)
        if d.dataset == "synthetic":
            s = d.synthetic
            n = int(s.users * (s.min_per_user + s.max_per_user) / 2 * (1 - d.test_fraction))
        if n is None:
            return None
        steps = t.epochs * max(1, n // t.batch_size)
        steps = min(steps, t.max_steps) if t.max_steps else steps
        dim = int(config.encoder.hparams().get("dim", 64))
        layers = int(config.encoder.hparams().get("layers", 0))
        keys = t.batch_size + (t.num_negatives if t.negatives != "in_batch" else 0)
        flops = 3 * (keys * keys * dim + 2 * layers * 2 * n * dim)  # forward + backward
        kind = "cuda" if str(device).startswith("cuda") else "cpu"
        return steps * flops * _SECONDS_PER_FLOP[kind]

    # ------------------------------------------------------------------ training
    def train(self, config: RecsysConfig, run: Run) -> dict[str, float]:
        """Contrastive training over the training interactions, periodic and final top-K evaluation."""
        self.check(config)
        dev = run.device
        data, split = self.problem(config)
        model = build_model(config, split, dev)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.train.lr, weight_decay=config.train.weight_decay)
        loss_fn = cl.make_loss(config.loss.name, **config.loss.hparams()).to(dev)
        run.labels_used = False  # interactions are the data; no observed labels ever reach the loss
        t = config.train
        n_train, B = len(split.train), t.batch_size
        per_epoch = max(1, n_train // B)
        total = t.epochs * per_epoch if t.max_steps is None else min(t.epochs * per_epoch, t.max_steps)
        state = run.load_checkpoint(map_location=dev)
        step, baselines = 0, {}
        window = LogWindow()  # per-step loss and clamp fraction since the last log
        if state is not None:
            _load_weights(model, state, run, split)
            optimizer.load_state_dict(state["optimizer"])
            step, baselines = int(state["step"]), dict(state.get("baselines", {}))
            window.load_state_dict(state.get("log_window"), dev)
        # the last logged train/loss (a resume from the final checkpoint logs no row)
        last_loss = float(state.get("train_metrics", {}).get("train/loss", math.nan)) if state else math.nan
        evaluate = lambda: self._metrics(config, model, split, dev)  # noqa: E731
        if state is None:
            baselines["popularity"] = ranking_metrics(popularity_scorer(split, dev), split, config.eval.ks,
                                                      config.eval.batch_users, dev, prefix="")
            if config.eval.at_init:
                init = evaluate()
                run.log(init, 0)
                baselines["init"] = {k.removeprefix("eval/"): v for k, v in init.items()}
        self._record(run, config, data, split, total, baselines)

        users_all, items_all = split.train.users.to(dev), split.train.items.to(dev)
        keys = split.train.keys(split.num_items).to(dev) if t.mask_known_positives else None
        seed = config.seed

        def save(at: int, final: bool = False) -> None:
            run.save_checkpoint({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                 "baselines": baselines, "log_window": window.state_dict(),
                                 "train_metrics": {} if math.isnan(last_loss) else {"train/loss": last_loss}},
                                at, final=final)

        with run.progress(total, description="recsys", unit="step", initial=step) as bar:
            while step < total:
                epoch = step // per_epoch
                order = torch.randperm(n_train, generator=torch.Generator().manual_seed(seed * 2**31 + epoch))
                order = order.to(dev)
                for j in range(step - epoch * per_epoch, per_epoch):
                    idx = order[j * B:(j + 1) * B]
                    sampled = None
                    if t.negatives != "in_batch":  # one uniform draw per step, reproducible on resume
                        g = torch.Generator().manual_seed(seed * 2**31 + 2**30 + step)
                        sampled = torch.randperm(split.num_items, generator=g)[: t.num_negatives].to(dev)
                    out = train_step(model, loss_fn, optimizer, users_all[idx], items_all[idx], sampled,
                                     mode=t.negatives, train_keys=keys, num_items=split.num_items)
                    step += 1
                    window.add("train/loss", out.loss)
                    window.add("train/clamped_frac", out.clamped_frac)
                    if step % t.log_every == 0 or step == total:
                        means = window.pop()
                        last_loss = means.pop("train/loss")
                        run.log({"train/loss": last_loss, "train/epoch": step / per_epoch, **means}, step)
                        bar.update(step - bar.done, loss=round(last_loss, 4))
                    if j < per_epoch - 1 and step < total and run.checkpoint_due(step):
                        save(step)
                    if step >= total:
                        break
                every = config.eval.every_epochs
                if every and (epoch + 1) % every == 0 and step < total:
                    run.log(evaluate(), step)
                if step < total and run.checkpoint_due(step):  # an epoch's last step: after its evaluation
                    save(step)
        if run.latest_checkpoint_step() != step:
            save(step, final=True)
        metrics = evaluate()
        run.log(metrics, step)
        if not math.isnan(last_loss):
            metrics["train/loss"] = last_loss
        return metrics

    # ------------------------------------------------------------------ evaluation
    def _metrics(self, config: RecsysConfig, model: Model, split: Split, dev: torch.device) -> dict[str, float]:
        return ranking_metrics(make_scorer(model), split, config.eval.ks, config.eval.batch_users, dev)

    def evaluate(self, run: Run, options: EvalOptions) -> dict[str, float]:
        """Precision/Recall/NDCG@K of the latest checkpoint on the test split (``platform eval RUN_DIR``)."""
        config = run.config
        state = run.load_checkpoint(map_location=run.device, restore_rng=False)
        if state is None:
            raise ConfigError(f"run {run.dir} has no checkpoint; continue it with --resume {run.dir}")
        _, split = self.problem(config)
        model = build_model(config, split, run.device)
        _load_weights(model, state, run, split)
        return self._metrics(config, model, split, run.device)

    def _record(self, run: Run, config: RecsysConfig, data: Interactions, split: Split, total: int,
                baselines: dict[str, Any]) -> None:
        tau = config.loss.hparams().get("tau_plus")
        density = data.density if config.density == "all" else split.train_density
        run.record(
            split=split.summary(), density_all=data.density, density_train=split.train_density,
            tau_plus=tau, tau_plus_is_density=isinstance(tau, float) and math.isclose(tau, density),
            negatives=config.train.negatives, known_positives_masked=config.train.mask_known_positives,
            score=config.sampler.hparams().get("similarity"), steps=total, baselines=baselines,
            loss_inputs="user-item interactions only (no observed labels)",
        )


def _load_weights(model: Model, state: dict[str, Any], run: Run, split: Split) -> None:
    """Load a checkpoint's weights into ``model``, or say in one line that the data changed since the run trained.

    The embedding tables are sized by the users and items the data gives now; a data file edited since (or read
    another way, e.g. ``007`` and ``7`` as two users) no longer fits the checkpoint, and torch's size-mismatch
    error would be a traceback of every table.
    """
    current = {f"{part}.{key}": value for part, tensors in model.state_dict().items() for key, value in tensors.items()}
    for name, saved in ((f"{p}.{k}", v) for p, tensors in state["model"].items() for k, v in tensors.items()):
        if name in current and tuple(saved.shape) != tuple(current[name].shape):
            where, fix = _data_source(run.config)
            raise ConfigError(
                f"run {run.dir} was trained on other data: its checkpoint's {name} has shape {list(saved.shape)}, "
                f"the data now gives {list(current[name].shape)} ({split.num_users} users, {split.num_items} "
                f"items); {where} changed since the run trained: {fix}")
    model.load_state_dict(state["model"])


def _data_source(config: RecsysConfig) -> tuple[str, str]:
    """Where a run's data came from, and what to do when it no longer matches the run's checkpoint."""
    restore = "restore the data it trained on"
    if config.data.root:
        return f"the file at data.root={config.data.root}", restore
    if config.data.dataset == "synthetic":
        return ("the generated data", "another contrastlab version generates other data; use the one that trained "
                "it, or train a new run")
    return f"the MovieLens files in the cache folder {cache_dir('movielens')}", restore


def _is_number(text: str) -> bool:
    """Whether ``text`` reads as a float (the loss's own range check then judges it)."""
    try:
        float(text)
    except ValueError:
        return False
    return True
