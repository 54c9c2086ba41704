"""``platform tune`` after its option checks (``cli/tune.py``): the default output folder, storage and study name,
the seeds of each trial, the header line, what it prints at the end, and its exit codes. Training is a stand-in for
``train_locally`` (no process), so each test takes a second or two."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contrastlab.cli import app

optuna = pytest.importorskip("optuna")

TINY = [
    "--preset", "smoke", "--set", "train.epochs=1", "--set", "eval.every_epochs=1",
    "--set", "data.synthetic.users=100", "--set", "data.synthetic.items=100",
]  # fmt: skip
BASE = ["tune", "--plugin", "recsys", "--loss", "dcl", *TINY, "--search", "loss.tau_plus=uniform(0.01,0.3)"]


def fake_training(monkeypatch: pytest.MonkeyPatch, value=lambda number: 0.5) -> list[tuple[int, int]]:
    """Stand in for the training of each seed of a trial: a run folder with a config, ``value(trial number)`` as
    its score; returns the (trial, seed) pairs trained."""
    from contrastlab.experiments import tune as tn

    trained: list[tuple[int, int]] = []

    def train(spec, point, trial_out, trial, prune, settled=None) -> float:
        trained.append((trial.number, point.seed))
        run_dir = point.run_dir(trial_out)
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text("loss:\n  name: dcl\n")
        return value(trial.number)

    monkeypatch.setattr(tn, "train_locally", train)
    return trained


def test_defaults_seeds_header_and_the_closing_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defaults as docs/tune.md gives them: --out tune/<plugin>-<loss>, --storage sqlite:///OUT/study.db, --study
    <plugin>-<loss>; --seeds-per-trial N trains seeds 1..N in every trial."""
    monkeypatch.chdir(tmp_path)
    trained = fake_training(monkeypatch, value=lambda number: 0.5 + number / 10)
    result = CliRunner().invoke(app, [*BASE, "--trials", "2", "--seeds-per-trial", "2", "--pruner", "none"])
    assert result.exit_code == 0, result.output
    out = (tmp_path / "tune" / "recsys-dcl").resolve()
    assert sorted(trained) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    url = f"sqlite:///{out / 'study.db'}"
    study = optuna.load_study(study_name="recsys-dcl", storage=url)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    header = (f"tune recsys/dcl: preset smoke, study 'recsys-dcl' in {url}: 0 of 2 trials finished; eval/ndcg@20 "
              "(maximize), 2 seed(s) per trial, backend local")
    assert header in " ".join(result.stderr.split()), result.stderr
    assert "None" not in result.stderr.splitlines(), result.stderr  # no note on the local backend, not an empty one
    stdout = result.stdout
    assert (out / "trials.md").read_text().strip() in stdout
    for name in ("trials.csv", "trials.md", "history.png", "importance.png", "best.yaml", "best.json"):
        assert f"{name:15s} {out / name}" in stdout, stdout
        assert (out / name).is_file(), name
    best = shlex.quote(str(out / "best.yaml"))  # the printed command quotes a path with a space
    assert "Train the best config:" in stdout and f"--config {best}" in " ".join(stdout.split())


def test_no_completed_trial_is_exit_code_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contrastlab.experiments import tune as tn

    def pruned(spec, point, trial_out, trial, prune, settled=None) -> float:
        raise optuna.TrialPruned()

    monkeypatch.setattr(tn, "train_locally", pruned)
    out = tmp_path / "out"
    out.mkdir()  # an --out folder that exists already (made for it, or a resumed study's) is fine
    result = CliRunner().invoke(app, [*BASE, "--trials", "2", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "no trial completed; see trials.md and the logs under trials/" in result.stderr, result.output
    assert (out / "trials.md").is_file() and not (out / "best.json").exists()
    assert "best.yaml" not in result.stdout and "best.json" not in result.stdout, result.stdout


def test_a_best_trial_whose_runs_are_elsewhere_names_best_json_and_where_the_runs_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker of a shared --storage whose best trial ran on another machine: best.json, no best.yaml, exit 0."""
    from contrastlab.experiments import tune as tn

    fake_training(monkeypatch)
    monkeypatch.setattr(tn, "write_best", lambda study, spec: None)  # as when the best trial's runs are not here
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, "--trials", "1", "--pruner", "none", "--out", str(out)])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("best.json"))
    assert f"{out / 'best.json'} (best.yaml: the best trial's runs are not on this machine: " in line, line
    assert "Train the best config" not in result.stdout


def test_the_ray_backend_starts_the_private_instance_and_notes_on_stderr_that_it_does_not_prune(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    from contrastlab.experiments import tune as tn

    connected = []
    monkeypatch.setattr("contrastlab.experiments.ray_runner.connect_checked",
                        lambda address, cpus, gpus: connected.append(address))
    monkeypatch.setattr(tn, "optimize", lambda study, spec, trials, parallel: 0)  # no trial runs
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, "--trials", "1", "--backend", "ray", "--out", str(out)])
    assert result.exit_code == 1, result.output  # no trial completed
    assert connected == [None]  # no --address: the private local instance, started and checked up front
    lines = result.stderr.splitlines()
    assert lines[0].startswith("tune recsys/dcl: preset smoke") and lines[0].endswith("backend ray"), lines
    assert lines[1] == "trials are not pruned on the Ray backend (--pruner is ignored; see docs/tune.md)", lines
    assert "not pruned" not in result.stdout
