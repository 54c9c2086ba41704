"""The graph plugin end to end: a CLI smoke run that learns, refusals, resume + eval, and a two-loss compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from contrastlab.platform.config import resolve_config
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.run import Run, seed_everything
from contrastlab.platform.task import EvalOptions
from contrastlab.plugins.graph.task import GraphTask, batches_per_epoch, load_graphs, readout_metrics
from contrastlab.plugins.graph.trainer import build_model, embed_dataset
from contrastlab.testing import check_stop_and_resume, run_cli

TINY = ["train.max_steps=6", "checkpoint_every=3", "train.batch_size=16", "train.log_every=1",
        "data.synthetic.graphs=60", "eval.initial=false", "eval.c_grid=[1.0]", "eval.folds=3"]
"""Overrides that shrink a smoke run to a second or two."""


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_smoke_run_through_the_cli_learns_beyond_the_random_encoder(tmp_path: Path) -> None:
    code, out = run_cli(["train", "--plugin", "graph", "--loss", "dcl", "--preset", "smoke",
                         "--set", "eval.every=0", "--logdir", str(tmp_path)])
    assert code == 0, out
    run_dir = next((tmp_path / "graph" / "dcl").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    m = summary["metrics"]
    assert summary["primary_metric"] == "eval/svm_acc" and summary["labels_used"] is False
    assert summary["dataset"]["class_counts"] == [100, 100, 100] and summary["steps"] == 120
    logged = rows(run_dir)
    assert [r["step"] for r in logged if "eval/svm_acc" in r] == [0, 120]
    assert [r["step"] for r in logged if "train/loss" in r] == list(range(5, 121, 5))
    assert all(0.0 <= r["train/clamped_frac"] <= 1.0 for r in logged if "train/loss" in r)   # DCL's floor statistic
    clamp = [r["train/clamped_frac"] for r in logged if "train/loss" in r]
    assert m["train/clamped_frac"] == pytest.approx(sum(clamp) / len(clamp))   # summary: mean of the logged values
    assert list(run_dir.glob("events.out.tfevents.*")) and list((run_dir / "checkpoints").glob("step_*.pt"))
    # the random-encoder baseline, measured again here: the same seed builds the same untrained encoder
    config = resolve_config(GraphTask(), preset="smoke", loss="dcl")
    data = load_graphs(config)
    seed_everything(config.seed)
    untrained = embed_dataset(build_model(config, data.num_features), data, 512, torch.device("cpu"))
    baseline = readout_metrics(untrained, data, config)["eval/svm_acc"]
    assert m["eval/svm_acc_init"] == pytest.approx(baseline)
    assert m["eval/svm_acc"] >= baseline + 0.05 and m["eval/svm_acc"] > 0.85    # measured: 0.92 vs 0.65


@pytest.mark.parametrize("loss", ["supcon", "punce", "unbiased"])
def test_label_aware_losses_are_refused_before_anything_is_written(tmp_path: Path, loss: str) -> None:
    code, out = run_cli(["train", "--plugin", "graph", "--loss", loss, "--logdir", str(tmp_path / "runs")])
    assert code == 2 and f"loss '{loss}' needs" in out and "trains without labels" in out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_debiased_pos_is_refused_in_infograph_mode_only(tmp_path: Path) -> None:
    """Its self term assumes the anchors are among the candidates: nodes never are among graphs."""
    args = ["train", "--plugin", "graph", "--loss", "debiased_pos", "--logdir", str(tmp_path / "runs")]
    code, out = run_cli([*args, "--set", "model.mode=infograph"])
    assert code == 2 and "cannot run in infograph mode" in out and "Traceback" not in out, out
    assert len(out.strip().splitlines()) <= 2 and not (tmp_path / "runs").exists()
    GraphTask().check(resolve_config(GraphTask(), preset="smoke", loss="debiased_pos"))  # graphcl mode: allowed
    code, out = run_cli(["train", "--plugin", "graph", "--loss", "supcon", "--set", "model.mode=infograph"])
    assert code == 2 and "unsupervised loss (" in out and "debiased_pos" not in out.split("unsupervised loss (")[-1]


def test_missing_tu_dataset_is_one_line_naming_the_place_and_the_url(tmp_path: Path) -> None:
    code, out = run_cli(["train", "--plugin", "graph", "--preset", "paper", "--set", f"data.root={tmp_path}",
                         "--logdir", str(tmp_path / "runs")])
    assert code == 2 and "put PTC_MR.zip" in out and str(tmp_path) in out and "chrsmrrs" in out
    assert "Traceback" not in out and not (tmp_path / "runs").exists()


def test_resume_reproduces_the_uninterrupted_run_and_eval_rereads_the_checkpoint(tmp_path: Path) -> None:
    task = GraphTask()
    config = resolve_config(task, preset="smoke", sets=TINY, loss="infonce")
    run = Run.create(task, config, tmp_path)
    straight = task.train(config, run)
    run.close()
    (run.dir / "checkpoints" / "step_000000000006.pt").unlink()         # pretend it died after step 3
    resumed = Run.open(run.dir)
    assert resumed.latest_checkpoint_step() == 3
    again = task.train(resumed.config, resumed)
    resumed.finish(again)
    assert again["eval/svm_acc"] == straight["eval/svm_acc"] and again["train/loss"] == straight["train/loss"]
    assert [r["step"] for r in rows(run.dir) if "train/loss" in r] == [1, 2, 3, 4, 5, 6]
    evaluated = GraphTask().evaluate(Run.open(run.dir, resume=False), EvalOptions())
    assert evaluated["eval/svm_acc"] == pytest.approx(again["eval/svm_acc"])
    code, out = run_cli(["eval", str(run.dir)])
    assert code == 0, out
    assert json.loads((run.dir / "eval.json").read_text())["eval/svm_acc"] == pytest.approx(again["eval/svm_acc"])


@pytest.mark.slow
def test_compare_two_losses_gives_a_table_with_the_primary_metric(tmp_path: Path) -> None:
    sets = [arg for s in TINY if not s.startswith("checkpoint") for arg in ("--set", s)]
    code, out = run_cli(["compare", "--plugin", "graph", "--loss", "infonce,dcl", "--preset", "smoke",
                         "--seeds", "1", "--jobs", "2", *sets, "--out", str(tmp_path / "cmp")])
    assert code == 0, out
    table = (tmp_path / "cmp" / "results.md").read_text()
    assert "eval/svm_acc" in table and "infonce" in table and "dcl" in table
    summaries = [json.loads(p.read_text()) for p in (tmp_path / "cmp").rglob("summary.json")]
    assert sorted(s["loss"] for s in summaries) == ["dcl", "infonce"]
    assert all(s["preset"] == "smoke" and 0 < s["metrics"]["eval/svm_acc"] <= 1 for s in summaries)


@pytest.mark.parametrize(("step", "when", "log_every"), [(1, "checkpoint_due", 2), (4, "log", 4)])
def test_a_stopped_run_saves_where_it_stopped_and_resumes_as_if_never_stopped(tmp_path: Path, step: int, when: str,
                                                                             log_every: int) -> None:
    """SIGTERM mid-way through a logging window (step 1 of 2), or during the last step of an epoch (step 4 of 4;
    the epoch's SVM evaluation then runs before the stop's checkpoint): the same rows and metrics as a run never
    stopped."""
    sets = [*TINY[:1], "checkpoint_every=100", *TINY[2:3], f"train.log_every={log_every}", *TINY[4:], "eval.every=1"]
    args = ["--loss", "dcl", *(a for s in sets for a in ("--set", s))]
    stopped, resumed = check_stop_and_resume("graph", args, tmp_path, step, when)
    assert [r["step"] for r in rows(stopped) if "eval/svm_acc" in r] == [4, 6]
    shown = [int(line.split()[1].split("/")[0]) for line in resumed.splitlines() if line.startswith("graph ")]
    logged = [r["step"] for r in rows(stopped) if "train/loss" in r and r["step"] > step]
    assert shown == logged  # the progress line counts steps, not the steps of a restored log window twice


def test_a_resume_from_the_final_checkpoint_keeps_the_training_metrics(tmp_path: Path, resume_from_final) -> None:
    """Killed during the final evaluation (no summary yet): the resumed run's summary equals the uninterrupted
    one's, training metrics included (the final checkpoint carries the last logged ones)."""
    args = ["--loss", "dcl", "--preset", "smoke", *(a for s in TINY for a in ("--set", s))]
    before, after = resume_from_final("graph", args, tmp_path)
    assert {"train/loss", "train/graphs_per_s", "train/clamped_frac"} <= set(before)
    assert after == before


def test_a_data_root_the_synthetic_dataset_would_ignore_is_refused(tmp_path: Path) -> None:
    """``data.root`` with the generated dataset trained silently on generated graphs, not on the user's files."""
    code, out = run_cli(["train", "--plugin", "graph", "--loss", "dcl", "--set", f"data.root={tmp_path}",
                         "--logdir", str(tmp_path / "runs")])
    assert code == 2 and "is not read: data.name=synthetic generates its data" in out, out
    assert "Traceback" not in out and not (tmp_path / "runs").exists()


def test_a_tu_dataset_with_a_single_graph_in_some_class_is_refused(tmp_path: Path) -> None:
    """Cross-validation needs two graphs of every class: five graphs of three classes in turn ([2, 2, 1]) are
    refused with the class sizes, six ([2, 2, 2]) pass (the boundary)."""
    from contrastlab.data.synthetic_graphs import write_synthetic_tu

    for name, graphs in (("FIVE", 5), ("SIX", 6)):
        write_synthetic_tu(tmp_path, name, num_graphs=graphs, seed=0, node_labels=0)
    task = GraphTask()
    five = resolve_config(task, preset="smoke", sets=["data.name=FIVE", f"data.root={tmp_path}"])
    with pytest.raises(ConfigError, match=r"dataset FIVE needs >= 2 graphs in every class .*class sizes \[2, 2, 1\]"):
        task.check(five)
    task.check(resolve_config(task, preset="smoke", sets=["data.name=SIX", f"data.root={tmp_path}"]))


@pytest.mark.parametrize(("n", "batch", "expected"), [(60, 16, 4), (50, 16, 4), (49, 16, 3), (48, 16, 3),
                                                        (10, 16, 1), (1, 16, 1)])
def test_batches_per_epoch_drops_only_a_last_batch_of_one_graph(n: int, batch: int, expected: int) -> None:
    """⌈n / B⌉ batches, less one when the last would hold a single graph (batch norm cannot train on one)."""
    full, rest = n // min(batch, n), n % min(batch, n)
    assert batches_per_epoch(n, batch) == expected == full + (rest > 1)


def _evaluations_run(epochs: int, per_epoch: int, total: int, initial: bool, every: int) -> int:
    """The readouts GraphTask.train runs, counted by walking its schedule: step 0 (eval.initial), the end of every
    ``every``-th epoch that is not the last one trained, and the end."""
    ends = [(e + 1) * per_epoch for e in range(epochs)]
    mid = sum(1 for e, end in enumerate(ends) if every and (e + 1) % every == 0 and end < total)
    return int(initial) + mid + 1


@pytest.mark.parametrize("sets", [[], ["eval.every=0"], ["eval.initial=false", "eval.every=7"], ["eval.every=1"],
                                  ["train.epochs=1", "eval.every=1"],
                                  ["train.max_steps=50"], ["train.max_steps=80", "eval.every=10"],
                                  ["data.synthetic.graphs=257", "train.batch_size=64", "eval.every=40"]])
def test_the_time_estimate_counts_the_training_steps_and_the_readouts_that_run(sets: list[str]) -> None:
    """Steps × graphs per step × the per-graph step cost, plus every readout the run performs × graphs × the
    per-graph readout cost (the final epoch's periodic readout is the final one: not counted twice)."""
    from contrastlab.plugins.graph import task as module

    config = resolve_config(GraphTask(), preset="smoke", loss="dcl", sets=sets)
    n, b = config.data.synthetic.graphs, config.train.batch_size
    full, rest = divmod(n, min(b, n))
    per_epoch = full + (rest >= 2)
    total = config.train.epochs * per_epoch
    total = min(total, config.train.max_steps) if config.train.max_steps else total
    readouts = _evaluations_run(config.train.epochs, per_epoch, total, config.eval.initial, config.eval.every)
    for device in ("cpu", "cuda:0"):
        per_step = module._SECONDS_PER_GRAPH_STEP["cuda" if device.startswith("cuda") else "cpu"]
        expected = total * min(n, b) * per_step + readouts * n * module._SECONDS_PER_EVAL_GRAPH
        assert GraphTask().estimate_seconds(config, device) == pytest.approx(expected)


def test_the_time_estimate_of_a_tu_dataset_waits_for_its_graphs(tmp_path: Path) -> None:
    """Unknown (None) until the files are loaded, then from their graph count; the smoke preset is "about 10 s of
    training and readouts" on a CPU (docs/graph.md) and the GPU step cost is lower."""
    from contrastlab.data.synthetic_graphs import write_synthetic_tu

    write_synthetic_tu(tmp_path, "TINY", num_graphs=30, seed=0, node_labels=0)
    task = GraphTask()
    config = resolve_config(task, preset="smoke", sets=["data.name=TINY", f"data.root={tmp_path}", "eval.every=0"])
    assert task.estimate_seconds(config, "cpu") is None
    task.check(config)  # loads the files
    same = resolve_config(task, preset="smoke", sets=["data.name=synthetic", "data.synthetic.graphs=30",
                                                      "eval.every=0"])
    assert task.estimate_seconds(config, "cpu") == pytest.approx(task.estimate_seconds(same, "cpu"))
    smoke = resolve_config(task, preset="smoke")
    assert 4 <= task.estimate_seconds(smoke, "cpu") <= 15
    assert task.estimate_seconds(smoke, "cuda") < task.estimate_seconds(smoke, "cpu")


def test_accuracy_is_the_primary_metric_and_higher_is_better() -> None:
    """compare and tune rank runs by it: a larger SVM accuracy is the better run."""
    assert GraphTask.primary_metric == "eval/svm_acc" and GraphTask.higher_is_better is True
    assert GraphTask().logged_metrics(resolve_config(GraphTask(), preset="smoke"))[:2] == ("eval/svm_acc",
                                                                                           "eval/svm_acc_std")
