"""The `pu` task plugin end to end on the tiny synthetic dataset: config, bad input, train, resume, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from contrastlab import ConfigError, IncompatibleError
from contrastlab.platform.config import resolve_config
from contrastlab.platform.plugins import registry
from contrastlab.platform.preflight import preflight
from contrastlab.platform.run import Run
from contrastlab.plugins.pu import task as pu_task
from contrastlab.testing import check_stop_and_resume, run_cli

TINY = [
    "data.dataset=synthetic",
    "data.options={size: 192, num_classes: 4, image_size: 12, channels: 1}",
    "data.positive_classes=[0, 1]",
    "data.n_labeled=24",
    "data.train_size=null",
    "data.test_size=null",
    "encoder.width=4",
    "encoder.feature_dim=8",
    "pretrain.steps=4",
    "pretrain.batch_size=16",
    "pretrain.projection_hidden=16",
    "pretrain.projection_dim=8",
    "classifier.steps=6",
    "classifier.batch_labeled=8",
    "classifier.batch_unlabeled=16",
    "log_every=2",
    "checkpoint_every=3",
    "eval_batch_size=64",
]


def _plugin():
    return registry("plugin").get("pu").factory()


def _config(loss: str = "punce", extra: list[str] | None = None):
    return resolve_config(_plugin(), preset="smoke", loss=loss, sets=TINY + (extra or []), device="cpu")


def _train(tmp_path: Path, loss: str = "punce", extra: list[str] | None = None) -> tuple[Run, dict]:
    plugin = _plugin()
    config = _config(loss, extra)
    plugin.check(config)
    run = Run.create(plugin, config, tmp_path)
    summary = run.finish(plugin.train(config, run))
    return run, summary


def test_run_time_estimates_follow_the_work() -> None:
    """smoke is sized for a CPU, paper is not; the classifier counts through the encoder only when it trains it."""
    plugin = _plugin()
    smoke, paper = (resolve_config(plugin, preset=p) for p in ("smoke", "paper"))
    assert plugin.estimate_seconds(smoke, "cpu") < 60 < 3600 < plugin.estimate_seconds(paper, "cpu")
    assert plugin.estimate_seconds(paper, "cuda") < plugin.estimate_seconds(paper, "cpu") / 50
    probe = plugin.estimate_seconds(smoke, "cpu")
    tuned = resolve_config(plugin, preset="smoke", sets=["classifier.fine_tune=true"])
    longer = resolve_config(plugin, preset="smoke", sets=["pretrain.steps=300"])
    assert probe < plugin.estimate_seconds(tuned, "cpu") and probe < plugin.estimate_seconds(longer, "cpu")
    unknown = resolve_config(plugin, preset="smoke", sets=["data.dataset=image_folder", "data.train_size=null"])
    assert plugin.estimate_seconds(unknown, "cpu") is None


def test_only_the_end_to_end_baseline_trains_without_its_loss() -> None:
    plugin = _plugin()
    assert plugin.uses_loss(_config()) and not plugin.uses_loss(_config(extra=["method=end_to_end"]))


def test_config_fills_prior_from_the_split() -> None:
    config = _config("punce")
    # 2 of 4 balanced classes positive: n = 192, n₊ = 96, n_L = 24 → π = 72/168
    assert config.loss.hparams()["prior"] == pytest.approx(72 / 168)
    assert config.prior.auto_loss_keys == ["prior"]
    explicit = _config("punce", ["loss.prior=0.2"])
    assert explicit.loss.hparams()["prior"] == pytest.approx(0.2) and explicit.prior.auto_loss_keys == []
    assert _config("pucl").loss.hparams() == {"alpha": 0.12, "c": 0.1}  # PUCL's own defaults unless asked
    pucl = _config("pucl", ["prior.fill_pucl=true"]).loss.hparams()
    assert pucl["alpha"] == pytest.approx(0.5) and pucl["c"] == pytest.approx(24 / 96)
    assert _plugin().label_kinds(config) >= {"pu"}


@pytest.mark.parametrize(
    ("extra", "error", "match"),
    [
        (["prior.mode=given", "prior.value=1.5"], ConfigError, r"prior.value.*\(0, 1\)"),
        (["prior.mode=given", "prior.value=0"], ConfigError, r"\(0, 1\)"),
        (["prior.mode=given"], ConfigError, "prior.value"),
        (["prior.value=0.3"], ConfigError, "mode=given"),
        (["data.n_labeled=97"], ConfigError, "larger than the number of positives"),
        (["data.labeled_fraction=1.2"], ConfigError, "labeled_fraction"),
        (["data.positive_classes=[]"], ConfigError, "empty"),
        (["data.positive_classes=[0, 1, 2, 3]"], ConfigError, "cover every class"),
        (["data.positive_classes=[0, 7]"], ConfigError, "unknown class"),
        # from a bad-input sweep: a one-class test set trained to the end and reported auc NaN, f1 0
        (["data.test_size=1"], ConfigError, r"data.test_size=1: the test set \(1 example\) has no (positive|negative)"),
    ],
)
def test_bad_input_is_refused_before_training(extra: list[str], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        _plugin().check(_config("infonce", extra))


@pytest.mark.parametrize("loss", ["punce", "supcon", "infonce"])
def test_empty_positive_classes_is_named_for_every_loss(loss: str) -> None:
    # docs/pu.md: an empty data.positive_classes is a ConfigError listing the valid ids. With the plugin's default
    # loss (punce) the label check came first and said "set data.positive_classes ... to make a PU split" instead,
    # to a user who had set it.
    with pytest.raises(ConfigError, match=r"data.positive_classes is empty; give at least one class id in \[0, 4\)"):
        preflight(_plugin(), _config(loss, ["data.positive_classes=[]"]))


@pytest.mark.parametrize("extra", [["data.labeled_fraction=1.0"], ["data.n_labeled=96"]])
def test_labeling_every_positive_is_refused_for_case_control(extra: list[str]) -> None:
    # Every positive labeled leaves a pool without positives: π = (96 − 96)/(n − 96) = 0 and nnPU is undefined.
    # It was accepted, and the run failed only after the whole pre-training phase.
    with pytest.raises(ConfigError, match=r"prior π = 0.*\[1, 95\]"):
        _plugin().check(_config("infonce", extra))
    # the single-training-set risk uses U = the whole set, whose prior α = n₊/n is fine
    _plugin().check(_config("infonce", [*extra, "data.scenario=single_training_set"]))


@pytest.mark.parametrize(("dataset", "extra", "scale"), [
    ("synthetic", [], 0.08), ("fashion_mnist", [], 0.2), ("synthetic", ["pretrain.crop_scale_min=0.3"], 0.3)])
def test_pretraining_uses_the_datasets_simclr_crop_scale(dataset: str, extra: list[str], scale: float) -> None:
    # docs/pu.md: pre-training uses "the dataset's SimCLR augmentation"; a fixed 0.2 replaced CIFAR's 0.08
    from contrastlab.data.datasets import ImageDataset

    config = _config("infonce", [f"data.dataset={dataset}", *extra])
    images = ImageDataset(torch.zeros(2, 1, 28, 28, dtype=torch.uint8), torch.zeros(2, dtype=torch.long), 2,
                          ["a", "b"], dataset, "train")
    assert pu_task.pretrain_augment_spec(config, images).crop_scale == (scale, 1.0)


def test_labeled_fraction_replaces_n_labeled() -> None:
    _, _, split = pu_task.load_split(_config("infonce", ["data.labeled_fraction=0.5"]))
    assert split is not None and split.n_labeled == 48  # half of the 96 positives


def test_label_aware_loss_without_a_pu_split_is_refused() -> None:
    plugin = _plugin()
    config = resolve_config(plugin, preset="smoke", loss="punce", sets=["data.dataset=cifar100"], device="cpu")
    assert plugin.label_kinds(config) == frozenset()
    with pytest.raises(IncompatibleError, match="PU split"):
        preflight(plugin, config)  # the core's one label check, with the plugin's hint


def test_pretrain_probe_smoke_with_punce(tmp_path: Path) -> None:
    run, summary = _train(tmp_path, "punce")
    m = summary["metrics"]
    for key in ("test/accuracy", "test/f1", "test/auc", "prior/true", "prior/used"):
        assert key in m
    assert 0.0 <= m["test/accuracy"] <= 1.0 and 0.0 <= m["test/auc"] <= 1.0
    assert m["prior/used"] == pytest.approx(72 / 168)
    assert summary["labels_used"] is True and summary["pu_observed_labels_to_loss"] is True
    assert summary["pu_split"]["n_labeled"] == 24
    assert summary["primary_metric"] == "test/accuracy"
    rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    tags = {k for r in rows for k in r}
    assert {"pretrain/loss", "classifier/risk", "classifier/negative_risk", "test/accuracy"} <= tags
    # platform eval re-computes the same test metrics from the last checkpoint
    again = _plugin().evaluate(Run.open(run.dir, resume=False), None)  # type: ignore[arg-type]
    assert again["test/accuracy"] == pytest.approx(m["test/accuracy"])


def test_unsupervised_loss_never_sees_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    original = pu_task.pretrain_loop

    def spy(**kwargs):
        seen.append(kwargs["label_aware"])
        return original(**kwargs)

    monkeypatch.setattr(pu_task, "pretrain_loop", spy)
    run, summary = _train(tmp_path, "dcl")
    assert seen == [False] and summary["labels_used"] is False
    # issue 13: the debiased loss's clamp fraction is logged during pre-training and averaged in summary.json
    rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    clamped = [r["train/clamped_frac"] for r in rows if "train/clamped_frac" in r]
    assert clamped and all(0.0 <= v <= 1.0 for v in clamped)
    assert summary["metrics"]["train/clamped_frac"] == pytest.approx(sum(clamped) / len(clamped))


def test_a_pretraining_batch_holds_distinct_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # SimCLR batches hold each image once; drawn with replacement, 64 of 192 images repeat one almost surely,
    # and a repeated image's views were contrasted as negatives of each other.
    distinct: list[bool] = []

    class Spy(pu_task.SimCLRAugment):
        def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
            distinct.append(torch.unique(x.flatten(1), dim=0).shape[0] == x.shape[0])
            return super().forward(x, generator)

    monkeypatch.setattr(pu_task, "SimCLRAugment", Spy)
    _train(tmp_path, "infonce", ["pretrain.batch_size=64"])
    assert len(distinct) == 8 and all(distinct)  # 4 steps × 2 views


def test_multi_views_sampler_pretrains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pu feeds its two views to a sampler that consumes ``multi_views`` as ``[2, B, d]``."""
    seen: list[str] = []
    original = pu_task.pretrain_loop

    def spy(**kwargs):
        seen.append(kwargs["input_kind"])
        return original(**kwargs)

    monkeypatch.setattr(pu_task, "pretrain_loop", spy)
    _, summary = _train(tmp_path, "dcl", ["sampler.name=multi_view", "pretrain.steps=2"])
    assert seen == ["multi_views"] and 0.0 <= summary["metrics"]["test/accuracy"] <= 1.0


def test_end_to_end_baseline_and_estimated_prior(tmp_path: Path) -> None:
    _, summary = _train(tmp_path, "infonce", ["method=end_to_end", "classifier.risk=upu", "prior.mode=estimate",
                                              "prior.estimator_steps=20"])
    m = summary["metrics"]
    assert summary["pu_contrastive_pretraining"] is False and summary["labels_used"] is False
    assert summary["loss_used"] is False  # platform report lists it under the loss "none"
    assert "prior/estimated" in m and m["prior/abs_error"] == pytest.approx(abs(m["prior/estimated"] - 72 / 168))
    assert summary["pu_prior_estimate"]["method"] == "elkan_noto_e1"


@pytest.mark.parametrize("phase", ["pretrain", "classifier"])
def test_resume_reproduces_the_uninterrupted_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str) -> None:
    extra = ["classifier.fine_tune=true"]
    _, full = _train(tmp_path / "a", "punce", extra)
    plugin = _plugin()
    config = _config("punce", extra)
    run = Run.create(plugin, config, tmp_path / "b")
    calls = {"n": 0}

    def interrupt_on_fourth_call(fn):
        def wrapped(*args, **kwargs):
            calls["n"] += 1
            # pre-training step 4 / classifier step 5 (global 9, after the row of global step 8 is logged); the last
            # checkpoint is at step 3 / global step 6
            if calls["n"] == (4 if phase == "pretrain" else 5):
                raise KeyboardInterrupt
            return fn(*args, **kwargs)

        return wrapped

    if phase == "classifier":
        monkeypatch.setattr(pu_task, "classifier_step", interrupt_on_fourth_call(pu_task.classifier_step))
    else:
        make_loss = pu_task.cl.make_loss

        def make_flaky_loss(*args, **kwargs):
            loss = make_loss(*args, **kwargs)
            loss.forward = interrupt_on_fourth_call(loss.forward)
            return loss

        monkeypatch.setattr(pu_task.cl, "make_loss", make_flaky_loss)
    with pytest.raises(KeyboardInterrupt):
        plugin.train(config, run)
    run.mark("interrupted")
    monkeypatch.undo()
    resumed = Run.open(run.dir)
    assert resumed.latest_checkpoint_step() == (3 if phase == "pretrain" else 6)
    summary = resumed.finish(plugin.train(resumed.config, resumed))
    for key in ("test/accuracy", "test/auc", "test/f1"):
        assert summary["metrics"][key] == pytest.approx(full["metrics"][key], abs=1e-6)
    rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "classifier/risk" in r] == [6, 8, 10]  # none logged twice


def test_cli_train_writes_summary(tmp_path: Path) -> None:
    args = ["train", "--plugin", "pu", "--loss", "supcon", "--preset", "smoke", "--device", "cpu",
            "--logdir", str(tmp_path)]
    for item in TINY:
        args += ["--set", item]
    code, out = run_cli(args)
    assert code == 0, out
    summary = json.loads(next(tmp_path.glob("pu/supcon/*/summary.json")).read_text())
    assert summary["labels_used"] is True
    assert torch.isfinite(torch.tensor(summary["metrics"]["test/accuracy"]))


def test_both_phases_log_on_the_checkpoints_axis(tmp_path: Path) -> None:
    """Pre-training logs steps 1..pretrain.steps, the classifier continues at 5..10: the axis of the checkpoints,
    so that a resume drops exactly the rows logged after its checkpoint."""
    run, _ = _train(tmp_path, "dcl")
    rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "pretrain/loss" in r] == [2, 4]  # pretrain.steps=4, log_every=2
    # classifier.steps=6 after the 4 pre-training steps, on one axis with the checkpoints
    assert [r["step"] for r in rows if "classifier/risk" in r] == [6, 8, 10]
    assert [r["step"] for r in rows if "test/accuracy" in r] == [10]
    # checkpoints keep one global count (4 pre-training + 6 classifier steps), so a resume knows the phase
    assert run.latest_checkpoint_step() == 10


@pytest.mark.parametrize("step", [3, 7])
def test_a_stopped_run_saves_where_it_stopped_and_resumes_as_if_never_stopped(tmp_path: Path, step: int,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM between two logs of pre-training (step 3; the clamp fraction of step 3 is pending) or of the
    classifier (global step 7 = classifier step 3; its nnPU ascent count is pending): the same rows and metrics as
    a run never stopped. The tiny run never clamps or ascends, so both statistics are replaced by values that
    vary from step to step (a function of that step's loss, the same in every run) to make a lost one show."""
    import dataclasses

    make_loss, classifier_step = pu_task.cl.make_loss, pu_task.classifier_step

    def loss_with_a_varying_clamp(*args, **kwargs):
        loss = make_loss(*args, **kwargs)
        forward = loss.forward

        def wrapped(*a, **k):
            value = forward(*a, **k)
            loss.last_stats = {"clamped_frac": (value.detach() * 1000) % 1}
            return value

        loss.forward = wrapped
        return loss

    def step_with_varying_ascents(*args, **kwargs):
        out = classifier_step(*args, **kwargs)
        return dataclasses.replace(out, ascent=float(out.value * 1000) % 1 > 0.5)

    monkeypatch.setattr(pu_task.cl, "make_loss", loss_with_a_varying_clamp)
    monkeypatch.setattr(pu_task, "classifier_step", step_with_varying_ascents)
    sets = [*(s for s in TINY if not s.startswith("checkpoint_every")), "checkpoint_every=100"]
    args = ["--loss", "pucl", *(a for s in sets for a in ("--set", s))]
    stopped, _ = check_stop_and_resume("pu", args, tmp_path, step)
    rows = [json.loads(line) for line in (stopped / "metrics.jsonl").read_text().splitlines()]
    clamped = [r["train/clamped_frac"] for r in rows if "train/clamped_frac" in r]
    ascents = [r["classifier/ascent_fraction"] for r in rows if "classifier/ascent_fraction" in r]
    assert len(clamped) == 2 and len(ascents) == 3 and any(0 < v < 1 for v in clamped + ascents)


@pytest.mark.parametrize("extra", [["classifier.fine_tune=true"], [], ["method=end_to_end"]],
                         ids=["fine_tune", "probe", "end_to_end"])
def test_run_json_progress_spans_both_phases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             extra: list[str]) -> None:
    """``run.json``'s ``progress`` (compare's ETA for a run to resume) is the part of the whole run done: it never
    falls. It was the latest bar's part, so the classifier phase started again near 0 (a run past pre-training
    counted as almost a whole run still to do)."""
    seen: list[float] = []
    save = Run.save_checkpoint

    def recording(self: Run, *args, **kwargs):
        out = save(self, *args, **kwargs)
        seen.append(json.loads(self.rundir.run_json.read_text())["progress"])
        return out

    monkeypatch.setattr(Run, "save_checkpoint", recording)
    _train(tmp_path, extra=extra)
    assert len(seen) >= 3 and seen == sorted(seen) and seen[-1] > 0.8, seen
    share = pu_task.pretrain_share(_config(extra=extra))
    assert share == (0.0 if extra == ["method=end_to_end"] else 1.0 if not extra else pytest.approx(128 / 272))


@pytest.mark.parametrize("mode", ["exact", "estimate"])
def test_logged_metrics_names_every_tag_a_run_logs(tmp_path: Path, mode: str) -> None:
    """``logged_metrics`` (what ``platform tune --prune-on`` accepts) includes every tag in metrics.jsonl, the
    end-of-run ``prior/*`` ones too (they were missing); the two prior modes log different sets."""
    run, _ = _train(tmp_path, extra=[f"prior.mode={mode}"])
    rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    logged = {key for row in rows for key in row if "/" in key}
    assert {"prior/true", "prior/used", "prior/risk"} <= logged
    assert logged <= set(_plugin().logged_metrics(run.config))


def test_accuracy_is_ranked_higher_is_better() -> None:
    """compare/tune rank runs by the primary metric: a higher test accuracy is the better run."""
    plugin = _plugin()
    assert plugin.primary_metric == "test/accuracy" and plugin.higher_is_better is True


def test_the_loss_prior_is_filled_only_when_asked() -> None:
    """``prior.fill_loss=false`` leaves punce's own prior and marks no key as filled; auto keys given explicitly
    (as config.yaml does on a re-resolve) are kept, not recomputed."""
    own = pu_task.cl.registry("loss").get("punce").defaults()["prior"]
    assert own != pytest.approx(72 / 168)  # the split's π, filled by default
    off = _config("punce", ["prior.fill_loss=false"])
    assert off.prior.auto_loss_keys == [] and off.loss.hparams()["prior"] == pytest.approx(own)
    kept = _config("punce", ["prior.auto_loss_keys=[]"])
    assert kept.prior.auto_loss_keys == [] and kept.loss.hparams()["prior"] == pytest.approx(own)


def test_check_downloads_the_data_but_config_resolution_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolving a config only peeks at data already on disk; the pre-flight check fetches a missing dataset."""
    asked: list[bool] = []
    original = pu_task.load_dataset

    def spy(*args, **kwargs):
        asked.append(kwargs["download"])
        return original(*args, **kwargs)

    monkeypatch.setattr(pu_task, "load_dataset", spy)
    config = _config("punce")
    assert asked and not any(asked)
    asked.clear()
    _plugin().check(config)
    assert asked and all(asked)


@pytest.mark.parametrize("extra", [[], ["classifier.fine_tune=true"], ["method=end_to_end"]],
                         ids=["probe", "fine_tune", "end_to_end"])
def test_the_classifier_trains_what_the_method_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    extra: list[str]) -> None:
    """docs/pu.md: the probe trains only the linear head on frozen, standardised features; ``fine_tune`` trains
    the encoder too at ``classifier.fine_tune_lr``; the end-to-end baseline trains encoder and head at
    ``classifier.lr``, without standardisation. Every step uses the split's risk prior."""
    encoders: list[torch.nn.Module] = []
    steps: list[tuple] = []
    build, step = pu_task.build_encoder, pu_task.classifier_step

    def build_spy(*args, **kwargs):
        encoders.append(build(*args, **kwargs))
        return encoders[-1]

    def step_spy(model, optimizer, risk, data, *args):
        steps.append((model, [(set(map(id, g["params"])), g["lr"]) for g in optimizer.param_groups], risk, data))
        return step(model, optimizer, risk, data, *args)

    monkeypatch.setattr(pu_task, "build_encoder", build_spy)
    monkeypatch.setattr(pu_task, "classifier_step", step_spy)
    run, _ = _train(tmp_path, "infonce", [*extra, "classifier.lr=0.01", "classifier.fine_tune_lr=0.002"])
    assert run.latest_checkpoint_step() == 10  # 4 + 6 steps, or the baseline's budget of 10 from step 0
    (encoder,) = encoders
    enc = set(map(id, encoder.parameters()))
    model, groups, risk, data = steps[0]
    head = model if not extra else model[1]
    assert set(map(id, head.parameters())) and len(steps) == (10 if extra == ["method=end_to_end"] else 6)
    if not extra:
        assert groups == [(set(map(id, model.parameters())), 0.01)] and not enc & groups[0][0]
        assert data.preprocess is None and data.inputs.dtype == torch.float32 and data.inputs.shape == (192, 8)
    else:
        assert model[0] is encoder and data.inputs.dtype == torch.uint8
        assert groups == [(enc, 0.002 if extra == ["classifier.fine_tune=true"] else 0.01),
                          (set(map(id, head.parameters())), 0.01)]
    standardized = isinstance(head[0], pu_task.nn.Identity) is False
    assert standardized == (extra != ["method=end_to_end"])
    assert risk.kind == "nnpu" and risk.prior == pytest.approx(72 / 168)


def test_the_ascent_fraction_is_the_share_of_ascent_steps_since_the_last_log(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``classifier/ascent_fraction`` is (nnPU ascent steps)/(steps) over each log window of 2 steps."""
    import dataclasses

    pattern = iter([True, False, True, True, False, False])
    step = pu_task.classifier_step

    def scripted(*args, **kwargs):
        return dataclasses.replace(step(*args, **kwargs), ascent=next(pattern))

    monkeypatch.setattr(pu_task, "classifier_step", scripted)
    run, _ = _train(tmp_path, "infonce")
    rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["classifier/ascent_fraction"] for r in rows if "classifier/ascent_fraction" in r] == [0.5, 1.0, 0.0]


def test_eval_of_a_run_without_a_trained_classifier_is_a_config_error(tmp_path: Path) -> None:
    """``platform eval`` on a run with no checkpoint, or one stopped during pre-training, names the fix."""
    plugin = _plugin()
    run = Run.create(plugin, _config("infonce"), tmp_path)
    with pytest.raises(ConfigError, match="no trained PU classifier yet"):
        plugin.evaluate(run, None)  # type: ignore[arg-type]
    run.save_checkpoint({"phase": "pretrain", "model": {}, "pretrain_opt": {}, "log_window": None}, 2)
    with pytest.raises(ConfigError, match="no trained PU classifier yet"):
        plugin.evaluate(run, None)  # type: ignore[arg-type]


def test_the_progress_at_each_checkpoint_is_the_share_of_steps_done(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """End-to-end baseline (one phase of 10 classifier steps): the checkpoint at step g records a progress
    between (g − 1)/10 and g/10, never above 1."""
    seen: list[tuple[int, float]] = []
    save = Run.save_checkpoint

    def recording(self: Run, state, step, **kwargs):
        out = save(self, state, step, **kwargs)
        seen.append((step, json.loads(self.rundir.run_json.read_text())["progress"]))
        return out

    monkeypatch.setattr(Run, "save_checkpoint", recording)
    _train(tmp_path, extra=["method=end_to_end"])
    assert [g for g, _ in seen] == [3, 6, 9, 10]
    assert all((g - 1) / 10 - 1e-9 <= p <= g / 10 + 1e-9 for g, p in seen), seen


def test_an_estimated_prior_is_not_estimated_while_resolving_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Elkan–Noto estimate trains a classifier: it is made once, by the run, not also to fill config.yaml."""
    calls: list[str] = []
    original = pu_task.resolve_prior

    def spy(config, *args):
        calls.append(config.prior.mode)
        return original(config, *args)

    monkeypatch.setattr(pu_task, "resolve_prior", spy)
    config = _config("punce", ["prior.mode=estimate", "prior.estimator_steps=5"])
    assert calls == [] and config.prior.auto_loss_keys == ["prior"]
    assert _config("punce").loss.hparams()["prior"] == pytest.approx(72 / 168) and calls == ["exact"]
