"""``platform tune``: one-line errors before anything is written, search-space parsing, and a real 4-trial study on
SQLite (recsys smoke, tiny data) that is killed mid-study, resumed to exactly 4 completed trials, and whose
best.yaml trains with ``platform train --config``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contrastlab.cli import app
from contrastlab.platform.errors import ConfigError

optuna = pytest.importorskip("optuna")

SRC = str(Path(__file__).resolve().parents[2] / "src")
TINY = [
    "--preset", "smoke", "--set", "train.epochs=1", "--set", "eval.every_epochs=1",
    "--set", "data.synthetic.users=100", "--set", "data.synthetic.items=100",
]  # fmt: skip
BASE = ["tune", "--plugin", "recsys", "--loss", "dcl", *TINY]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--search", "loss.beta=uniform(0.1,1)"], "loss.beta"),  # dcl has no beta
        (["--search", "train.epohcs=int(1,3)"], "train.epohcs"),
        (["--search", "loss.tau_plus=gauss(0.1,0.2)"], "bad distribution 'gauss(0.1,0.2)'"),
        (["--search", "loss.tau_plus=log-uniform(0,0.3)"], "needs low > 0"),
        (["--search", "loss.tau_plus=uniform(0.3,0.1)"], "low < high"),
        (["--search", "loss.tau_plus"], "expected KEY=DIST"),
        (["--search", "loss.tau_plus=choice(0.1,abc)"], "loss.tau_plus=abc is refused"),  # every choice is checked
        (["--search", "loss.tau_plus=uniform(0.1,2)"], "loss.tau_plus=2.0 is refused"),  # and both bounds
        (["--search", "loss.tau_plus=uniform(0.1,0.2)", "--search", "train.batch_size=int(0,2)"],
         "train.batch_size=0 is refused"),
        (["--search", "train.num_negatives=uniform(1,3)"], "use --search 'train.num_negatives=int(1,3)'"),  # int key
        (["--search", "encoder.dim=log-uniform(8,64)"], "use --search 'encoder.dim=log-int(8,64)'"),
        (["--search", "loss.tau_plus=uniform(0.01,0.3)", "--storage", "nosuchdb://x/y"], "--storage nosuchdb://x/y"),
        (["--search", "loss.tau_plus=uniform(0.01,0.3)", "--backend", "ray", "--address", "127.0.0.1:1"],
         "--address 127.0.0.1:1: no Ray cluster reachable"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, extra, message):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, *extra, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not out.exists()


def test_compare_unreachable_ray_address_writes_nothing(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "out"
    args = ["compare", "--plugin", "recsys", "--loss", "dcl", *TINY, "--out", str(out), "--backend", "ray"]
    result = CliRunner().invoke(app, [*args, "--address", "127.0.0.1:1"])
    assert result.exit_code == 2 and "no Ray cluster reachable" in result.output, result.output
    assert "Traceback" not in result.output and not out.exists()


def test_parse_search_kinds():
    from contrastlab.experiments.tune import parse_search

    assert parse_search("loss.tau_plus=log-uniform(0.001, 0.3)").args == (0.001, 0.3)
    assert parse_search("train.epochs=int(1,5)").kind == "int"
    assert parse_search("sampler.similarity=choice(cosine,bilinear)").args == ("cosine", "bilinear")
    with pytest.raises(ConfigError, match="two int bounds"):
        parse_search("train.epochs=int(1.5,3)")


def env() -> dict[str, str]:
    path = os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")


def states(url: str, *, owned: bool = False) -> list[str]:
    """The trials' states; with ``owned``, a RUNNING trial counts only once its driver has recorded its pid (a
    trial killed before that cannot be told from one another machine is starting, so it is not re-queued)."""
    try:
        trials = optuna.load_study(study_name="recsys-dcl", storage=url).trials
    except Exception:  # not created yet, or the schema is being created by the tune process
        return []
    return [t.state.name if not owned or "pid" in t.user_attrs else "STARTING" for t in trials]


@pytest.mark.slow
def test_killed_study_resumes_to_exactly_four_trials_and_best_config_trains(tmp_path):
    out = tmp_path / "tune"
    url = f"sqlite:///{out / 'study.db'}"
    cmd = [sys.executable, "-m", "contrastlab.cli", *BASE, "--search", "loss.tau_plus=log-uniform(0.001,0.3)"]
    cmd += ["--trials", "4", "--pruner", "none", "--out", str(out)]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env(), start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and first.poll() is None:  # kill it while trial 1 trains
        if (out / "study.db").is_file() and states(url, owned=True)[:2] == ["COMPLETE", "RUNNING"]:
            break
        time.sleep(0.3)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert states(url).count("COMPLETE") == 1, states(url)

    second = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    final = states(url)
    assert final.count("COMPLETE") == 4 and final.count("FAIL") == 1, final  # the killed trial, re-queued
    # the re-queued trial continued the killed trial's runs in its folder (it started over in a fifth folder)
    assert len(list((out / "trials").iterdir())) == 4, sorted(p.name for p in (out / "trials").iterdir())
    for name in ("best.yaml", "trials.csv", "trials.md", "history.png", "importance.png"):
        assert (out / name).is_file(), name

    train = [sys.executable, "-m", "contrastlab.cli", "train", "--plugin", "recsys", "--config", str(out / "best.yaml")]
    train += ["--logdir", str(tmp_path / "runs"), "--run-name", "best"]
    done = subprocess.run(train, capture_output=True, text=True, env=env(), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "runs" / "recsys" / "dcl" / "best" / "summary.json").is_file()


def test_tuned_plan_uses_each_studys_values_on_fresh_seeds(tmp_path):
    import json

    from contrastlab.experiments.plan import make_tuned_plan

    for loss, params in (("infonce", {"sampler.temperature": "0.3"}), ("dcl", {"loss.tau_plus": "0.05"})):
        (tmp_path / loss).mkdir()
        record = {"plugin": "recsys", "loss": loss, "preset": "smoke", "sets": ["train.epochs=1"], "params": params,
                  "seeds": [1, 2]}  # fmt: skip
        (tmp_path / loss / "best.json").write_text(json.dumps(record))
    plan = make_tuned_plan([tmp_path / "infonce", tmp_path / "dcl"], 2, None, [])
    assert [(p.loss, p.seed, p.grid) for p in plan.points] == [
        ("infonce", 3, (("sampler.temperature", "0.3"),)),
        ("infonce", 4, (("sampler.temperature", "0.3"),)),
        ("dcl", 3, (("loss.tau_plus", "0.05"),)),
        ("dcl", 4, (("loss.tau_plus", "0.05"),)),
    ]
    assert plan.preset == "smoke" and plan.points[0].sets == ("train.epochs=1",) and plan.rows == []
    with pytest.raises(ConfigError, match="used for tuning"):
        make_tuned_plan([tmp_path / "dcl"], None, "2,5", [])
    with pytest.raises(ConfigError, match=r"no best\.json"):
        make_tuned_plan([tmp_path], None, None, [])


def _tuned_dirs(tmp_path, budgets: dict[str, int | None]) -> list:
    """One best.json per loss (recsys, smoke), with its study's number of trials (``None``: not recorded)."""
    import json

    dirs = []
    for loss, trials in budgets.items():
        (tmp_path / loss).mkdir(parents=True)
        record = {"plugin": "recsys", "loss": loss, "preset": "smoke", "sets": [], "seeds": [1],
                  "params": {"sampler.temperature": "0.3"}, **({} if trials is None else {"trials": trials})}
        (tmp_path / loss / "best.json").write_text(json.dumps(record))
        dirs.append(tmp_path / loss)
    return dirs


def test_tuned_plan_shows_each_studys_budget_and_warns_when_they_differ(tmp_path):
    """New-user trial: "does debiasing help?" needs the same tuning budget per loss (tune.md), yet nothing in
    compare --tuned said how many trials each study ran; 3 against 40 passed silently."""
    from contrastlab.experiments.plan import make_tuned_plan

    a, b = _tuned_dirs(tmp_path / "differ", {"infonce": 3, "dcl": 40})
    plan = make_tuned_plan([a, b], 1, None, [])
    assert plan.title == "tuned recsys: infonce (3 trials), dcl (40 trials)"
    assert plan.warnings == [f"warning: the studies ran different numbers of trials ({a}: 3, {b}: 40); a loss tuned "
                             "longer can win by its budget alone: give every loss the same --trials"]
    assert plan.spec["trials"] == {str(a): 3, str(b): 40}
    a, b = _tuned_dirs(tmp_path / "same", {"infonce": 1, "dcl": 1})
    plan = make_tuned_plan([a, b], 1, None, [])
    assert plan.title == "tuned recsys: infonce (1 trial), dcl (1 trial)" and plan.warnings == []
    a, b = _tuned_dirs(tmp_path / "old", {"infonce": None, "dcl": 5})  # a best.json from before budgets were kept
    plan = make_tuned_plan([a, b], 1, None, [])
    assert plan.title == "tuned recsys: infonce, dcl (5 trials)" and plan.warnings == []


def test_compare_tuned_prints_the_budget_warning_under_its_header(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a, b = _tuned_dirs(tmp_path, {"infonce": 3, "dcl": 40})
    result = CliRunner().invoke(app, ["compare", "--tuned", str(a), "--tuned", str(b), "--seeds", "1", "--dry-run"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("tuned recsys: infonce (3 trials), dcl (40 trials): preset smoke, 2 runs"), lines
    assert lines[1].startswith("warning: the studies ran different numbers of trials"), lines
    assert "warning" not in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [('{"plugin": "recsys"}', "best.json is not a `platform tune` record (missing preset, loss, params)"),
     ('{"plugin": "recsys", "preset": "smoke", "loss": "dcl"}',
      "best.json is not a `platform tune` record (missing params)"),
     ('{"plugin": "recsys", "preset": "smoke", "loss": "dcl", "params": [1]}',
      "best.json is not a `platform tune` record (params is not a mapping)"),
     ("[1, 2]", "best.json is not a `platform tune` record (not a JSON object)"),
     ("{not json", "best.json is not a `platform tune` record (not valid JSON)"),
     ('{"plugin": ["recsys"], "preset": "smoke", "loss": "dcl", "params": {}}',
      "best.json is not a `platform tune` record (plugin is not a string)"),
     ('{"plugin": "recsys", "preset": "smoke", "loss": 3, "params": {}}',
      "best.json is not a `platform tune` record (loss is not a string)"),
     ('{"plugin": "recsys", "preset": "smoke", "loss": "dcl", "params": {}, "sets": [1]}',
      "best.json is not a `platform tune` record (sets is not a list of strings)"),
     ('{"plugin": "recsys", "preset": "smoke", "loss": "dcl", "params": {}, "seeds": ["a"]}',
      "best.json is not a `platform tune` record (seeds is not a list of integers)")],
    ids=["no-preset", "no-params", "params-list", "a-list", "malformed", "plugin-list", "loss-number", "sets-int",
         "seeds-text"],
)
def test_a_damaged_best_json_is_one_line(tmp_path, content, message):
    """A hand-edited or truncated best.json raised KeyError with a traceback (`compare --tuned DIR`), or was
    reported as missing when it was there but not an object."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "best.json").write_text(content)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["compare", "--tuned", str(tmp_path / "t"), "--out", str(out), "--dry-run"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert f"--tuned {tmp_path / 't'}: {tmp_path / 't' / message}" in " ".join(result.output.split()), result.output
    assert not out.exists()


def test_tuned_studies_of_different_plugins_or_one_loss_twice_name_the_folders(tmp_path):
    """The clash messages printed Python tuples (`[('recsys', 'smoke'), ('ring', 'smoke')]`) and `(hcl, hcl)`."""
    import json

    from contrastlab.experiments.plan import make_tuned_plan

    for name, plugin, loss in (("a", "recsys", "dcl"), ("b", "graph", "dcl"), ("c", "recsys", "dcl")):
        (tmp_path / name).mkdir()
        record = {"plugin": plugin, "loss": loss, "preset": "smoke", "params": {"loss.tau_plus": "0.1"}}
        (tmp_path / name / "best.json").write_text(json.dumps(record))
    a, b, c = (tmp_path / n for n in "abc")
    with pytest.raises(ConfigError) as info:
        make_tuned_plan([a, b], 1, None, [])
    assert str(info.value) == (f"--tuned: the studies differ in plugin or preset ({a}: recsys, preset smoke; {b}: "
                               "graph, preset smoke); compare like with like")
    with pytest.raises(ConfigError) as info:
        make_tuned_plan([a, c], 1, None, [])
    assert str(info.value) == (f"--tuned: {a} and {c} both tuned loss dcl; compare their best.json values by hand, "
                               "or tune once more")


def fake_train(steps: int, pause: float) -> str:
    """A fake ``platform train`` script: ``steps`` points of ``eval/score`` = 0.1, ``pause`` s apart, then a
    completed run with that value."""
    return f"""
import json, sys, time
from pathlib import Path
argv = sys.argv[1:]
opt = lambda name: argv[argv.index(name) + 1]
run_dir = Path(opt("--logdir")) / opt("--plugin") / opt("--loss") / opt("--run-name")
run_dir.mkdir(parents=True)
(run_dir / "config.yaml").write_text("seed: 1\\n")
with open(run_dir / "metrics.jsonl", "a", buffering=1) as fh:
    for step in range({steps}):
        fh.write(json.dumps({{"step": step, "eval/score": 0.1}}) + "\\n")
        time.sleep({pause})
(run_dir / "summary.json").write_text(json.dumps({{"metrics": {{"eval/score": 0.1}}}}))
(run_dir / "run.json").write_text(json.dumps({{"status": "completed"}}))
"""


FAKE_TRAIN = fake_train(400, 0.1)  # 40 s: pruned at its first point, long before (even on a busy machine)


def pruning_setup(tmp_path, monkeypatch, script: str, earlier_steps: int, seeds: list[int], poll: float):
    """A study whose one finished trial reported 1.0 at ``earlier_steps`` steps (the median a new trial is judged
    against), and a tune spec whose runs are the fake ``platform train`` ``script``."""
    from types import SimpleNamespace

    from contrastlab.experiments import runner
    from contrastlab.experiments import tune as tn

    path = tmp_path / "fake_train.py"
    path.write_text(script)
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(path)])
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(n_startup_trials=1))
    earlier = study.ask()
    for step in range(earlier_steps):
        earlier.report(1.0, step)
    study.tell(earlier, 1.0)
    plugin = SimpleNamespace(name="fake", primary_metric="eval/score", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.3)")], seeds,
                       tmp_path)
    spec.poll = poll
    return study, spec


def test_pruning_reads_the_curve_while_the_run_trains_and_stops_it(tmp_path, monkeypatch):
    from contrastlab.experiments import tune as tn

    study, spec = pruning_setup(tmp_path, monkeypatch, FAKE_TRAIN, 40, [1], poll=0.1)
    trial = study.ask()
    (point,) = spec.points({"loss.tau_plus": "0.1"})
    start = time.monotonic()
    with pytest.raises(optuna.TrialPruned):
        tn.train_locally(spec, point, tmp_path / "t", trial, prune=True)
    assert time.monotonic() - start < 20  # stopped well before the 40 s the fake run takes
    assert not (point.run_dir(tmp_path / "t") / "summary.json").exists()


def test_a_trial_records_its_driver_before_anything_else(tmp_path):
    """A driver killed while its trial samples left a RUNNING trial without host/pid, which recover_stale can never
    re-queue (the killed-study test above was flaky for this): the owner is now recorded first."""
    from types import SimpleNamespace

    from contrastlab.experiments import tune as tn

    class StopError(Exception):
        pass

    class FakeTrial:
        number, user_attrs = 0, {}

        def set_user_attr(self, key, value):
            self.user_attrs[key] = value

        def suggest_float(self, *args, **kwargs):
            raise StopError(dict(self.user_attrs))  # the driver is killed while sampling

    plugin = SimpleNamespace(name="recsys", primary_metric="eval/ndcg@20", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.2)")], [1], tmp_path)
    with pytest.raises(StopError) as info:
        tn.objective(spec, FakeTrial())
    assert info.value.args[0] == {"host": socket.gethostname(), "pid": os.getpid()}


@pytest.mark.parametrize("seeds", [[1], [1, 2]])
def test_a_run_that_finished_is_pruned_only_when_the_trial_has_more_seeds(tmp_path, monkeypatch, seeds):
    """A run that ends between two reads of its curve: below the median, a one-seed trial still completes with its
    value (pruning it lost a result already paid for); a trial with more seeds is pruned, so they do not run."""
    from contrastlab.experiments import tune as tn

    # poll 5 s: the run ends before the driver reads its curve again
    study, spec = pruning_setup(tmp_path, monkeypatch, fake_train(3, 0.0), 3, seeds, poll=5.0)
    trial = study.ask()
    point = spec.points({"loss.tau_plus": "0.1"})[0]
    if len(seeds) == 1:
        assert tn.train_locally(spec, point, tmp_path / "t", trial, prune=True) == 0.1
    else:
        with pytest.raises(optuna.TrialPruned):
            tn.train_locally(spec, point, tmp_path / "t", trial, prune=True)
    assert trial.storage.get_trial(trial._trial_id).intermediate_values == {0: 0.1, 1: 0.1, 2: 0.1}
