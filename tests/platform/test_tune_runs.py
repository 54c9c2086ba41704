"""``platform tune`` trials at unit level (fake ``platform train`` scripts, no real training): the objective is the
mean over the seeds, a run without a finite metric fails its trial, how a run's process ended decides between
re-queueing (interrupt) and failing the trial, a re-queued trial's finished run still reports its curve, a failed
Ray run fails its trial, and missing data is blamed on ``--preset``. Written from the mutation audit of
``experiments/tune.py`` (each test fails on a one-token change that the other tune tests let through)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

from contrastlab.platform.errors import ConfigError

optuna = pytest.importorskip("optuna")


def test_a_trials_objective_is_the_mean_over_its_seeds_and_only_the_first_seed_is_pruned(tmp_path, monkeypatch):
    """The objective is the arithmetic mean of the seeds' primary metric (docs/tune.md), recorded per seed too;
    only the first seed's curve is reported for pruning (the others run only when it was not pruned)."""
    from contrastlab.experiments import tune as tn

    scores = {1: 0.2, 2: 0.5, 3: 0.8}  # the mean 0.5 differs from the sum, the product and each single seed
    calls = []

    def fake_train_locally(spec, point, trial_out, trial, prune, settled=None):
        calls.append((point.seed, prune))
        return scores[point.seed]

    monkeypatch.setattr(tn, "train_locally", fake_train_locally)
    plugin = SimpleNamespace(name="recsys", primary_metric="eval/ndcg@20", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.2)")],
                       [1, 2, 3], tmp_path)
    study = optuna.create_study(direction="maximize")
    study.optimize(lambda trial: tn.objective(spec, trial), n_trials=1)
    (trial,) = study.trials
    assert trial.value == pytest.approx(sum(scores.values()) / len(scores))
    assert trial.user_attrs["seed_values"] == [0.2, 0.5, 0.8]
    assert calls == [(1, True), (2, False), (3, False)]
    assert trial.user_attrs["dir"] == str(tmp_path / "trials" / "0000")


@pytest.mark.parametrize("metrics", [{"eval/score": float("nan")}, {"eval/score": float("inf")}, {"other": 0.3},
                                     {"eval/score": "0.3"}])
def test_a_run_without_a_finite_primary_metric_fails_its_trial(tmp_path, metrics):
    """A diverged run (NaN/inf) or one that never measured the metric fails the trial instead of giving it a value
    the sampler and best.json would take at face value."""
    from contrastlab.experiments import tune as tn

    (tmp_path / "summary.json").write_text(json.dumps({"metrics": metrics}))
    with pytest.raises(tn.TrialFailedError, match=r"no finite 'eval/score' in summary\.json"):
        tn._metric(tmp_path, "eval/score")
    (tmp_path / "summary.json").write_text(json.dumps({"metrics": {"eval/score": 3}}))
    assert tn._metric(tmp_path, "eval/score") == 3.0


def test_missing_data_is_blamed_on_the_preset_and_other_errors_are_kept_as_they_are(tmp_path):
    """With no ``--set`` to blame, a DataMissingError names ``--preset`` (it chose the data); any other error is
    passed on unchanged (it already says what is wrong)."""
    from contrastlab.experiments import tune as tn
    from contrastlab.platform.errors import DataMissingError

    plugin = SimpleNamespace(name="recsys", primary_metric="eval/ndcg@20", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "paper", [], [], [1], tmp_path)
    blamed = spec.blame_set(DataMissingError("ml-1m not found; run scripts/get_data.sh"))
    assert isinstance(blamed, DataMissingError)
    assert str(blamed) == "--preset paper: ml-1m not found; run scripts/get_data.sh"
    other = ConfigError("train.epochs=0 is refused")
    assert spec.blame_set(other) is other


def test_a_requeued_trials_finished_run_still_reports_its_curve_for_pruning(tmp_path):
    """A seed that finished before the interruption is not trained again, but with pruning its curve is still
    reported, so later trials are judged against it; without pruning nothing is reported."""
    from contrastlab.experiments import tune as tn

    plugin = SimpleNamespace(name="recsys", primary_metric="eval/score", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.3)")], [1],
                       tmp_path)
    (point,) = spec.points({"loss.tau_plus": "0.1"})
    run_dir = point.run_dir(tmp_path / "t")
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("seed: 1\n")
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "eval/score": v}) + "\n"
                                                   for s, v in [(0, 0.1), (1, 0.3)]))
    (run_dir / "run.json").write_text(json.dumps({"status": "completed"}))
    (run_dir / "summary.json").write_text(json.dumps({"metrics": {"eval/score": 0.3}}))
    study = optuna.create_study(direction="maximize")
    for prune, reported in [(True, {0: 0.1, 1: 0.3}), (False, {})]:
        trial = study.ask()
        assert tn.train_locally(spec, point, tmp_path / "t", trial, prune=prune) == 0.3
        assert trial.storage.get_trial(trial._trial_id).intermediate_values == reported


@pytest.mark.parametrize(
    "script, raised",
    [
        ("sys.exit(130)", KeyboardInterrupt),  # Ctrl-C before the run was created: nothing in run.json
        ("signal.signal(signal.SIGINT, signal.SIG_DFL); os.kill(os.getpid(), signal.SIGINT)", KeyboardInterrupt),
        ("write_run('interrupted')", KeyboardInterrupt),  # the run saw Ctrl-C and exited cleanly
        ("write_run('completed'); print('RuntimeError: boom', flush=True); sys.exit(1)", "RuntimeError: boom"),
        ("print('ValueError: no data', flush=True)", "ValueError: no data"),  # exit 0 without a finished run
    ],
)  # fmt: skip
def test_how_a_trials_run_process_ended_decides_between_interrupt_and_failure(tmp_path, monkeypatch, script, raised):
    """An interrupted run (exit 130, killed by SIGINT, or ``interrupted`` in run.json) stops the study like Ctrl-C
    (the trial is re-queued); a non-zero exit or a run that did not complete fails the trial with the log's last
    line and the log's path, even when the run wrote a result."""
    from contrastlab.experiments import runner
    from contrastlab.experiments import tune as tn

    path = tmp_path / "fake_train.py"
    path.write_text(f"""
import json, os, signal, sys
from pathlib import Path
argv = sys.argv[1:]
opt = lambda name: argv[argv.index(name) + 1]
def write_run(status):
    run_dir = Path(opt("--logdir")) / opt("--plugin") / opt("--loss") / opt("--run-name")
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("seed: 1\\n")
    (run_dir / "summary.json").write_text(json.dumps({{"metrics": {{"eval/score": 0.1}}}}))
    (run_dir / "run.json").write_text(json.dumps({{"status": status}}))
{script}
""")
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(path)])
    plugin = SimpleNamespace(name="fake", primary_metric="eval/score", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.3)")], [1],
                       tmp_path)
    spec.poll = 0.05
    (point,) = spec.points({"loss.tau_plus": "0.1"})
    trial = optuna.create_study(direction="maximize").ask()
    if raised is KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):
            tn.train_locally(spec, point, tmp_path / "t", trial, prune=False)
        return
    with pytest.raises(tn.TrialFailedError) as info:
        tn.train_locally(spec, point, tmp_path / "t", trial, prune=False)
    assert str(info.value) == raised
    assert info.value.log == tmp_path / "t" / "logs" / f"{point.run_name}.log"


def test_a_failed_run_on_ray_fails_its_trial_with_the_runs_error_and_log(tmp_path, monkeypatch):
    from contrastlab.experiments import ray_runner
    from contrastlab.experiments import tune as tn

    plugin = SimpleNamespace(name="recsys", primary_metric="eval/ndcg@20", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.2)")], [1, 2],
                       tmp_path, ray={"address": "auto"})

    def fake_run_grid_ray(points, out, **kwargs):
        assert kwargs["announce"] is False and kwargs["env"] == tn.TRIAL_ENV  # tune prints its own trial lines
        return [SimpleNamespace(point=p, status="completed" if p.seed == 1 else "failed",
                                error=None if p.seed == 1 else "RuntimeError: boom") for p in points]

    monkeypatch.setattr(ray_runner, "run_grid_ray", fake_run_grid_ray)
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    with pytest.raises(tn.TrialFailedError) as info:
        tn.objective(spec, trial)
    assert str(info.value) == "RuntimeError: boom"
    assert info.value.log == spec.points(trial.user_attrs["values"])[1].log_path(tmp_path / "trials" / "0000")


def test_best_json_of_a_trial_recorded_before_seeds_were_stored_lists_seeds_1_to_n(tmp_path):
    """An older study's setup has only ``seeds_per_trial``; best.json still lists the seeds the trial trained
    (``1..N``, as ``platform tune`` always numbers them), which ``compare --tuned`` avoids for fresh seeds."""
    from contrastlab.experiments import tune as tn

    plugin = SimpleNamespace(name="recsys", primary_metric="eval/ndcg@20", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.2)")], [1],
                       tmp_path)
    study = optuna.create_study(direction="maximize")
    trial = study.ask({"loss.tau_plus": optuna.distributions.FloatDistribution(0.01, 0.2)})
    old = {k: v for k, v in tn.setup_record(spec).items() if k != "seeds"}
    trial.set_user_attr("setup", {**old, "seeds_per_trial": 3})
    study.tell(trial, 0.5)
    assert tn.write_best(study, spec) is None  # no run folder recorded: best.json only
    record = json.loads((tmp_path / "best.json").read_text())
    assert record["seeds"] == [1, 2, 3]
    assert record["params"] == {"loss.tau_plus": str(trial.params["loss.tau_plus"])}
    assert (record["trial"], record["value"], record["metric"]) == (0, 0.5, "eval/ndcg@20")


def test_best_json_records_how_many_trials_the_study_ran(tmp_path):
    """The tuning budget ``compare --tuned`` shows: complete and pruned trials count, failed ones do not."""
    from contrastlab.experiments import tune as tn

    plugin = SimpleNamespace(name="recsys", primary_metric="eval/ndcg@20", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.2)")], [1],
                       tmp_path)
    study = optuna.create_study(direction="maximize")
    space = {"loss.tau_plus": optuna.distributions.FloatDistribution(0.01, 0.2)}
    for value in (0.5, 0.7):
        study.tell(study.ask(space), value)
    study.tell(study.ask(space), state=optuna.trial.TrialState.PRUNED)
    study.tell(study.ask(space), state=optuna.trial.TrialState.FAIL)
    tn.write_best(study, spec)
    record = json.loads((tmp_path / "best.json").read_text())
    assert (record["trial"], record["value"], record["trials"]) == (1, 0.7, 3)


def test_a_run_above_the_median_is_not_pruned(tmp_path, monkeypatch):
    """The median pruner stops a trial only when its curve is worse than the earlier trials' median at the same
    step: a two-seed trial whose first run scores 0.1 where the earlier trial had 0.0 keeps going."""
    from contrastlab.experiments import runner
    from contrastlab.experiments import tune as tn

    path = tmp_path / "fake_train.py"
    path.write_text("""
import json, sys
from pathlib import Path
argv = sys.argv[1:]
opt = lambda name: argv[argv.index(name) + 1]
run_dir = Path(opt("--logdir")) / opt("--plugin") / opt("--loss") / opt("--run-name")
run_dir.mkdir(parents=True)
(run_dir / "config.yaml").write_text("seed: 1\\n")
(run_dir / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "eval/score": 0.1}) + "\\n" for s in range(3)))
(run_dir / "summary.json").write_text(json.dumps({"metrics": {"eval/score": 0.1}}))
(run_dir / "run.json").write_text(json.dumps({"status": "completed"}))
""")
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(path)])
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(n_startup_trials=1))
    earlier = study.ask()
    for step in range(3):
        earlier.report(0.0, step)
    study.tell(earlier, 0.0)
    plugin = SimpleNamespace(name="fake", primary_metric="eval/score", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.3)")], [1, 2],
                       tmp_path)
    spec.poll = 0.05
    trial = study.ask()
    first, second = spec.points({"loss.tau_plus": "0.1"})
    assert tn.train_locally(spec, first, tmp_path / "t", trial, prune=True) == 0.1
    assert trial.storage.get_trial(trial._trial_id).intermediate_values == {0: 0.1, 1: 0.1, 2: 0.1}
    assert tn.train_locally(spec, second, tmp_path / "t", trial, prune=False) == 0.1  # its log beside the first's
    assert sorted(p.name for p in (tmp_path / "t" / "logs").iterdir()) == [f"{first.run_name}.log",
                                                                          f"{second.run_name}.log"]


@pytest.mark.parametrize(
    "ray, device, checked",
    [
        (None, "cuda", "--device cuda"),  # local processes
        ({"address": None}, "cuda", "--device cuda"),  # Ray's private local instance trains here too
        ({"address": None}, None, "the config's device (cuda:3)"),
        ({"address": "10.0.0.1:6379"}, "cuda", None),  # a cluster's machines: not this one's devices
    ],
)
def test_the_device_is_checked_where_the_runs_train_on_this_machine(tmp_path, monkeypatch, ray, device, checked):
    from contrastlab.experiments import tune as tn
    from contrastlab.platform import run

    asked = []

    def resolve_device(name):
        asked.append(name)
        raise ConfigError(f"device '{name}' requested but CUDA is not available here")

    monkeypatch.setattr(run, "resolve_device", resolve_device)
    plugin = SimpleNamespace(name="recsys", primary_metric="eval/ndcg@20", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [], [1], tmp_path, device=device, ray=ray)
    config = SimpleNamespace(device="cuda:3")
    if checked is None:
        spec.check_device(config)
        assert asked == []
        return
    with pytest.raises(ConfigError) as info:
        spec.check_device(config)
    assert asked == [device or "cuda:3"]
    assert str(info.value) == f"{checked}: device '{asked[0]}' requested but CUDA is not available here"


@pytest.mark.parametrize(
    "tag, loss",
    [
        ("train/loss", True),
        ("train/critic_loss_vs_env_frames", True),
        ("classifier/risk", True),  # pu's classifier loss
        ("eval/Val_Loss", True),
        ("loss", True),  # a tag without a folder
        ("eval/ndcg@20", False),
        ("eval/knn_top1", False),
        ("loss/accuracy", False),  # only the last part counts
        ("accuracy", False),
    ],
)
def test_a_loss_curve_is_named_by_the_last_part_of_its_tag(tag, loss):
    from contrastlab.experiments import tune as tn

    assert tn.is_loss_curve(tag) is loss
