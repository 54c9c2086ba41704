"""The ``pu`` task plugin: PU classifiers with optional contrastive pre-training (puNCE, Acharya et al.).

Pipeline (losses-spec.md §7, §2.5):

1. a PU split of the training set (:mod:`contrastlab.data.pu`) and a class prior (exact, given or estimated
   with Elkan–Noto, :mod:`contrastlab.data.prior`);
2. method ``pretrain_probe``: contrastive pre-training with any registered loss (PU-aware losses get the
   observed labels), then a linear PU classifier (nnPU / uPU / PN) on the frozen encoder, or fine-tuned;
   method ``end_to_end``: the baseline, the same encoder + linear head trained from scratch with the PU risk;
3. accuracy, F1 and ROC-AUC on the clean, fully labeled test set.

The step axis of the logs is: pre-training steps ``1..S_pre``, then classifier steps ``S_pre+1..S_pre+S_clf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

import contrastlab as cl
from contrastlab.data import ImageDataset, load_dataset
from contrastlab.data.augment import AugmentSpec, SimCLRAugment, augment_for, augment_spec_for, prepare
from contrastlab.data.pu import DEFAULT_POSITIVE_CLASSES, PUSplit, check_test_set, make_pu_split
from contrastlab.encoders.heads import ContrastiveModel, ProjectionHead, feature_dim
from contrastlab.evaluation import extract_features
from contrastlab.platform.errors import ConfigError, ContrastlabError
from contrastlab.platform.preflight import check_sampler
from contrastlab.platform.run import Run
from contrastlab.plugins.pu.config import LOSS_PRIOR_KEYS, PRESETS, PUConfig, estimated_seconds, pretrain_share
from contrastlab.plugins.pu.pretrain import is_label_aware, pretrain_loop
from contrastlab.plugins.pu.prior import (
    PUProblem,
    check_pool_prior,
    check_prior_settings,
    fill_loss_prior,
    prior_metrics,
    prior_tags,
    resolve_prior,
)
from contrastlab.plugins.pu.probe import PUData, binary_metrics, classifier_step, linear_head, predict_scores
from contrastlab.plugins.pu.risks import PURisk


def positive_classes(config: PUConfig) -> list[int] | None:
    """The configured positive classes, or the dataset's documented default (``None`` if it has none)."""
    if config.data.positive_classes is not None:
        return list(config.data.positive_classes)
    default = DEFAULT_POSITIVE_CLASSES.get(config.data.dataset)
    return list(default) if default is not None else None


def load_split(
    config: PUConfig, *, with_train: bool = True, download: bool = True
) -> tuple[ImageDataset | None, ImageDataset, PUSplit | None]:
    """Load the (subsampled) train/test sets and build the PU split (errors are one-line ConfigErrors)."""
    d = config.data
    seed = config.seed if d.split_seed is None else d.split_seed
    opts = {"download": download, **d.options}
    test = load_dataset(d.dataset, d.root, split="test", **opts).subset(d.test_size, seed=seed + 1)
    if not with_train:
        return None, test, None
    train = load_dataset(d.dataset, d.root, split="train", **opts).subset(d.train_size, seed=seed)
    classes = positive_classes(config)
    if classes is None:
        raise ConfigError(f"data.positive_classes must be given for dataset '{d.dataset}' (no documented default)")
    n_labeled = None if d.labeled_fraction is not None else d.n_labeled  # a fraction, when set, wins
    split = make_pu_split(train.labels, classes, n_labeled=n_labeled, labeled_fraction=d.labeled_fraction, seed=seed,
                          scenario=d.scenario, num_classes=train.num_classes)
    check_test_set(test.labels, classes, d.test_size)
    return train, test, split


def pretrain_augment_spec(config: PUConfig, train: ImageDataset) -> AugmentSpec:
    """The dataset's SimCLR augmentation for ``train``, with ``pretrain.crop_scale_min`` when it is set."""
    crop = config.pretrain.crop_scale_min
    return augment_spec_for(config.data.dataset, image_size=train.image_size, channels=train.channels,
                            crop_scale=None if crop is None else (crop, 1.0))


def build_encoder(config: PUConfig, channels: int) -> nn.Module:
    """The configured encoder for ``channels``-channel images."""
    return cl.make_encoder(config.encoder.name, in_channels=channels, **config.encoder.hparams())


@dataclass
class _Phases:
    """What the two training phases share (built once by :meth:`PUTask._setup`)."""

    problem: PUProblem
    split: Any
    test: ImageDataset
    spec: Any
    preprocess: Any
    images: Tensor
    encoder: nn.Module
    model: nn.Module
    head: nn.Module
    pre_opt: torch.optim.Optimizer
    state: dict[str, Any] | None
    step: int
    """Global step of the checkpoint resumed from (pre-training steps first), 0 for a new run."""
    e2e: bool
    label_aware: bool
    s_pre: int
    """Pre-training steps (0 for ``end_to_end``)."""
    s_clf: int
    """Classifier steps."""


class PUTask(cl.TaskPlugin[PUConfig]):
    """Positive-unlabeled classification with contrastive pre-training (puNCE, PUCL, any loss) and PU heads."""

    name = "pu"
    description = "PU classifiers: contrastive pre-training (punce, pucl, any loss) + nnPU/uPU/PN linear probe"
    config_model = PUConfig
    presets = PRESETS
    default_preset = "smoke"
    gpu_presets = frozenset({"paper"})
    sampler_inputs = frozenset({"two_views", "multi_views"})
    encoders = frozenset({"resnet18", "resnet50", "small_cnn"})
    # Accuracy on the clean test set is the metric of the puNCE paper's tables (so results compare with it);
    # F1 and ROC-AUC are reported next to it.
    primary_metric = "test/accuracy"
    higher_is_better = True
    checkpoint_on_stop = True  # checkpoints carry the statistics not logged yet; no evaluation between steps

    def label_kinds(self, config: PUConfig) -> frozenset[str]:
        """``{"pu", "class"}`` when the config defines a PU split (positive classes known), else no labels. Given
        but unusable positive classes (an empty list) still count as known, so :meth:`check` names the problem.

        The observed labels are PU-coded (1 = labeled positive, −1 = unlabeled), which is also a valid partial
        class labeling (class 1, or unknown): so class-label losses (``supcon``, the oracle ``unbiased``) can run
        on them, and treat only the labeled positives as same-class.
        """
        return frozenset({"pu", "class"}) if positive_classes(config) is not None else frozenset()

    def prepare_config(self, config: PUConfig, explicit_keys: frozenset[str]) -> PUConfig:
        """Mark the loss's prior hyperparameters not set explicitly for filling from the PU prior."""
        if config.prior.fill_loss and "prior.auto_loss_keys" not in explicit_keys:
            explicit = set(config.loss.hparams())
            keys = LOSS_PRIOR_KEYS.get(config.loss.name, ()) if config.loss.name != "pucl" or config.prior.fill_pucl \
                else ()
            config.prior.auto_loss_keys = [k for k in keys if k not in explicit]
        if config.prior.auto_loss_keys and config.prior.mode != "estimate":
            try:  # show the values actually used in config.yaml
                train, test, split = load_split(config, download=False)
                fill_loss_prior(config, resolve_prior(config, train, test, split))  # type: ignore[arg-type]
            except ContrastlabError:
                pass  # reported by check()/train with its own message
        return config

    def label_hint(self, config: PUConfig, needed: frozenset[str]) -> str | None:
        """Without a PU split there are no observed labels: say which setting makes one."""
        return f"set data.positive_classes for dataset '{config.data.dataset}' to make a PU split"

    def logged_metrics(self, config: PUConfig) -> tuple[str, ...]:
        """Pre-training loss, the classifier's risks (every ``log_every`` steps), the test metrics and the priors (at
        the end; ``prior/estimated`` and ``prior/abs_error`` with ``prior.mode=estimate``)."""
        tests = [f"test/{m}" for m in ("accuracy", "f1", "precision", "recall", "auc")]
        return ("pretrain/loss", "pretrain/labeled_per_batch", "train/clamped_frac", "classifier/risk",
                "classifier/positive_risk", "classifier/negative_risk", "classifier/ascent_fraction", *tests,
                *prior_tags(config))

    def uses_loss(self, config: PUConfig) -> bool:
        """The end-to-end baseline trains no contrastive loss."""
        return config.method != "end_to_end"

    def estimate_seconds(self, config: PUConfig, device: str) -> float | None:
        """Rough wall time from measured per-image encoder costs (:func:`~.config.estimated_seconds`)."""
        return estimated_seconds(config, device)

    def check(self, config: PUConfig) -> None:
        """Refuse bad input before training: label-aware loss without a split, bad prior, bad split, no data."""
        check_prior_settings(config)
        _, _, split = load_split(config)
        assert split is not None
        check_pool_prior(config, split)

    # ------------------------------------------------------------------ training
    def train(self, config: PUConfig, run: Run) -> dict[str, float]:
        """Phase 1: contrastive pre-training (unless ``method=end_to_end``); phase 2: the PU classifier; then the
        clean test metrics. A killed run resumes inside the phase it was in."""
        check_prior_settings(config)
        ctx = self._setup(config, run)
        if not ctx.e2e and ctx.step < ctx.s_pre:
            self._pretrain_phase(config, run, ctx)
        self._classifier_phase(config, run, ctx)
        metrics = self._test_metrics(config, ctx.encoder, ctx.head, ctx.test, ctx.preprocess, run.device)
        metrics.update(prior_metrics(ctx.problem))
        run.log(metrics, ctx.s_pre + ctx.s_clf)  # after the last step, on the global axis
        return metrics

    def _setup(self, config: PUConfig, run: Run) -> _Phases:
        """Data, prior, encoder + projection, the pre-training optimiser and the checkpoint to resume from."""
        dev = run.device
        train, test, split = load_split(config)
        assert train is not None and split is not None  # check_pool_prior ran in the pre-flight (check)
        problem = resolve_prior(config, train, test, split)
        filled = fill_loss_prior(config, problem)
        e2e = config.method == "end_to_end"
        label_aware = not e2e and is_label_aware(config.loss.name)
        run.labels_used = label_aware
        self._record(run, config, problem, filled, label_aware)
        spec = pretrain_augment_spec(config, train)
        encoder = build_encoder(config, train.channels).to(dev)
        dim = feature_dim(encoder)
        projection = ProjectionHead(dim, config.pretrain.projection_hidden, config.pretrain.projection_dim).to(dev)
        model = ContrastiveModel(encoder, projection)
        pre_opt = torch.optim.Adam(model.parameters(), lr=config.pretrain.lr, weight_decay=config.pretrain.weight_decay)
        budget = config.classifier.end_to_end_steps or (config.pretrain.steps + config.classifier.steps)
        state = run.load_checkpoint(map_location=dev)
        if state is not None:
            model.load_state_dict(state["model"])
            if state["phase"] == "pretrain":
                pre_opt.load_state_dict(state["pretrain_opt"])
        with torch.random.fork_rng(devices=[]):  # own init RNG: resuming must not shift the batch sampling
            torch.manual_seed(config.seed + 1)
            head = linear_head(dim, standardize=not e2e).to(dev)
        return _Phases(
            problem=problem, split=split, test=test, spec=spec, preprocess=lambda x: prepare(x, spec),
            images=train.images.to(dev), encoder=encoder, model=model, head=head, pre_opt=pre_opt, state=state,
            step=int(state["step"]) if state else 0, e2e=e2e, label_aware=label_aware,
            s_pre=0 if e2e else config.pretrain.steps, s_clf=budget if e2e else config.classifier.steps,
        )

    def _pretrain_phase(self, config: PUConfig, run: Run, ctx: _Phases) -> None:
        """Contrastive pre-training steps ``ctx.step+1 .. s_pre`` (``pretrain/*`` tags count these steps)."""
        dev = run.device

        def save_pre(at: int, log_window: dict[str, Any]) -> None:
            run.save_checkpoint({"phase": "pretrain", "model": ctx.model.state_dict(),
                                 "pretrain_opt": ctx.pre_opt.state_dict(), "log_window": log_window}, at)

        fed = check_sampler(self, config)  # how to call it (two_views or multi_views), from its contract
        assert fed is not None
        pretrain_loop(
            run=run, model=ctx.model, optimizer=ctx.pre_opt, input_kind=fed,
            loss_fn=cl.make_loss(config.loss.name, **config.loss.hparams()).to(dev),
            sampler=cl.make_sampler(config.sampler.name, embed_dim=config.pretrain.projection_dim,
                                    **config.sampler.hparams()).to(dev),
            augment=SimCLRAugment(ctx.spec).to(dev), images=ctx.images, observed=ctx.split.observed.to(dev),
            label_aware=ctx.label_aware, steps=ctx.s_pre, batch_size=config.pretrain.batch_size,
            start_step=ctx.step, log_every=config.log_every, save=save_pre,
            log_window=ctx.state.get("log_window") if ctx.state is not None else None, share=pretrain_share(config),
        )

    def _classifier_phase(self, config: PUConfig, run: Run, ctx: _Phases) -> None:
        """PU classifier steps; its progress bar counts them from 0, while ``classifier/*`` tags and checkpoints
        use the global step count (pre-training steps first: a resume knows the phase, and drops every row logged
        after its checkpoint)."""
        dev, cc, head, encoder = run.device, config.classifier, ctx.head, ctx.encoder
        frozen = not ctx.e2e and not cc.fine_tune
        if frozen:
            inputs: Tensor = extract_features(encoder, ctx.images, ctx.preprocess, config.eval_batch_size, dev).to(dev)
            head[0].fit(inputs)
            clf: nn.Module = head
            data_pre = None
            params = [{"params": head.parameters(), "lr": cc.lr}]
        else:
            if not ctx.e2e:
                head[0].fit(extract_features(encoder, ctx.images, ctx.preprocess, config.eval_batch_size, dev).to(dev))
            inputs, clf, data_pre = ctx.images, nn.Sequential(encoder, head), ctx.preprocess
            enc_lr = cc.lr if ctx.e2e else cc.fine_tune_lr
            params = [{"params": encoder.parameters(), "lr": enc_lr}, {"params": head.parameters(), "lr": cc.lr}]
        clf_opt = torch.optim.Adam(params, weight_decay=cc.weight_decay)
        ascents = window = 0  # nnPU ascent steps and all steps since the last log
        if ctx.state is not None and ctx.state["phase"] == "classifier":
            head.load_state_dict(ctx.state["head"])
            clf_opt.load_state_dict(ctx.state["clf_opt"])
            ascents, window = ctx.state.get("log_window", (0, 0))
        split = ctx.split
        w = split.n_labeled / (split.n_labeled + split.unlabeled_idx.numel())
        risk = PURisk(cc.risk, prior=ctx.problem.risk_prior, surrogate_name=cc.surrogate, beta=cc.beta,
                      gamma=cc.gamma, labeled_share=w)
        data = PUData(inputs, split.labeled_idx.to(dev), split.unlabeled_idx.to(dev), data_pre)
        start = max(ctx.step, ctx.s_pre) - ctx.s_pre  # classifier steps already done
        clf.train()
        with run.progress(ctx.s_clf, "classifier", initial=start, part=(pretrain_share(config), 1.0)) as bar:
            for cstep in range(start + 1, ctx.s_clf + 1):
                out = classifier_step(clf, clf_opt, risk, data, cc.batch_labeled, cc.batch_unlabeled)
                ascents, window = ascents + int(out.ascent), window + 1
                gstep = ctx.s_pre + cstep  # logs and checkpoints share one axis, so a resume drops what came after
                if cstep % config.log_every == 0 or cstep == ctx.s_clf:
                    run.log({"classifier/risk": float(out.value), "classifier/positive_risk": float(out.positive_risk),
                             "classifier/negative_risk": float(out.negative_risk),
                             "classifier/ascent_fraction": ascents / window}, gstep)  # nnPU rule firing rate
                    ascents = window = 0
                if run.checkpoint_due(gstep) or cstep == ctx.s_clf:
                    run.save_checkpoint({"phase": "classifier", "model": ctx.model.state_dict(),
                                         "head": head.state_dict(), "clf_opt": clf_opt.state_dict(),
                                         "log_window": (ascents, window)}, gstep, final=cstep == ctx.s_clf)
                bar.update(1, risk=f"{float(out.value):.3f}")

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, run: Run, options: cl.EvalOptions) -> dict[str, float]:
        """Test metrics of the latest checkpoint (after the classifier phase)."""
        config = run.config
        state = run.load_checkpoint(map_location=run.device, restore_rng=False)
        if state is None or state.get("phase") != "classifier":
            raise ConfigError(f"run {run.dir} has no trained PU classifier yet; resume it with --resume {run.dir}")
        _, test, _ = load_split(config, with_train=False)
        encoder = build_encoder(config, test.channels).to(run.device)
        dim = feature_dim(encoder)
        model = ContrastiveModel(encoder, ProjectionHead(dim, config.pretrain.projection_hidden,
                                                         config.pretrain.projection_dim)).to(run.device)
        model.load_state_dict(state["model"])
        head = linear_head(dim, standardize=config.method != "end_to_end").to(run.device)
        head.load_state_dict(state["head"])
        spec = augment_for(config.data.dataset, image_size=test.image_size, channels=test.channels).spec
        return self._test_metrics(config, encoder, head, test, lambda x: prepare(x, spec), run.device)

    @staticmethod
    def _test_metrics(config: PUConfig, encoder: nn.Module, head: nn.Module, test: ImageDataset,
                      preprocess: Any, dev: torch.device) -> dict[str, float]:
        classes = positive_classes(config) or []
        y = torch.isin(test.labels, torch.tensor(classes, dtype=torch.long)).long()
        scores = predict_scores(nn.Sequential(encoder, head), test.images, preprocess, config.eval_batch_size, dev)
        return {f"test/{k}": v for k, v in binary_metrics(scores, y).items()}

    @staticmethod
    def _record(run: Run, config: PUConfig, problem: PUProblem, filled: dict[str, float], label_aware: bool) -> None:
        run.record(
            pu_split=problem.split.summary(),
            pu_method=config.method,
            pu_risk=config.classifier.risk,
            pu_prior_mode=config.prior.mode,
            pu_prior_used=problem.pool_prior,
            pu_risk_prior=problem.risk_prior,
            pu_prior_estimate=problem.estimate,
            pu_loss_hparams_from_prior=filled,
            pu_observed_labels_to_loss=label_aware,
            pu_contrastive_pretraining=config.method == "pretrain_probe",
        )
