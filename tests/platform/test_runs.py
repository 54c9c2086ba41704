"""Runs: directory layout, TensorBoard scalars, summary, reproducibility, eval, interrupt/kill and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from toy_dist import install_fake_toy_dist

import contrastlab as cl
from contrastlab.platform.plugins import PluginManager
from contrastlab.testing import fresh_plugin_manager, run_cli

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = Path(sys.executable).with_name("platform")


def only_run(root: Path) -> Path:
    runs = [p for p in root.glob("*/*/*") if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def train_toy(tmp_path: Path, *extra: str) -> tuple[int, str]:
    return run_cli(
        [
            "train",
            "--plugin",
            "toy_clusters",
            "--loss",
            "dcl",
            "--logdir",
            str(tmp_path),
            "--seed",
            "3",
            "--set",
            "train.steps=40",
            "--set",
            "checkpoint_every=10",
            *extra,
        ]
    )


def test_train_writes_a_complete_run_dir(toy_pm: PluginManager, tmp_path: Path) -> None:
    code, out = train_toy(tmp_path)
    assert code == 0, out
    run_dir = only_run(tmp_path)
    assert run_dir.parent.name == "dcl" and run_dir.parent.parent.name == "toy_clusters"
    assert run_dir.name.endswith("-s3")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["loss"]["name"] == "dcl" and "tau_plus" in config["loss"]
    summary = json.loads((run_dir / "summary.json").read_text())
    for key in ["metrics", "hardware", "wall_time_s", "versions", "labels_used", "primary_metric"]:
        assert key in summary
    assert summary["labels_used"] is False
    assert summary["versions"]["torch"] and summary["hardware"]["cpu_count"] >= 1
    assert 0.0 <= summary["metrics"]["eval/nn_accuracy"] <= 1.0
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    assert [r["step"] for r in read_metrics(run_dir) if "train/loss" in r] == [20, 40]
    assert [s for s, _ in scalars(run_dir, "train/loss")] == [20, 40]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir())[-1] == "step_000000000040.pt"
    assert "platform tensorboard" in out and "ETA" in out


def test_label_aware_loss_records_labels_used(toy_pm: PluginManager, tmp_path: Path) -> None:
    code, out = run_cli(
        ["train", "--plugin", "toy_clusters", "--loss", "supcon", "--logdir", str(tmp_path), "--set", "train.steps=5"]
    )
    assert code == 0, out
    assert json.loads((only_run(tmp_path) / "summary.json").read_text())["labels_used"] is True


def test_same_seed_same_metrics(toy_pm: PluginManager, tmp_path: Path) -> None:
    results = []
    for name in ("a", "b"):
        code, out = train_toy(tmp_path / name)
        assert code == 0, out
        run_dir = only_run(tmp_path / name)
        results.append(
            (
                [r.get("train/loss") for r in read_metrics(run_dir)],
                json.loads((run_dir / "summary.json").read_text())["metrics"],
            )
        )
    assert results[0] == results[1]


def test_eval_reevaluates_the_checkpoint(toy_pm: PluginManager, tmp_path: Path) -> None:
    code, out = train_toy(tmp_path)
    assert code == 0, out
    run_dir = only_run(tmp_path)
    code, out = run_cli(["eval", str(run_dir)])
    assert code == 0, out
    evaluated = json.loads((run_dir / "eval.json").read_text())
    trained = json.loads((run_dir / "summary.json").read_text())["metrics"]
    assert evaluated["eval/nn_accuracy"] == pytest.approx(trained["eval/nn_accuracy"])
    assert evaluated["checkpoint_step"] == 40  # which checkpoint it evaluated
    code, out = run_cli(["eval", str(run_dir), "--episodes", "3", "--video", str(tmp_path / "v.gif")])
    assert code == 0 and "has no evaluation episodes; --episodes is ignored" in out, out
    assert "has no evaluation video; --video is ignored" in out and not (tmp_path / "v.gif").exists()
    # an ignored --video is not checked: a directory (an error for a plugin with videos) is no error here
    code, out = run_cli(["eval", str(run_dir), "--video", str(tmp_path)])
    assert code == 0 and "--video is ignored" in out, out


class _Interrupting:
    """A plugin module whose task raises KeyboardInterrupt after a given step, once."""

    def __init__(self, stop_after: int) -> None:
        from contrastlab_toy.task import ToyTask

        stop = stop_after

        class InterruptedToy(ToyTask):
            name = "toy_interrupt"
            armed = True

            def train(self, config, run):
                original = run.save_checkpoint

                def save_then_maybe_stop(state, step):
                    path = original(state, step)
                    if InterruptedToy.armed and step >= stop:
                        InterruptedToy.armed = False
                        raise KeyboardInterrupt
                    return path

                run.save_checkpoint = save_then_maybe_stop
                return super().train(config, run)

        self.task = InterruptedToy

    @cl.hookimpl
    def register_plugins(self, register) -> None:
        register(self.task)


def test_ctrl_c_then_resume_completes_without_repeating_steps(tmp_path: Path) -> None:
    import contrastlab_toy.plugin

    plugin = _Interrupting(stop_after=20)
    with fresh_plugin_manager(contrastlab_toy.plugin, plugin, package="contrastlab-toy"):
        code, out = run_cli(
            [
                "train",
                "--plugin",
                "toy_interrupt",
                "--loss",
                "dcl",
                "--logdir",
                str(tmp_path),
                "--set",
                "train.steps=40",
                "--set",
                "checkpoint_every=10",
                "--set",
                "train.log_every=10",
            ]
        )
        assert code == 130, out
        run_dir = only_run(tmp_path)
        assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
        assert "--resume" in out
        code, out = run_cli(["train", "--resume", str(run_dir)])
        assert code == 0, out
    steps = [r["step"] for r in read_metrics(run_dir) if "train/loss" in r]
    assert steps == [10, 20, 30, 40]
    # sorted: both event files are written in the same second by this one process, so TensorBoard's name order
    # (…<time>.<host>.<pid>.<uid>) puts the resumed run's first when the uid goes from 9 to 10
    assert sorted(s for s, _ in scalars(run_dir, "train/loss")) == [10, 20, 30, 40]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"


@pytest.mark.slow
def test_killed_process_resumes(tmp_path: Path) -> None:
    """SIGKILL in the middle of training (no cleanup at all), then --resume finishes the run."""
    site = tmp_path / "site"
    install_fake_toy_dist(site)
    env = dict(os.environ)
    env.pop("CONTRASTLAB_PLUGINS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT / "examples" / "plugin_template" / "src")])
    logdir = tmp_path / "runs"
    proc = subprocess.Popen(
        [
            str(PLATFORM),
            "train",
            "--plugin",
            "toy_clusters",
            "--loss",
            "infonce",
            "--logdir",
            str(logdir),
            "--set",
            "train.steps=2500",  # ≈ 8 s after the first checkpoint: the kill lands before the end on a busy machine
            "--set",
            "checkpoint_every=50",
            "--set",
            "train.log_every=10",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if list(logdir.glob("*/*/*/checkpoints/step_*.pt")):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_dir = only_run(logdir)
    assert not (run_dir / "summary.json").exists()
    result = subprocess.run(
        [str(PLATFORM), "train", "--resume", str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    steps = [r["step"] for r in read_metrics(run_dir) if "train/loss" in r]
    assert steps == list(range(10, 2501, 10))


def test_cpu_warning_for_gpu_sized_preset(tmp_path: Path) -> None:
    import contrastlab_toy.plugin
    from contrastlab_toy.task import ToyTask

    class BigToy(ToyTask):
        name = "toy_big"
        presets = {**ToyTask.presets, "paper": {"train": {"steps": 3}}}
        gpu_presets = frozenset({"paper"})

        def estimate_seconds(self, config, device):
            return 7200.0

    class Module:
        @cl.hookimpl
        def register_plugins(self, register) -> None:
            register(BigToy)

    with fresh_plugin_manager(contrastlab_toy.plugin, Module(), package="contrastlab-toy"):
        code, out = run_cli(
            [
                "train",
                "--plugin",
                "toy_big",
                "--loss",
                "infonce",
                "--preset",
                "paper",
                "--logdir",
                str(tmp_path),
                "--device",
                "cpu",
            ]
        )
    assert code == 0, out
    assert "warning" in out and "2.0 h" in out and "--preset smoke" in out


def test_tensorboard_serves_on_localhost(tmp_path: Path) -> None:
    import urllib.request

    proc = subprocess.Popen(
        [str(PLATFORM), "tensorboard", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_resume_before_the_first_checkpoint_reproduces_the_run(toy_pm: PluginManager, tmp_path: Path) -> None:
    """A run killed before any checkpoint has no RNG state to restore: Run.open seeds like Run.create."""
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    code, out = train_toy(tmp_path / "full")
    assert code == 0, out
    full = json.loads((only_run(tmp_path / "full") / "summary.json").read_text())["metrics"]
    plugin = get_task_plugin("toy_clusters")
    config = resolve_config(plugin, loss="dcl", seed=3, sets=["train.steps=40", "checkpoint_every=10"])
    killed = Run.create(plugin, config, tmp_path / "killed")  # created, then "killed" before step 1
    killed.close()
    code, out = run_cli(["train", "--resume", str(killed.dir)])
    assert code == 0, out
    resumed = json.loads((killed.dir / "summary.json").read_text())["metrics"]
    assert resumed["eval/nn_accuracy"] == pytest.approx(full["eval/nn_accuracy"])
    same = [k for k in full if not any(w in k for w in ("time", "per_s", "wall"))]
    assert same and {k: resumed[k] for k in same} == pytest.approx({k: full[k] for k in same})


def test_resume_refuses_options_it_would_ignore(toy_pm: PluginManager, tmp_path: Path) -> None:
    code, out = train_toy(tmp_path)
    assert code == 0, out
    run_dir = only_run(tmp_path)
    for extra in (["--set", "train.steps=80"], ["--loss", "infonce"], ["--seed", "5"]):
        code, out = run_cli(["train", "--resume", str(run_dir), *extra])
        assert code == 2 and "drop " + extra[0] in out and len(out.strip().splitlines()) == 1, out


def test_reopened_run_with_missing_data_says_where_the_data_is_named(
    toy_pm: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval and --resume have no --set: the missing-data error points at the run's config.yaml instead."""
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.errors import DataMissingError
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    code, out = train_toy(tmp_path / "done")
    assert code == 0, out
    done = only_run(tmp_path / "done")
    plugin = get_task_plugin("toy_clusters")
    killed = Run.create(plugin, resolve_config(plugin, loss="dcl", sets=["train.steps=40"]), tmp_path / "killed")
    killed.close()

    def data_gone(self, config) -> None:
        raise DataMissingError("dataset file /data/x not found; pass --set data.root=DIR")

    monkeypatch.setattr(type(plugin), "check", data_gone)
    for run_dir, args in ((done, ["eval", str(done)]), (killed.dir, ["train", "--resume", str(killed.dir)])):
        code, out = run_cli(args)
        assert code == 2 and "/data/x not found" in out and "Traceback" not in out, out
        assert f"{run_dir / 'config.yaml'}: put it back there" in " ".join(out.split()), out
    assert not (done / "eval.json").exists() and not list(killed.dir.glob("checkpoints/*"))


@pytest.mark.parametrize("spec", ["cuda:x", "cuda:-1", "cuda:0:1", "gpu"])
def test_resolve_device_refuses_a_malformed_device_in_one_line(spec: str, monkeypatch) -> None:
    """Python callers of resolve_device (not only the CLI's config check): on a CUDA machine `cuda:x` reached
    int() and `cuda:-1` torch, each a traceback."""
    import torch

    from contrastlab.platform.errors import DeviceError
    from contrastlab.platform.run import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(DeviceError, match=r"^unknown device '.*'; valid: auto, cpu, cuda, cuda:K$"):
        resolve_device(spec)


def test_run_open_of_a_damaged_config_yaml_is_one_line(toy_pm: PluginManager, tmp_path: Path) -> None:
    """Run.open (the Python API, as `platform eval` uses it) raised yaml's own error for a malformed config.yaml."""
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.errors import ConfigError
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    task = get_task_plugin("toy_clusters")
    run = Run.create(task, resolve_config(task), tmp_path, run_name="r")
    run.mark("interrupted")
    run.close()
    (run.dir / "config.yaml").write_text("{{{ not : valid : [")
    with pytest.raises(ConfigError, match="malformed YAML in"):
        Run.open(run.dir)


def test_two_starts_in_one_second_with_one_seed_get_two_run_directories(toy_pm: PluginManager, tmp_path: Path,
                                                                         monkeypatch) -> None:
    """Another `platform train` makes the chosen `<time>-s<seed>` directory between the choice and the creation:
    this run goes to `-2` and the other's files stay as they are."""
    from contrastlab.platform.rundir import RunDir

    chosen_by_both = RunDir.new_run_path

    def chosen_then_taken(*args, **kwargs):
        layout = chosen_by_both(*args, **kwargs)
        layout.path.mkdir(parents=True)
        (layout.path / "run.json").write_text('{"status": "running"}')
        return layout

    monkeypatch.setattr(RunDir, "new_run_path", chosen_then_taken)
    code, out = train_toy(tmp_path)
    assert code == 0, out
    (taken,) = [p for p in tmp_path.glob("*/*/*") if not p.name.endswith("-2")]
    assert (taken / "run.json").read_text() == '{"status": "running"}' and len(list(taken.iterdir())) == 1
    assert RunDir(taken.with_name(f"{taken.name}-2")).summary_json.is_file()


def test_a_run_name_another_start_took_meanwhile_is_refused_and_left_alone(toy_pm: PluginManager, tmp_path: Path,
                                                                           monkeypatch) -> None:
    """The same `--run-name` started twice at once (two terminals; every run of `platform compare` has one): the
    second found the first's directory, went on with mkdir(exist_ok) and wrote its config.yaml and run.json over
    the first's. Taking config.yaml is exclusive now: the second stops and touches nothing."""
    from contrastlab.platform.rundir import RunDir

    chosen_by_both = RunDir.new_run_path

    def chosen_then_taken(*args, **kwargs):
        layout = chosen_by_both(*args, **kwargs)
        layout.path.mkdir(parents=True)
        layout.config_yaml.write_text("theirs: 1\n")
        return layout

    monkeypatch.setattr(RunDir, "new_run_path", chosen_then_taken)
    code, out = train_toy(tmp_path, "--run-name", "mine")
    assert code == 2 and "was just started by another platform train; choose another --run-name" in out, out
    (theirs,) = tmp_path.glob("*/*/*")
    assert [p.name for p in theirs.iterdir()] == ["config.yaml"]
    assert (theirs / "config.yaml").read_text() == "theirs: 1\n"


def test_a_torchrun_rank_that_comes_after_rank_0_takes_the_named_run_directory(toy_pm: PluginManager,
                                                                               tmp_path: Path, monkeypatch) -> None:
    """`torchrun ... platform train --run-name X`: every rank calls Run.create; a rank that got there after rank 0
    had written X's config.yaml was refused ("already exists; continue it with --resume") and stopped the job."""
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    task = get_task_plugin("toy_clusters")
    config = resolve_config(task, loss="dcl", seed=3)
    rank0 = Run.create(task, config, tmp_path, run_name="ddp")
    before = {p.name: p.read_bytes() for p in rank0.dir.iterdir()}
    monkeypatch.setenv("RANK", "1")
    rank1 = Run.create(task, config, tmp_path, run_name="ddp")
    assert rank1.dir == rank0.dir and not rank1.is_main
    assert {p.name: p.read_bytes() for p in rank0.dir.iterdir()} == before  # rank 1 writes nothing


def test_reopening_a_run_of_a_plugin_not_installed_says_so(toy_pm: PluginManager, tmp_path: Path,
                                                           monkeypatch) -> None:
    """`platform eval`/`--resume` of a run trained by a third-party plugin that is no longer installed said only
    "unknown plugin 'toy_clusters'; valid: curl, ...", as if the user had mistyped a name they never typed."""
    from contrastlab.platform.config import resolve_config

    monkeypatch.delenv("CONTRASTLAB_PLUGINS", raising=False)  # tests/conftest.py sets it; a user has none
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    task = get_task_plugin("toy_clusters")
    run = Run.create(task, resolve_config(task), tmp_path, run_name="r")
    run.mark("interrupted")
    run.close()
    with fresh_plugin_manager():  # the built-ins only: contrastlab-toy uninstalled
        for args in (["eval", str(run.dir)], ["train", "--resume", str(run.dir)]):
            code, out = run_cli(args)
            assert code == 2 and "Traceback" not in out, out
            assert f"{run.dir} was trained with plugin 'toy_clusters', which is not installed here" in out, out
            assert "`platform plugins` lists the installed plugin packages" in out, out


class _TextMetricModule:
    """A third-party task whose ``train`` returns a metric that is not a number."""

    @cl.hookimpl
    def register_plugins(self, register) -> None:
        from contrastlab_toy.task import ToyTask

        class TextMetric(ToyTask):
            name = "text_metric"

            def train(self, config, run):
                return {**super().train(config, run), **({"note": "abc"} if config.seed == 1 else {})}

            def evaluate(self, run, options):
                return {**super().evaluate(run, options), "note": None}

        register(TextMetric)


def test_a_metric_that_is_not_a_number_is_one_line_naming_the_plugin(tmp_path: Path) -> None:
    """`float('abc')` inside the core ended the run with "ValueError: could not convert string to float: 'abc'" and a
    traceback through contrastlab's own code, with no word of which plugin or metric."""
    with fresh_plugin_manager(_TextMetricModule(), package="contrastlab-text"):
        code, out = run_cli(["train", "--plugin", "text_metric", "--loss", "dcl", "--set", "train.steps=4",
                             "--logdir", str(tmp_path)])
    assert code == 1 and "Traceback" not in out, out
    assert "error: plugin 'text_metric' returned metric note='abc' from train(); metrics must be numbers" in out, out
    (run_dir,) = [p for p in tmp_path.glob("*/*/*") if p.is_dir()]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    with fresh_plugin_manager(_TextMetricModule(), package="contrastlab-text"):  # and from evaluate (eval)
        code, out = run_cli(["train", "--plugin", "text_metric", "--loss", "dcl", "--set", "train.steps=4",
                             "--seed", "2", "--logdir", str(tmp_path / "b")])
        assert code == 0, out
        code, out = run_cli(["eval", str(next((tmp_path / "b").glob("*/*/*")))])
    assert code == 1 and "Traceback" not in out, out
    assert "error: plugin 'text_metric' returned metric note=None from evaluate(); metrics must be numbers" in out


class _NoPrimaryModule:
    """A third-party task whose ``train`` does not return the primary metric it declares."""

    @cl.hookimpl
    def register_plugins(self, register) -> None:
        from contrastlab_toy.task import ToyTask

        class NoPrimary(ToyTask):
            name = "no_primary"

            def train(self, config, run):
                return {"eval/other": sum(super().train(config, run).values())}

        register(NoPrimary)


def test_a_run_without_its_declared_primary_metric_says_so(tmp_path: Path) -> None:
    """A plugin that declares primary_metric but does not return it trained "fine"; only a later `platform compare`
    said "failed: no finite eval/nn_accuracy in 2 completed runs". `platform train` now notes it at once."""
    with fresh_plugin_manager(_NoPrimaryModule(), package="contrastlab-np"):
        code, out = run_cli(["train", "--plugin", "no_primary", "--loss", "dcl", "--set", "train.steps=4",
                             "--logdir", str(tmp_path)])
    assert code == 0, out
    note = ("note: this run has no 'eval/nn_accuracy', the primary metric of plugin 'no_primary' (its final "
            "metrics: eval/other); platform compare and platform tune rank runs by it")
    assert note in out, out
    with fresh_plugin_manager(_NoPrimaryModule(), package="contrastlab-np"):  # a resumed run says it too
        code, out = run_cli(["train", "--plugin", "no_primary", "--loss", "dcl", "--set", "train.steps=4",
                             "--run-name", "r", "--logdir", str(tmp_path / "r")])
        run_dir = tmp_path / "r" / "no_primary" / "dcl" / "r"
        info = json.loads((run_dir / "run.json").read_text())
        (run_dir / "run.json").write_text(json.dumps({**info, "status": "interrupted"}))
        code, out = run_cli(["train", "--resume", str(run_dir)])
    assert code == 0 and note in out, out
    import contrastlab_toy.plugin

    with fresh_plugin_manager(contrastlab_toy.plugin, package="contrastlab-toy"):  # it returns its primary metric
        code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=4",
                             "--logdir", str(tmp_path / "b")])
    assert code == 0 and "primary metric" not in out, out


def test_reopening_a_run_whose_plugin_contrastlab_plugins_leaves_out_names_the_variable(
    toy_pm: PluginManager, tmp_path: Path, monkeypatch
) -> None:
    """With CONTRASTLAB_PLUGINS naming other packages, the plugin is installed but not loaded: "which is not
    installed here" sent the user to reinstall a package they have; the line names the variable instead."""
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    task = get_task_plugin("toy_clusters")
    run = Run.create(task, resolve_config(task), tmp_path, run_name="r")
    run.mark("interrupted")
    run.close()
    monkeypatch.setenv("CONTRASTLAB_PLUGINS", "other-pkg")
    with fresh_plugin_manager():  # what that allow-list loads: the built-ins (other-pkg is not installed)
        code, out = run_cli(["eval", str(run.dir)])
    assert code == 2 and "Traceback" not in out, out
    assert "not installed here" not in out, out
    assert (f"{run.dir} was trained with plugin 'toy_clusters', which is not loaded: CONTRASTLAB_PLUGINS=other-pkg "
            "loads only the built-ins and the packages it names") in " ".join(out.split()), out


@pytest.mark.parametrize("wall", ["abc", None, -5, [1], float("inf"), True])
def test_a_damaged_wall_time_in_run_json_does_not_stop_a_resume(toy_pm: PluginManager, tmp_path: Path, wall) -> None:
    """From a bad-input sweep: ``"wall_time_s": "abc"`` (or null) in run.json made ``--resume`` end in a
    ValueError traceback at the first log line. The wall time is bookkeeping: an unusable value counts as 0."""
    code, out = train_toy(tmp_path)
    assert code == 0, out
    run_dir = only_run(tmp_path)
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "running", "wall_time_s": wall}))
    code, out = run_cli(["train", "--resume", str(run_dir)])
    assert code == 0 and "Traceback" not in out, out
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "completed" and isinstance(info["wall_time_s"], float) and info["wall_time_s"] >= 0


def test_wall_time_status_and_clamp_mean_carry_over_a_stop_and_a_resume(toy_pm: PluginManager, tmp_path: Path,
                                                                        monkeypatch) -> None:
    """What ``--resume`` promises: ``wall_time_s`` is the time spent training, summed over every start (a checkpoint,
    a stop and the finish each count the seconds since the last of them once); ``run.json`` says interrupted, then
    running, then completed; ``train/clamped_frac`` in summary.json is the mean of the rows the run kept."""
    from types import SimpleNamespace

    import contrastlab.platform.run as run_module
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    clock = [100.0]
    monkeypatch.setattr(run_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    task = get_task_plugin("toy_clusters")
    run = Run.create(task, resolve_config(task, sets=["checkpoint_every=5"]), tmp_path, run_name="r")
    assert not run.resumed  # plugins load a checkpoint only when resumed
    assert not run.checkpoint_due(0) and run.checkpoint_due(5) and run.checkpoint_due(10)
    assert not run.checkpoint_due(4) and not run.checkpoint_due(6)
    clock[0] = 103.0
    run.log({"train/clamped_frac": 0.2, "x": float("nan")}, 1)
    run.save_checkpoint({"w": 1}, 1)
    assert run.info["wall_time_s"] == 3.0 and run.info["last_checkpoint_step"] == 1
    clock[0] = 104.0
    run.log({"train/clamped_frac": 0.9}, 2)  # after the checkpoint: dropped by the resume
    clock[0] = 105.0
    run.mark("interrupted")
    info = json.loads(run.rundir.run_json.read_text())
    assert (info["status"], info["error"], info["wall_time_s"]) == ("interrupted", None, 5.0)

    clock[0] = 200.0  # the time between the stop and the resume is not the run's
    resumed = Run.open(run.dir)
    assert json.loads(run.rundir.run_json.read_text())["status"] == "running"
    clock[0] = 202.0
    resumed.log({"train/clamped_frac": 0.4, "train/clamped_frac_other": float("inf")}, 2)
    assert [row["wall_time"] for row in read_metrics(run.dir)] == [3.0, 7.0]  # the step-2 row of the first start
    assert read_metrics(run.dir)[0]["x"] is None  # went
    clock[0] = 203.0
    summary = resumed.finish({"m": 1})
    assert summary["wall_time_s"] == 8.0 and summary["metrics"]["m"] == 1.0
    assert resumed.resumed and summary["labels_used"] is False  # no plugin said labels reached the loss
    assert summary["metrics"]["train/clamped_frac"] == pytest.approx((0.2 + 0.4) / 2)
    info = json.loads(run.rundir.run_json.read_text())
    assert (info["status"], info["error"], info["wall_time_s"]) == ("completed", None, 8.0)
    assert json.loads(run.rundir.summary_json.read_text())["wall_time_s"] == 8.0


def test_a_failed_run_records_its_error_and_wall_time(toy_pm: PluginManager, tmp_path: Path, monkeypatch) -> None:
    from types import SimpleNamespace

    import contrastlab.platform.run as run_module
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    clock = [10.0]
    monkeypatch.setattr(run_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    task = get_task_plugin("toy_clusters")
    run = Run.create(task, resolve_config(task, sets=["checkpoint_every=1"]), tmp_path, run_name="r")
    assert not run.checkpoint_due(0) and run.checkpoint_due(1) and run.checkpoint_due(2)
    clock[0] = 10.5
    run.mark("failed", error="RuntimeError: boom")
    info = json.loads(run.rundir.run_json.read_text())
    assert (info["status"], info["error"], info["wall_time_s"]) == ("failed", "RuntimeError: boom", 0.5)
    resumed = Run.open(run.dir)
    assert (resumed.info["status"], resumed.info["error"]) == ("running", None)
    assert resumed.elapsed() == 0.5  # nothing since the resume yet; under a second counts too
    resumed.close()


def test_a_checkpoint_restores_the_rng_and_records_the_progress(toy_pm: PluginManager, tmp_path: Path,
                                                                monkeypatch) -> None:
    """A resumed run draws the random numbers the uninterrupted run would have drawn (unless ``restore_rng=False``);
    run.json's ``progress`` is the share of the bar done at the checkpoint; a damaged ``wall_time_s`` counts as 0."""
    from types import SimpleNamespace

    import torch

    import contrastlab.platform.run as run_module
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    task = get_task_plugin("toy_clusters")
    run = Run.create(task, resolve_config(task), tmp_path, run_name="r")
    with run.progress(8) as bar:
        bar.update(2)
        torch.manual_seed(123)
        run.save_checkpoint({"w": 1}, 2)
    assert run.info["progress"] == 0.25
    with run.progress(8, part=(0.5, 1.0)) as bar:  # the second half of the run: 0.5 + 0.5 * 2/8
        bar.update(2)
        run.save_checkpoint({"w": 0}, 1)
        assert run.info["progress"] == 0.625
        bar.update(7)  # past its total: the part ends at its end
        run.save_checkpoint({"w": 0}, 1)
        assert run.info["progress"] == 1.0
    with run.progress(8) as bar:
        bar.update(2)
        torch.manual_seed(123)
        run.save_checkpoint({"w": 1}, 2)
    expected = torch.rand(3)
    torch.manual_seed(7)
    state = run.load_checkpoint()
    assert state is not None and state["step"] == 2 and state["w"] == 1
    assert torch.equal(torch.rand(3), expected)
    torch.manual_seed(7)
    unchanged = torch.rand(3)
    torch.manual_seed(7)
    run.load_checkpoint(restore_rng=False)
    assert torch.equal(torch.rand(3), unchanged)
    from contrastlab.platform.checkpoints import CheckpointStore

    asked = []
    with monkeypatch.context() as m:  # tensors land on the run's device (--device), not where they were saved
        m.setattr(CheckpointStore, "load", lambda self, map_location=None: asked.append(map_location))
        assert run.load_checkpoint() is None and asked == [run.device]
    run.mark("interrupted")

    info = json.loads(run.rundir.run_json.read_text())
    run.rundir.run_json.write_text(json.dumps({**info, "wall_time_s": "abc"}))
    monkeypatch.setattr(run_module, "time", SimpleNamespace(monotonic=lambda: 5.0))
    resumed = Run.open(run.dir)
    assert resumed.elapsed() == 0.0
    resumed.is_main = False  # a non-zero torchrun rank: no event files of its own
    assert resumed.writer.add_scalar("x", 1.0, 1) is None and resumed.rundir.events() == []
    resumed.close()
