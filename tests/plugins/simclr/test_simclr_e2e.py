"""End-to-end simclr runs: synthetic data (fast) and the Fashion-MNIST smoke setting (slow, real data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from simclr_helpers import TINY, tiny_config
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from contrastlab.platform.run import Run
from contrastlab.platform.task import EvalOptions
from contrastlab.plugins.simclr import SimCLRTask
from contrastlab.testing import check_stop_and_resume

FMNIST = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")


def _train(tmp_path, config, task=None):
    task = task or SimCLRTask()
    task.check(config)
    run = Run.create(task, config, tmp_path)
    summary = run.finish(task.train(config, run))
    return run, summary


def test_synthetic_run_learns_logs_and_evaluates(tmp_path):
    config = tiny_config("dcl", "train.epochs=6", "data.train_subset=256", "eval.knn_every=3",
                         "eval.linear_epochs=40", "checkpoint_every=20")
    run, summary = _train(tmp_path, config)
    m = summary["metrics"]
    assert m["eval/linear_top1"] > 0.5 and m["eval/knn_top1"] > 0.4         # 4 classes: chance 0.25
    assert summary["labels_used"] is False and summary["tau_plus"] == pytest.approx(0.25)
    assert summary["primary_metric"] == "eval/linear_top1"
    rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    assert any("train/loss" in r for r in rows) and any("eval/knn_top1" in r for r in rows)
    assert list(run.dir.glob("events.out.tfevents.*"))
    # issue 13: the debiased loss's clamp fraction reaches metrics.jsonl, TensorBoard and summary.json
    clamped = [r["train/clamped_frac"] for r in rows if "train/clamped_frac" in r]
    assert clamped and all(0.0 <= v <= 1.0 for v in clamped)
    assert m["train/clamped_frac"] == pytest.approx(sum(clamped) / len(clamped))
    acc = EventAccumulator(str(run.dir)).Reload()
    assert len(acc.Scalars("train/clamped_frac")) == len(clamped)
    again = SimCLRTask().evaluate(Run.open(run.dir, resume=False), EvalOptions())
    assert again["eval/knn_top1"] == pytest.approx(m["eval/knn_top1"])      # same checkpoint, same features


def test_resume_continues_from_checkpoint(tmp_path):
    config = tiny_config("infonce", "train.max_steps=6", "checkpoint_every=4", "eval.linear=false",
                         "train.log_every=1")
    task = SimCLRTask()
    run = Run.create(task, config, tmp_path)
    task.train(config, run)
    run.close()
    (run.dir / "checkpoints" / "step_000000000006.pt").unlink()               # pretend it died after step 4
    resumed = Run.open(run.dir)
    assert resumed.latest_checkpoint_step() == 4
    metrics = task.train(resumed.config, resumed)
    steps = [json.loads(line)["step"] for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    train_steps = [s for s in steps if s < 6]
    assert train_steps == [1, 2, 3, 4, 5] and max(steps) == 6 and "train/loss" in metrics


def test_oracle_unbiased_loss_uses_true_labels(tmp_path):
    config = tiny_config("unbiased", "data.labels=class", "train.max_steps=3", "eval.linear=false")
    _, summary = _train(tmp_path, config)
    assert summary["labels_used"] is True and summary["label_mode"] == "class"


def test_positive_noise_and_views_are_recorded(tmp_path):
    config = tiny_config("debiased_pos", "data.views=3", "data.positive_noise=0.3", "train.max_steps=2",
                         "eval.linear=false")
    _, summary = _train(tmp_path, config)
    assert summary["views"] == 3 and summary["positive_noise"] == 0.3 and summary["sampler"] == "multi_view"


@pytest.mark.slow
@pytest.mark.skipif(not FMNIST.exists(), reason="apt-get install -y dataset-fashion-mnist")
def test_fashion_mnist_smoke_beats_chance(tmp_path):
    from contrastlab.platform.config import resolve_config

    task = SimCLRTask()
    config = resolve_config(task, preset="smoke", loss="infonce",
                            sets=["data.train_subset=2048", "data.test_subset=1000", "train.epochs=2",
                                  "eval.knn_every=0", "eval.linear_epochs=20"])
    _, summary = _train(tmp_path, config, task)
    assert summary["metrics"]["eval/linear_top1"] > 0.4                      # 10 classes: chance 0.1


def test_same_seed_same_metrics_on_cpu(tmp_path):
    config = tiny_config("hcl", "train.max_steps=4", "eval.linear_epochs=3")
    _, first = _train(tmp_path / "a", config)
    _, second = _train(tmp_path / "b", tiny_config("hcl", "train.max_steps=4", "eval.linear_epochs=3"))
    drop = {"train/images_per_s"}
    assert {k: v for k, v in first["metrics"].items() if k not in drop} == \
        {k: v for k, v in second["metrics"].items() if k not in drop}


def test_trains_on_a_fake_cifar10_archive(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "data"))
    from fake_archives import write_cifar

    write_cifar(tmp_path, per_batch=8)
    config = tiny_config("bcl", "data.dataset=cifar10", f"data.root={tmp_path}", "data.train_subset=40",
                         "data.test_subset=8", "train.max_steps=2", "eval.linear_epochs=2", "augment.size=32")
    _, summary = _train(tmp_path / "runs", config)
    assert summary["num_classes"] == 10 and summary["train_images"] == 40
    assert summary["tau_plus"] == pytest.approx(0.1) and 0 <= summary["metrics"]["eval/linear_top1"] <= 1


@pytest.mark.parametrize(("step", "when"), [(6, "checkpoint_due"), (8, "log")])
def test_a_stopped_run_saves_where_it_stopped_and_resumes_as_if_never_stopped(tmp_path, step, when):
    """SIGTERM mid-way through a logging window (step 6; logs every 4), or during an epoch's last step (8 of 8; the
    epoch's kNN check then runs before the stop's checkpoint): the same rows and metrics as a run never stopped."""
    sets = [*TINY, "train.epochs=2", "eval.knn_every=1", "train.log_every=4", "checkpoint_every=100"]
    args = ["--loss", "dcl", *(a for s in sets for a in ("--set", s))]
    stopped, resumed = check_stop_and_resume("simclr", args, tmp_path, step, when)
    rows = [json.loads(line) for line in (stopped / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "eval/knn_top1" in r] == [8, 16]
    assert [r["step"] for r in rows if "train/clamped_frac" in r] == [4, 8, 12, 16]
    shown = [int(line.split()[1].split("/")[0]) for line in resumed.splitlines() if line.startswith("simclr ")]
    assert shown == [r["step"] for r in rows if "train/loss" in r and r["step"] > step]  # steps, counted once


def test_a_resume_from_the_final_checkpoint_keeps_the_training_metrics(tmp_path: Path, resume_from_final) -> None:
    """Killed during the final evaluation (no summary yet): the resumed summary equals the uninterrupted one,
    train/loss and the throughput included (not a rate of 0 from no images seen)."""
    sets = [*TINY, "train.max_steps=4", "checkpoint_every=2", "eval.linear=false"]
    args = ["--loss", "dcl", "--preset", "smoke", *(a for s in sets for a in ("--set", s))]
    before, after = resume_from_final("simclr", args, tmp_path)
    assert {"train/loss", "train/images_per_s", "train/clamped_frac"} <= set(before)
    assert before["train/images_per_s"] > 0
    assert after == before


def test_a_runs_rows_follow_its_schedule(tmp_path, monkeypatch):
    """4 epochs of 8 steps (128 images, batch 16), logs every 4 steps, kNN every 3 epochs: train rows at 4, 8, ..,
    32 with ``train/epoch`` = step/8; kNN after epoch 3 (step 24) and at the end (32, not twice); the throughput
    is images seen / elapsed time since the start (a fake clock: one second per reading)."""
    import types

    from contrastlab.plugins.simclr import task as simclr_task

    clock = iter(range(100, 1000))
    monkeypatch.setattr(simclr_task, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))
    config = tiny_config("dcl", "train.epochs=4", "eval.knn_every=3", "train.log_every=4", "eval.linear=false",
                         "checkpoint_every=100")
    run, summary = _train(tmp_path, config)
    rows = [json.loads(line) for line in (run.dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if "train/loss" in r]
    assert [r["step"] for r in train] == [4 * k for k in range(1, 9)]
    assert [r["train/epoch"] for r in train] == [r["step"] / 8 for r in train]
    assert [r["train/images_per_s"] for r in train] == [64.0] * 8  # 64 more images per one-second reading
    assert [r["step"] for r in rows if "eval/knn_top1" in r] == [24, 32]
    assert not any("eval/linear_top1" in r for r in rows)  # eval.linear=false: no probe, mid-run or at the end
    m = summary["metrics"]
    assert m["train/images_per_s"] == pytest.approx(512 / 9) and m["train/loss"] == train[-1]["train/loss"]
    assert summary["steps"] == 32 and summary["tau_plus_is_one_over_C"] is True


def test_tau_plus_is_one_over_c_is_recorded_false_for_another_value(tmp_path):
    _, summary = _train(tmp_path, tiny_config("dcl", "loss.tau_plus=0.3", "train.max_steps=2", "eval.linear=false"))
    assert summary["tau_plus"] == pytest.approx(0.3) and summary["tau_plus_is_one_over_C"] is False
    _, summary = _train(tmp_path / "b", tiny_config("infonce", "train.max_steps=2", "eval.linear=false"))
    assert summary["tau_plus"] is None and summary["tau_plus_is_one_over_C"] is False
