"""``platform tune`` review items, each at unit level or as one quick CLI call (no real training):
the study's stored setup (resume refused on a different setup; best.json from the trial's own setup), Ctrl-C
re-queues the interrupted trial quietly and stops its process, a training child dies with its driver,
importance.png without importance, rounded display of sampled floats, the "never logged" warning, Ray notes."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from contrastlab.cli import app
from contrastlab.platform.errors import ConfigError

optuna = pytest.importorskip("optuna")

SRC = str(Path(__file__).resolve().parents[2] / "src")


def child_env() -> dict[str, str]:
    """The environment for a child Python: an inherited ``PYTHONPATH`` first (``scripts/mutants.py`` puts its
    mutated copy of ``src/`` there), then this checkout's ``src``."""
    inherited = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([inherited, SRC] if inherited else [SRC]))


TINY = [
    "--preset", "smoke", "--set", "train.epochs=1", "--set", "eval.every_epochs=1",
    "--set", "data.synthetic.users=100", "--set", "data.synthetic.items=100",
]  # fmt: skip
BASE = ["tune", "--plugin", "recsys", "--loss", "dcl", *TINY, "--search", "loss.tau_plus=uniform(0.01,0.3)"]


def fake_spec(tmp_path: Path, preset: str = "smoke", sets: tuple[str, ...] = ("train.epochs=1",)) -> object:
    from contrastlab.experiments import tune as tn

    plugin = SimpleNamespace(name="fake", primary_metric="eval/score", higher_is_better=True)
    params = [tn.parse_search("loss.tau_plus=uniform(0.01,0.3)")]
    return tn.TuneSpec(plugin, "dcl", preset, list(sets), params, [1, 2], tmp_path)


def test_resume_with_another_setup_is_refused_naming_the_difference(tmp_path):
    from contrastlab.experiments import tune as tn

    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = tn.open_study(fake_spec(tmp_path), url, "s", "median")
    assert study.user_attrs["setup"]["preset"] == "smoke"
    tn.open_study(fake_spec(tmp_path), url, "s", "none")  # the same setup (another pruner) resumes
    with pytest.raises(ConfigError, match=r"created with --preset smoke, this command says --preset paper; use an"):
        tn.open_study(fake_spec(tmp_path, preset="paper"), url, "s", "median")
    with pytest.raises(ConfigError, match=r"created with --set train.epochs=1, this command says no --set"):
        tn.open_study(fake_spec(tmp_path, sets=()), url, "s", "median")
    other = fake_spec(tmp_path)
    other.params = [tn.parse_search("loss.tau_plus=uniform(0.01,0.2)")]
    with pytest.raises(ConfigError, match=r"this command says --search loss.tau_plus=uniform\(0.01,0.2\)"):
        tn.open_study(other, url, "s", "median")


def test_old_study_without_setup_is_accepted_and_gets_it(tmp_path):
    from contrastlab.experiments import tune as tn

    url = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(storage=url, study_name="old", direction="maximize")
    study = tn.open_study(fake_spec(tmp_path, preset="paper"), url, "old", "median")
    assert optuna.load_study(study_name="old", storage=url).user_attrs["setup"]["preset"] == "paper"
    assert study.user_attrs["setup"]["seeds"] == [1, 2]


def test_cli_resume_with_another_preset_writes_nothing_and_says_one_line(tmp_path):
    from contrastlab.experiments import tune as tn
    from contrastlab.platform.plugins import get_task_plugin

    out = tmp_path / "out"
    out.mkdir()
    spec = tn.TuneSpec(get_task_plugin("recsys"), "dcl", "smoke", ["train.epochs=2"], [], [1], out)
    spec.params = [tn.parse_search("loss.tau_plus=uniform(0.01,0.3)")]
    tn.open_study(spec, f"sqlite:///{out / 'study.db'}", "recsys-dcl", "median")
    before = sorted(p.name for p in out.iterdir())
    result = CliRunner().invoke(app, [*BASE, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "--study recsys-dcl in sqlite:///" in result.output and "created with --set" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert sorted(p.name for p in out.iterdir()) == before


def test_write_best_records_what_the_best_trial_trained_with(tmp_path):
    from contrastlab.experiments import tune as tn

    trained = fake_spec(tmp_path)
    study = tn.open_study(trained, "sqlite://", "s", "none")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("seed: 1\n")
    trial = study.ask({"loss.tau_plus": optuna.distributions.FloatDistribution(0.01, 0.3)})
    trial.set_user_attr("run_dirs", [str(run_dir)])
    trial.set_user_attr("values", {"loss.tau_plus": repr(trial.params["loss.tau_plus"])})
    trial.set_user_attr("setup", tn.setup_record(trained))
    study.tell(trial, 0.5)
    now = fake_spec(tmp_path, preset="paper", sets=())  # e.g. a command that only rewrites the outputs
    assert tn.write_best(study, now) == tmp_path / "best.yaml"
    record = json.loads((tmp_path / "best.json").read_text())
    assert (record["preset"], record["sets"], record["seeds"]) == ("smoke", ["train.epochs=1"], [1, 2])
    assert record["params"]["loss.tau_plus"] == repr(trial.params["loss.tau_plus"])  # exact, for training
    head = (tmp_path / "best.yaml").read_text().splitlines()[0]
    assert f"loss.tau_plus={trial.params['loss.tau_plus']:.4g}" in head


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage() + (" [traceback]" if record.exc_info else ""))


def test_ctrl_c_requeues_the_interrupted_trial_without_a_traceback(tmp_path, monkeypatch):
    from contrastlab.experiments import tune as tn

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tn, "train_locally", interrupted)
    records = Records()
    logging.getLogger("optuna").addHandler(records)
    try:
        result = CliRunner().invoke(app, [*BASE, "--out", str(tmp_path / "out")])
    finally:
        logging.getLogger("optuna").removeHandler(records)
    assert result.exit_code == 130, result.output
    assert "interrupted; run the same command again to resume the study" in result.output
    assert "Traceback" not in result.output and "KeyboardInterrupt" not in result.output
    assert not [line for line in records.lines if "failed" in line], records.lines
    study = optuna.load_study(study_name="recsys-dcl", storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    failed, waiting = study.trials
    assert (failed.state.name, waiting.state.name) == ("FAIL", "WAITING")
    assert waiting.params == failed.params or waiting.system_attrs["fixed_params"] == failed.params



def test_kill_stops_the_study_like_ctrl_c(tmp_path, monkeypatch):
    """``kill PID`` of a tune (SIGTERM) stops the trial, queues its parameters and says how to resume (exit 143),
    as Ctrl-C does; it ended the process silently, without the tables, best.json or the re-queued trial."""
    from contrastlab.experiments import tune as tn
    from contrastlab.testing import signal_self, sigterm_must_be_handled

    def killed(*args, **kwargs):
        signal_self(signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this sleep
        raise AssertionError("SIGTERM did not stop the trial")

    monkeypatch.setattr(tn, "train_locally", killed)
    with sigterm_must_be_handled():  # on the old code SIGTERM would have ended the test process
        result = CliRunner().invoke(app, [*BASE, "--out", str(tmp_path / "out")])
    assert result.exit_code == 143, result.output
    assert result.output.strip().splitlines()[-1] == "interrupted; run the same command again to resume the study"
    assert (tmp_path / "out" / "trials.md").is_file()
    study = optuna.load_study(study_name="recsys-dcl", storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    assert [t.state.name for t in study.trials] == ["FAIL", "WAITING"]

SLOW_TRAIN = """
import os, sys, time
from pathlib import Path
argv = sys.argv[1:]
opt = lambda name: argv[argv.index(name) + 1]
Path(opt("--logdir")).mkdir(parents=True, exist_ok=True)
(Path(opt("--logdir")) / "stop_checkpoint").write_text(os.environ.get("CONTRASTLAB_CHECKPOINT_ON_STOP", "unset"))
(Path(opt("--logdir")) / "pid").write_text(str(os.getpid()))
time.sleep(60)
"""


def dead(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_dead(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if dead(pid):
            return True
        time.sleep(0.1)
    return dead(pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_inside_a_trial_stops_its_training_process(tmp_path, monkeypatch):
    from contrastlab.experiments import runner
    from contrastlab.experiments import tune as tn

    script = tmp_path / "slow_train.py"
    script.write_text(SLOW_TRAIN)
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(script)])
    pid_file = tmp_path / "t" / "runs" / "pid"

    def sleep(seconds: float) -> None:
        time.sleep(seconds)
        if pid_file.is_file():
            raise KeyboardInterrupt

    monkeypatch.setattr(tn, "time", SimpleNamespace(sleep=sleep))
    spec = fake_spec(tmp_path)
    spec.poll = 0.1
    (point, _) = spec.points({"loss.tau_plus": "0.1"})
    with pytest.raises(KeyboardInterrupt):
        tn.train_locally(spec, point, tmp_path / "t", optuna.create_study().ask(), prune=False)
    assert wait_dead(int(pid_file.read_text()), 12)
    # a stopped trial is re-run from scratch: its training process stops at once, without a checkpoint first
    assert (pid_file.parent / "stop_checkpoint").read_text() == "0"


PARENT = """
import subprocess, sys, time
from contrastlab.experiments.runner import die_with_parent
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=die_with_parent())
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_training_child_dies_when_its_driver_is_sigkilled():
    env = child_env()
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env)
    child = int(parent.stdout.readline())
    assert not dead(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert wait_dead(child, 5)


def study_with(n_complete: int, keys: tuple[str, ...]) -> object:
    study = optuna.create_study(direction="maximize")
    for i in range(n_complete):
        dists = {k: optuna.distributions.FloatDistribution(0.0, 1.0) for k in keys}
        trial = study.ask(dists)
        study.tell(trial, float(i))
    return study


def test_importance_png_says_why_there_is_no_importance(tmp_path, monkeypatch):
    from contrastlab.experiments.tune_report import no_importance_reason, write_plots

    def never(*args, **kwargs):
        raise AssertionError("importance must not be computed")

    monkeypatch.setattr(optuna.importance, "get_param_importances", never)
    one = study_with(1, ("a", "b"))
    assert no_importance_reason(one) == "needs ≥ 2 complete trials (1 so far)"
    single = study_with(3, ("loss.tau_plus",))
    assert no_importance_reason(single) == "one parameter (loss.tau_plus): importance is 1.0 by definition"
    for study in (one, single):
        (tmp_path / "importance.png").unlink(missing_ok=True)
        write_plots(study, tmp_path, "eval/score")
        assert (tmp_path / "importance.png").stat().st_size > 1000
    assert no_importance_reason(study_with(3, ("a", "b"))) is None


def test_sampled_floats_are_shown_with_four_significant_digits(tmp_path):
    from contrastlab.experiments.grid import display_value
    from contrastlab.experiments.plan import make_tuned_plan
    from contrastlab.experiments.results import RunRecord, group_runs
    from contrastlab.experiments.tune_report import trial_rows

    assert [display_value(v) for v in ("0.05123456789012345", "0.05", "1e-3", "200", "cosine", "2.5e-07")] == [
        "0.05123", "0.05", "1e-3", "200", "cosine", "2.5e-07"
    ]  # fmt: skip
    study = study_with(1, ("loss.tau_plus",))
    header, rows = trial_rows(study)
    value = study.trials[0].params["loss.tau_plus"]
    assert rows[0][header.index("loss.tau_plus")] == f"{value:.4g}"

    exact = "0.05123456789012345"
    (tmp_path / "dcl").mkdir()
    record = {"plugin": "recsys", "loss": "dcl", "preset": "smoke", "sets": [], "params": {"loss.tau_plus": exact}}
    (tmp_path / "dcl" / "best.json").write_text(json.dumps({**record, "seeds": [1]}))
    (point,) = make_tuned_plan([tmp_path / "dcl"], 1, None, []).points
    assert point.label == "dcl tau_plus=0.05123" and point.run_name.startswith("tau_plus=0.05123-")
    assert point.overrides == [f"loss.tau_plus={exact}"]  # the run trains with the exact value
    recs = [
        RunRecord(tmp_path / str(v), "recsys", "dcl", 1, "smoke", {"loss.tau_plus": v}, "completed")
        for v in (exact, "0.1")
    ]
    assert [g.column for g in group_runs(recs)] == ["dcl tau_plus=0.05123", "dcl tau_plus=0.1"]


def test_a_prune_curve_never_logged_gives_one_warning(tmp_path, monkeypatch, capsys):
    from test_tune import fake_train

    from contrastlab.experiments import runner
    from contrastlab.experiments import tune as tn

    script = tmp_path / "fake_train.py"
    script.write_text(fake_train(1, 0))
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(script)])
    spec = fake_spec(tmp_path)
    spec.poll, spec.prune_on = 0.05, "eval/knn_top1"
    study = optuna.create_study(direction="maximize")
    for n, seed_point in enumerate(spec.points({"loss.tau_plus": "0.1"})):
        assert tn.train_locally(spec, seed_point, tmp_path / f"t{n}", study.ask(), prune=True) == 0.1
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "never logged 'eval/knn_top1'" in err and "eval/score" in err


def test_prune_on_refused_when_the_plugin_does_not_log_it(tmp_path):
    result = CliRunner().invoke(app, [*BASE, "--prune-on", "eval/knn_top1", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "--prune-on eval/knn_top1: plugin recsys never logs it" in result.output
    assert "eval/ndcg@20" in result.output and not (tmp_path / "out").exists()


def test_the_ray_backend_says_it_does_not_prune(tmp_path):
    from contrastlab.experiments.tune import ray_pruning_note

    spec = fake_spec(tmp_path)
    assert ray_pruning_note(spec) is None  # local backend
    spec.ray = {"address": None}
    assert ray_pruning_note(spec).startswith("trials are not pruned on the Ray backend")
    spec.pruner = "none"
    assert ray_pruning_note(spec) is None


def test_ray_resources_check_refuses_runs_the_cluster_cannot_fit():
    from contrastlab.experiments.ray_runner import check_resources

    cpu_only = {"CPU": 2.0, "memory": 1e9, "node:127.0.0.1": 1.0}
    with pytest.raises(ConfigError, match=r"--gpus-per-run 0.25: the Ray cluster at 1.2.3.4:6379 has no GPUs \("):
        check_resources(cpu_only, "1.2.3.4:6379", 1, 0.25)
    with pytest.raises(ConfigError, match=r"--gpus-per-run 2: the local Ray instance has only 1 GPU"):
        check_resources({"CPU": 8.0, "GPU": 1.0}, None, 1, 2)
    with pytest.raises(ConfigError, match=r"--cpus-per-run 4: .* has only 2 CPU\(s\) \(resources: CPU 2, memory"):
        check_resources(cpu_only, "auto", 4, 0)
    check_resources(cpu_only, "auto", 2, 0)
    check_resources({"CPU": 2.0, "GPU": 1.0}, "auto", 1, 0.25)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_with_parallel_local_trials_stops_and_requeues_every_running_trial(tmp_path, monkeypatch, signum):
    """--parallel 2: Ctrl-C (or ``kill PID``) reaches only the main thread; both trials' processes stop, both
    trials end FAIL with their parameters queued, and Optuna logs nothing about them."""
    import threading

    from contrastlab.experiments import runner
    from contrastlab.experiments import tune as tn
    from contrastlab.experiments.interrupts import sigterm_as_interrupt

    script = tmp_path / "slow_train.py"
    script.write_text(SLOW_TRAIN)
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(script)])
    spec = fake_spec(tmp_path / "out")
    spec.seeds, spec.poll = [1], 0.1
    study = optuna.create_study(direction="maximize", storage=f"sqlite:///{tmp_path / 'study.db'}")
    pid_files = [tmp_path / "out" / "trials" / f"{n:04d}" / "runs" / "pid" for n in (0, 1)]

    def interrupt_when_both_run() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(p.is_file() for p in pid_files):
            time.sleep(0.1)
        os.kill(os.getpid(), signum)

    previous = signal.getsignal(signal.SIGINT)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("optuna").addHandler(handler)
    threading.Thread(target=interrupt_when_both_run, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
            tn.optimize(study, spec, trials=2, parallel=2)
    finally:
        signal.signal(signal.SIGINT, previous)
        logging.getLogger("optuna").removeHandler(handler)
    states = sorted(t.state.name for t in study.get_trials(deepcopy=False))
    assert states == ["FAIL", "FAIL", "WAITING", "WAITING"], states
    assert not [r for r in records if r.levelno >= logging.WARNING], [r.getMessage() for r in records]
    for pid_file in pid_files:
        assert wait_dead(int(pid_file.read_text()), 12)


def test_ctrl_c_after_a_completed_trial_still_writes_best(tmp_path, monkeypatch):
    from contrastlab.experiments import tune as tn

    calls = []

    def first_completes(spec, point, trial_out, trial, prune, settled=None):
        calls.append(trial.number)
        if len(calls) > 1:
            raise KeyboardInterrupt
        run_dir = point.run_dir(trial_out)
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text("loss:\n  name: dcl\n")
        return 0.5

    monkeypatch.setattr(tn, "train_locally", first_completes)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, "--trials", "3", "--pruner", "none", "--out", str(out)])
    assert result.exit_code == 130, result.output
    assert json.loads((out / "best.json").read_text())["trial"] == 0
    assert (out / "best.yaml").read_text().startswith("# best trial 0: value 0.5")


OPEN_AT = """
import sys, time
from pathlib import Path
from types import SimpleNamespace
from contrastlab.experiments import tune as tn
plugin = SimpleNamespace(name="fake", primary_metric="eval/score", higher_is_better=True)
out = Path(sys.argv[1])
spec = tn.TuneSpec(plugin, "dcl", "smoke", ["train.epochs=1"], [tn.parse_search("loss.tau_plus=uniform(0.01,0.3)")],
                   [1], out)
while time.time() < float(sys.argv[2]):
    pass
tn.open_study(spec, f"sqlite:///{out / 'study.db'}", "s", "none")
"""


def test_commands_starting_together_on_a_new_storage_all_open_the_study(tmp_path):
    """Four `platform tune` commands on one new SQLite file (several workers of one study): each creates the schema
    and the study at the same moment. Before the retry, all but one failed with sqlalchemy's IntegrityError."""
    env = child_env()
    start = str(time.time() + 3)
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT, str(tmp_path), start], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(4)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outputs
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}")
    assert study.user_attrs["setup"]["preset"] == "smoke"


def test_a_best_trial_run_by_another_worker_still_gets_best_json(tmp_path):
    """Workers on several machines share --storage: the best trial's runs lie on another machine. best.json (all
    compare --tuned needs) was not written, and the worker said "no trial completed" with exit code 1."""
    from contrastlab.experiments import tune as tn

    spec = fake_spec(tmp_path)
    study = tn.open_study(spec, "sqlite://", "s", "none")
    (tmp_path / "best.yaml").write_text("# an earlier best trial\n")
    trial = study.ask({"loss.tau_plus": optuna.distributions.FloatDistribution(0.01, 0.3)})
    trial.set_user_attr("run_dirs", ["/elsewhere/trials/0007/runs/recsys/dcl/x-s1"])
    trial.set_user_attr("values", {"loss.tau_plus": "0.123"})
    study.tell(trial, 0.5)
    assert tn.write_best(study, spec) is None
    assert json.loads((tmp_path / "best.json").read_text())["params"] == {"loss.tau_plus": "0.123"}
    assert not (tmp_path / "best.yaml").exists()  # it named a trial that is no longer the best


def test_prune_on_a_loss_curve_is_refused_where_the_objective_rises(tmp_path):
    """The pruner reads the watched curve like the objective (higher is better for recsys's NDCG): on
    ``train/loss`` it would stop the trials whose loss falls fastest, the ones learning best."""
    result = CliRunner().invoke(app, [*BASE, "--prune-on", "train/loss", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "--prune-on train/loss: a loss curve falls as training improves" in result.output
    assert "eval/ndcg@20" in result.output and "train/loss," not in result.output
    assert not (tmp_path / "out").exists()


def test_prune_on_a_risk_is_refused_and_only_evaluation_curves_are_offered(tmp_path):
    """pu's classifier risks are its classifier's losses (lower is better) and passed the check; the refusal offered
    every other curve as one "that rises", train/epoch, train/lr and throughput among them."""
    args = ["tune", "--plugin", "pu", "--loss", "dcl", "--preset", "smoke", "--search",
            "loss.tau_plus=uniform(0.01,0.3)", "--prune-on", "classifier/risk", "--out", str(tmp_path / "pu")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--prune-on classifier/risk: a loss curve falls" in result.output, result.output
    assert "test/accuracy" in result.output and "pretrain/labeled_per_batch" not in result.output
    result = CliRunner().invoke(app, [*BASE, "--prune-on", "train/loss", "--out", str(tmp_path / "recsys")])
    assert result.exit_code == 2 and "eval/ndcg@20" in result.output, result.output
    assert "train/epoch" not in result.output and "train/clamped_frac" not in result.output


def test_ray_resources_check_needs_one_node_that_fits_a_whole_run():
    """Two 1-GPU nodes hold 2 GPUs in all, but a run asking for 2 GPUs needs them on one node: Ray would wait for
    it forever (the totals passed the check)."""
    from contrastlab.experiments.ray_runner import check_resources

    nodes = [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0, "GPU": 1.0}]
    totals = {"CPU": 16.0, "GPU": 2.0}
    with pytest.raises(ConfigError, match=r"--gpus-per-run 2 with --cpus-per-run 1: no node of the Ray cluster "
                                          r"at 1.2.3.4:6379 has that much at once \(its nodes: CPU 8, GPU 1; CPU 8"):
        check_resources(totals, "1.2.3.4:6379", 1, 2, nodes=nodes)
    with pytest.raises(ConfigError, match=r"--gpus-per-run 1 with --cpus-per-run 12: no node"):
        check_resources(totals, None, 12, 1, nodes=nodes)
    check_resources(totals, None, 8, 1, nodes=nodes)
    check_resources(totals, None, 1, 0.5, nodes=[*nodes, {"CPU": 2.0}])


def test_a_requeued_trial_continues_in_the_interrupted_trials_folder(tmp_path, monkeypatch):
    """An interrupted (or killed) trial was re-run from scratch in a new trials/NNNN folder, leaving its partial runs
    behind; the queued trial now trains in the interrupted trial's folder, where ``platform train --resume``
    continues its runs and finished seeds are skipped."""
    from contrastlab.experiments import tune as tn

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tn, "train_locally", interrupted)
    out = tmp_path / "out"
    assert CliRunner().invoke(app, [*BASE, "--out", str(out), "--trials", "1"]).exit_code == 130
    folders: list[Path] = []

    def trains(spec, point, trial_out, trial, prune, settled=None):
        folders.append(trial_out)
        return 0.5

    monkeypatch.setattr(tn, "train_locally", trains)
    result = CliRunner().invoke(app, [*BASE, "--out", str(out), "--trials", "1"])
    assert result.exit_code == 0, result.output
    study = optuna.load_study(study_name="recsys-dcl", storage=f"sqlite:///{out / 'study.db'}")
    failed, resumed = study.trials
    assert folders == [Path(failed.user_attrs["dir"])] and resumed.user_attrs["dir"] == failed.user_attrs["dir"]


def test_a_seed_that_finished_before_the_interruption_is_not_trained_again(tmp_path, monkeypatch):
    from contrastlab.experiments import tune as tn
    from contrastlab.experiments.tune import TuneSpec

    spec = TuneSpec.__new__(TuneSpec)
    monkeypatch.setattr(tn.subprocess, "Popen", lambda *a, **k: pytest.fail("a finished run was trained again"))
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    point = SimpleNamespace(run_dir=lambda out: out / "runs" / "r", run_name="r", grid=(), seed=1, plugin="recsys",
                            loss="dcl", preset=None, overrides=())
    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("seed: 1\n")
    (run_dir / "run.json").write_text(json.dumps({"status": "completed", "plugin": "recsys"}))
    (run_dir / "summary.json").write_text(json.dumps({"metrics": {"eval/ndcg@20": 0.25}}))
    spec.plugin = SimpleNamespace(primary_metric="eval/ndcg@20")
    spec.prune_on, spec.device, spec.parallel, spec.seeds = None, None, 1, [1]
    assert tn.train_locally(spec, point, tmp_path, trial, prune=False) == 0.25
