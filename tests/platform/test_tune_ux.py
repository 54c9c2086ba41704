"""New-user review of ``platform tune`` and ``platform compare --tuned`` (issue 11): errors that name the option
that caused them, a missing CUDA device refused up front, one line per trial (and none of Optuna's tracebacks),
failed trials replaced until ``--trials`` finish but 3 in a row stop the command, queued trials' parameters in
the tables, integer trial ticks, and plain (bar-free) compare output when stderr is not a terminal. Training is a
fake ``platform train`` script, so every test takes seconds."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contrastlab.cli import app
from contrastlab.platform.errors import ConfigError

optuna = pytest.importorskip("optuna")

TINY = [
    "--preset", "smoke", "--set", "train.epochs=1", "--set", "eval.every_epochs=1",
    "--set", "data.synthetic.users=100", "--set", "data.synthetic.items=100",
]  # fmt: skip
SEARCH = ["--search", "loss.tau_plus=uniform(0.01,0.3)"]
BASE = ["tune", "--plugin", "recsys", "--loss", "dcl"]

# A fake `platform train`: fails ("RuntimeError: boom" as its last line) while FAILS (a file) holds a positive
# count, decrementing it; otherwise writes a completed run whose primary metric is 0.25.
FAKE_TRAIN = """
import json, sys
from pathlib import Path
argv = sys.argv[1:]
opt = lambda name: argv[argv.index(name) + 1]
fails = Path(sys.argv[0]).with_name("FAILS")
left = int(fails.read_text()) if fails.is_file() else 0
if left != 0:
    fails.write_text(str(left - 1))
    print("Traceback (most recent call last):\\nRuntimeError: boom", flush=True)
    sys.exit(1)
run_dir = Path(opt("--logdir")) / opt("--plugin") / opt("--loss") / opt("--run-name")
run_dir.mkdir(parents=True)
(run_dir / "config.yaml").write_text("seed: 1\\n")
(run_dir / "summary.json").write_text(json.dumps({"metrics": {"eval/ndcg@20": 0.25}}))
(run_dir / "run.json").write_text(json.dumps({"status": "completed"}))
"""


class Records(logging.Handler):
    """Every log record Optuna emits (to prove its failure warnings stay off the terminal)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def fake_train(tmp_path, monkeypatch):
    """Install the fake trainer; returns a function setting how many runs fail first (-1: all)."""
    from contrastlab.experiments import runner

    script = tmp_path / "bin" / "fake_train.py"
    script.parent.mkdir()
    script.write_text(FAKE_TRAIN)
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(script)])
    return lambda n: (script.parent / "FAILS").write_text(str(n))


def invoke(args: list[str]) -> tuple[object, Records]:
    records = Records()
    logging.getLogger("optuna").addHandler(records)
    try:
        return CliRunner().invoke(app, args), records
    finally:
        logging.getLogger("optuna").removeHandler(records)


def test_three_failed_trials_in_a_row_stop_with_one_line_each_and_no_traceback(tmp_path, fake_train):
    fake_train(-1)
    out = tmp_path / "out"
    result, records = invoke([*BASE, *TINY, *SEARCH, "--trials", "5", "--pruner", "none", "--out", str(out)])
    assert result.exit_code == 1, result.output
    for n in range(3):
        log = out / "trials" / f"{n:04d}" / "logs"
        assert f"trial {n} failed: RuntimeError: boom; log: {log}" in result.output, result.output
    assert "trial 3" not in result.output  # stopped after 3 in a row, not 5
    assert "3 trials in a row failed; see trials.md and the logs under trials/" in result.output
    assert "Traceback" not in result.output and not [r for r in records.lines if "failed" in r], records.lines
    study = optuna.load_study(study_name="recsys-dcl", storage=f"sqlite:///{out / 'study.db'}")
    assert [t.state.name for t in study.trials] == ["FAIL"] * 3


def test_failed_trials_do_not_count_towards_trials_and_each_trial_says_start_and_end(tmp_path, fake_train):
    fake_train(2)  # the first two trials fail, then every run completes
    out = tmp_path / "out"
    result, _ = invoke([*BASE, *TINY, *SEARCH, "--trials", "2", "--pruner", "none", "--out", str(out)])
    assert result.exit_code == 0, result.output
    study = optuna.load_study(study_name="recsys-dcl", storage=f"sqlite:///{out / 'study.db'}")
    assert [t.state.name for t in study.trials] == ["FAIL", "FAIL", "COMPLETE", "COMPLETE"]
    tau = study.trials[2].params["loss.tau_plus"]
    assert f"trial 2: tau_plus={tau:.4g}, seed 1/1" in result.output, result.output
    assert "trial 2: complete, eval/ndcg@20 0.25 (" in result.output
    assert "best.json" in result.output and (out / "best.json").is_file()


def test_a_cuda_device_this_machine_lacks_is_refused_before_anything_runs(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, *TINY, *SEARCH, "--device", "cuda", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "--device cuda: device 'cuda' requested but CUDA is not available here" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize(
    "args, message, not_in",
    [
        ([*TINY, "--set", "nope.x=1", *SEARCH], "--set nope.x=1: unknown config key 'nope'", "--search"),
        (["--preset", "nope", *SEARCH], "unknown recsys preset 'nope'", "--search"),
        ([*TINY, "--search", "seed=int(1,3)"], "--search seed: seeds are not searched; use --seeds-per-trial",
         "--set"),
        ([*TINY, "--search", "loss.name=choice(dcl,hcl)"],
         "--search loss.name: the loss is fixed by --loss; run one study per loss", "--set"),
        ([*TINY, "--search", "loss..x=uniform(0.1,0.2)"], "--search 'loss..x=uniform(0.1,0.2)': bad key", "--set"),
        (SEARCH, "--preset is required for platform tune --plugin recsys", "--recipe"),
        ([*TINY, "--set", "seed=3", *SEARCH], "--set seed: cannot be set here; use --seeds-per-trial", "--seed-list"),
        ([*TINY, *SEARCH, "--trials", "0"], "--trials 0: must be ≥ 1", "--parallel"),
        ([*TINY, *SEARCH, "--seeds-per-trial", "-1"], "--seeds-per-trial -1: must be ≥ 1", "--trials"),
        ([*TINY, *SEARCH, "--parallel", "0"], "--parallel 0: must be ≥ 1", "--seeds-per-trial"),
        ([*TINY, *SEARCH, "--search", "loss.tau_plus=uniform(0.1,0.2)", "--search", "train.epochs=int(1,2)"],
         "--search: loss.tau_plus is given twice", "train.epochs"),
    ],
)  # fmt: skip
def test_each_error_names_the_option_that_caused_it(tmp_path, args, message, not_in):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.output and not_in not in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_resume_with_another_preset_names_the_preset_before_checking_its_data(tmp_path, monkeypatch):
    from contrastlab.experiments import tune as tn
    from contrastlab.platform.plugins import get_task_plugin

    def no_data(self, config):
        raise AssertionError("the stored setup must be compared before the data is checked")

    out = tmp_path / "out"
    out.mkdir()
    spec = tn.TuneSpec(get_task_plugin("recsys"), "dcl", "smoke", [], [tn.parse_search(SEARCH[1])], [1], out)
    tn.open_study(spec, f"sqlite:///{out / 'study.db'}", "recsys-dcl", "median")
    monkeypatch.setattr(type(get_task_plugin("recsys")), "check", no_data)
    result = CliRunner().invoke(app, [*BASE, "--preset", "paper", *SEARCH, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "created with --preset smoke, this command says --preset paper" in result.output, result.output
    assert sorted(p.name for p in out.iterdir()) == ["study.db"]


def make_tuned(tmp_path: Path) -> list[Path]:
    dirs = []
    for loss, params in (("infonce", {"sampler.temperature": "0.13654321"}), ("dcl", {"loss.tau_plus": "0.05"})):
        (tmp_path / loss).mkdir()
        record = {"plugin": "recsys", "loss": loss, "preset": "smoke", "sets": [], "params": params, "seeds": [1]}
        (tmp_path / loss / "best.json").write_text(json.dumps(record))
        dirs.append(tmp_path / loss)
    return dirs


def test_compare_tuned_refuses_a_set_of_a_tuned_key_and_names_extra_options(tmp_path):
    from contrastlab.experiments.plan import make_tuned_plan

    dirs = make_tuned(tmp_path)
    message = f"--set sampler.temperature: tuned in {dirs[0]} (0.1365); drop it or tune again"
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        make_tuned_plan(dirs, 1, None, [("sampler.temperature", "0.5")])
    assert make_tuned_plan(dirs, 1, None, [("train.epochs", "1")]).points[0].sets == ("train.epochs=1",)
    out = tmp_path / "out"
    args = ["compare", "--tuned", str(dirs[0]), "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--set", "sampler.temperature=0.5"])
    assert result.exit_code == 2 and message in result.output, result.output
    result = CliRunner().invoke(app, [*args, "--plugin", "recsys", "--preset", "smoke"])
    assert result.exit_code == 2, result.output
    assert "values from the studies; drop --plugin, --preset" in result.output and not out.exists()


def test_trials_tables_show_queued_params_and_the_directory(tmp_path):
    from contrastlab.experiments.tune_report import write_tables

    study = optuna.create_study(direction="maximize")
    trial = study.ask({"loss.tau_plus": optuna.distributions.FloatDistribution(0.01, 0.3)})
    trial.set_user_attr("dir", str(tmp_path / "trials" / "0000"))
    study.tell(trial, 0.5)
    study.enqueue_trial({"loss.tau_plus": 0.123456})
    write_tables(study, tmp_path, "eval/score")
    csv_rows = (tmp_path / "trials.csv").read_text().splitlines()
    assert csv_rows[2].startswith("1,WAITING,,0.1235,"), csv_rows
    md = (tmp_path / "trials.md").read_text()
    assert "| trial | state | value | loss.tau_plus | seconds | dir |" in md
    assert "trials/0000" in md and "| 1 | WAITING |  | 0.1235 |" in md, md
    assert "| **0.500000** |" in md, md  # values with 6 significant digits, trailing zeros kept (aligned)


def test_history_has_integer_trial_ticks_and_importance_says_why_once(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    from contrastlab.experiments.tune_report import write_plots

    study = optuna.create_study(direction="maximize")
    for value in (0.1, 0.3):
        trial = study.ask({"loss.tau_plus": optuna.distributions.FloatDistribution(0.01, 0.3)})
        study.tell(trial, value)
    figures, texts = [], []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))
    for name in ("text", "set_title"):
        original = getattr(Axes, name)

        def record(self, *args, _original=original, **kwargs):
            texts.extend(a for a in args if isinstance(a, str))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Axes, name, record)
    write_plots(study, tmp_path, "eval/score")
    ticks = figures[0].axes[0].get_xticks()
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks
    reason = "one parameter (loss.tau_plus): importance is 1.0 by definition"
    assert sum(reason in " ".join(t.split()) for t in texts) == 1, texts  # once (the text is wrapped)


def test_counts_and_plain_compare_output_without_a_terminal(tmp_path, monkeypatch):
    from rich.console import Console

    from contrastlab.experiments import grid as cmp
    from contrastlab.experiments import runner

    assert (cmp.count(1, "run"), cmp.count(0, "run"), cmp.count(3, "trial")) == ("1 run", "0 runs", "3 trials")
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(script)])
    log = tmp_path / "stderr.txt"
    with open(log, "w") as fh:
        console = Console(file=fh, force_terminal=False, width=100)
        point = cmp.GridPoint("recsys", "dcl", 1, "smoke")
        results = runner.run_grid([point], tmp_path / "out", slots=[None], console=console)
    text = log.read_text()
    assert [r.status for r in results] == ["completed"], text
    assert "done dcl s1" in text and "grid: " in text and "━" not in text, text


def test_help_and_docs_agree_on_outputs_direction_presets_and_options():
    import re

    from contrastlab.platform.plugins import get_task_plugin

    root = Path(__file__).resolve().parents[2]
    tune_help = " ".join(CliRunner().invoke(app, ["tune", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "maximising or minimising as the plugin declares" in tune_help and "best.json" in tune_help
    gpu_sized = [p for p in ("curl", "simclr", "pu", "recsys", "graph") if get_task_plugin(p).gpu_presets]
    compare_doc = (root / "docs" / "compare.md").read_text()
    named = ", ".join(gpu_sized[:-1]) + f" and {gpu_sized[-1]}"
    assert f"required for {named}" in compare_doc
    for command in ("tune", "compare"):
        text = " ".join(CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output.split())
        assert f"({', '.join(gpu_sized)})" in text, (command, text)
    compare_help = CliRunner().invoke(app, ["compare", "--help"], env={"COLUMNS": "200"}).output
    table = "\n".join(line for line in compare_doc.splitlines() if line.startswith("| `--"))
    options = set(re.findall(r"(--[a-z][a-z-]+)", compare_help)) - {"--help", "--no-shared-fs"}
    missing = sorted(o for o in options if f"`{o}" not in table and f"/{o}" not in table)
    ray_options = {"--backend", "--address", "--cpus-per-run", "--gpus-per-run", "--max-retries", "--shared-fs"}
    assert not [o for o in missing if o not in ray_options], missing  # Ray options: "Beyond one machine"


def test_a_user_error_inside_a_trial_is_one_line_without_optunas_traceback(tmp_path, monkeypatch):
    from contrastlab.experiments import tune as tn

    def refused(*args, **kwargs):
        raise ConfigError("a worker refused the run")

    monkeypatch.setattr(tn, "train_locally", refused)
    result, records = invoke([*BASE, *TINY, *SEARCH, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "error: a worker refused the run" in result.output and "Traceback" not in result.output
    assert not [r for r in records.lines if "failed" in r], records.lines


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc (a folder nobody can create in)")
def test_a_sqlite_storage_in_a_folder_nothing_can_be_created_in_is_one_line(tmp_path):
    """`--storage sqlite:////proc/x.db` passed the URL check (the folder exists) and then crashed with SQLAlchemy's
    OperationalError traceback (exit 1) when Optuna created the database."""
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, *TINY, *SEARCH, "--out", str(out), "--storage", "sqlite:////proc/x.db"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert "--storage sqlite:////proc/x.db: cannot create anything in /proc" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_a_storage_file_that_is_not_a_study_database_is_one_line(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "study.db").write_text("not a database\n")
    result = CliRunner().invoke(app, [*BASE, *TINY, *SEARCH, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"storage sqlite:///{out / 'study.db'}: cannot open it" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert sorted(p.name for p in out.iterdir()) == ["study.db"]


def test_parallel_trials_stop_at_exactly_trials(tmp_path, fake_train):
    fake_train(0)
    out = tmp_path / "out"
    args = [*BASE, *TINY, *SEARCH, "--trials", "3", "--parallel", "2", "--pruner", "none", "--out", str(out)]
    result, _ = invoke(args)
    assert result.exit_code == 0, result.output
    study = optuna.load_study(study_name="recsys-dcl", storage=f"sqlite:///{out / 'study.db'}")
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3


def test_compare_tuned_refuses_studies_tuned_with_different_sets(tmp_path):
    from contrastlab.experiments.plan import make_tuned_plan

    dirs = make_tuned(tmp_path)
    record = json.loads((dirs[1] / "best.json").read_text())
    record["sets"] = ["loss.beta=1.0"]  # a loss's own key may differ between studies
    (dirs[1] / "best.json").write_text(json.dumps(record))
    assert len(make_tuned_plan(dirs, 1, None, []).points) == 2
    record["sets"] = ["train.epochs=60"]  # a shared key may not: the comparison would not be like with like
    (dirs[1] / "best.json").write_text(json.dumps(record))
    with pytest.raises(ConfigError, match=r"tuned with different --set values .*train\.epochs=60.*like with like"):
        make_tuned_plan(dirs, 1, None, [])


def test_device_on_the_ray_backend_is_refused_in_one_line(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, *TINY, *SEARCH, "--backend", "ray", "--device", "cuda", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "--device cuda: on the Ray backend a run trains on a GPU when it gets one" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_parallel_local_runs_split_the_cores(tmp_path, monkeypatch):
    from contrastlab.experiments import tune as tn

    seen: list[str] = []

    class StopError(Exception):
        pass

    def popen(cmd, env, **kwargs):
        seen.append(env["OMP_NUM_THREADS"])
        raise StopError

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(tn.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(tn.subprocess, "Popen", popen)
    from types import SimpleNamespace

    plugin = SimpleNamespace(name="fake", primary_metric="eval/score", higher_is_better=True)
    spec = tn.TuneSpec(plugin, "dcl", "smoke", [], [tn.parse_search("loss.tau_plus=uniform(0.01,0.3)")], [1], tmp_path)
    spec.parallel = 4
    (point,) = spec.points({"loss.tau_plus": "0.1"})
    with pytest.raises(StopError):
        tn.train_locally(spec, point, tmp_path / "t", optuna.create_study().ask(), prune=False)
    assert seen == ["2"]
