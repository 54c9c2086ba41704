"""``platform compare`` / ``platform report`` through the CLI: clear errors before anything runs, and a tiny real
compare (real ``platform train`` subprocesses) that a repeated command skips."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import test_compare_support as toy
from typer.testing import CliRunner

from contrastlab.cli import app
from contrastlab.experiments import runner
from contrastlab.platform.plugins import PluginManager, registry, use_plugin_manager


@pytest.fixture
def toy_pm():
    pm = PluginManager(builtins=False, entry_points=False)
    pm.register_module(toy, package="toy-test", name="toy_test_plugin")
    with use_plugin_manager(pm):
        yield pm


BASE = ["compare", "--plugin", "toy", "--loss", "toy_plain,toy_debiased", "--preset", "smoke"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--grid", "loss.tau_plus"], "--grid 'loss.tau_plus': expected key=v1,v2"),
        (["--grid", "loss.tau_plus=0.1,,0.2"], "empty value"),
        (["--grid", "loss.tau_plus="], "empty value"),
        (["--grid", "loss.beta=0.5,1"], "unknown key 'loss.beta'"),
        (["--grid", "train.stpes=1,2"], "unknown config key 'train.stpes'"),
        (["--set", "train.steps"], "--set 'train.steps': expected key=value"),
        (["--grid", "loss.tau_plus=1.5"], "tau_plus"),
        (["--seeds", "0"], "--seeds 0"),
        (["--devices", "0"], "--devices '0'"),
        (["--devices", "0", "--jobs", "2"], "exclusive"),
        (["--runs-per-gpu", "2"], "--runs-per-gpu needs --devices"),
        (["--seed-list", "2,-1"], "seed -1: Input should be greater than or equal to 0"),  # every run started, failed
        (["--seed-list", str(2**32)], f"seed {2**32}: Input should be less than"),
        # Ray refuses 1.5 GPUs only at the first submission (a ValueError traceback); checked before connecting
        (["--backend", "ray", "--gpus-per-run", "1.5"], "--gpus-per-run 1.5: above 1 it must be a whole number"),
    ],
)
def test_bad_input_fails_before_anything_runs(toy_pm, tmp_path, extra, message):
    import torch

    if torch.cuda.is_available() and extra[:2] == ["--devices", "0"] and len(extra) == 2:
        pytest.skip("this machine has a GPU")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, *extra, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_unknown_plugin_and_loss(toy_pm, tmp_path):
    result = CliRunner().invoke(app, ["compare", "--plugin", "toyy", "--loss", "toy_plain", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "unknown plugin 'toyy'" in result.output and "Did you mean 'toy'" in result.output
    result = CliRunner().invoke(app, ["compare", "--plugin", "toy", "--loss", "toy_plian", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "unknown loss 'toy_plian'" in result.output


def test_dry_run_lists_grid(toy_pm, tmp_path):
    out = tmp_path / "out"
    args = [*BASE, "--grid", "loss.tau_plus=0.05,0.1", "--seeds", "2", "--out", str(out), "--dry-run"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "6 runs" in result.output and "6 new" in result.output
    assert result.output.count("toy_debiased tau_plus=0.1") == 2
    assert not (out / "runs").exists()


@pytest.mark.slow
def test_tiny_real_compare_then_resume_skip(toy_pm, tmp_path, monkeypatch):
    """Two losses (one with a τ+ grid), two seeds, real `platform train` processes; then the same command again."""
    monkeypatch.setattr(runner, "platform_base_command", lambda: list(toy.TOY_BASE))
    out = tmp_path / "out"
    args = [*BASE, "--grid", "loss.tau_plus=0.1", "--seeds", "2", "--jobs", "2", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 4 and {r["status"] for r in rows} == {"completed"}
    for r in rows:  # final scores are the toy plugin's deterministic formula after 6 smoke steps
        tau = float(r["overrides"].split("=")[1]) if r["overrides"] else 0.0
        assert float(r["score"]) == pytest.approx(toy.toy_score(int(r["seed"]), tau, 6))
    md = (out / "results.md").read_text()
    row = "| toy | score (↑) | 0.7350 ± 0.0071 [0.6715, 0.7985] | 0.6350 ± 0.0071 [0.5715, 0.6985] |"
    assert f"{row} tie: toy_debiased tau_plus=0.1, toy_plain |" in md  # 2 seeds: t intervals (±12.7·s/√2) overlap
    for png in ("curves.png", "final.png"):
        assert (out / png).stat().st_size > 10_000
    assert len(list((out / "tensorboard" / "toy").glob("*/s*"))) == 4
    summaries = sorted(out.glob("runs/toy/*/*/summary.json"))
    assert len(summaries) == 4
    stamps = [p.stat().st_mtime_ns for p in summaries]

    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "4 finished (skipped), 0 to resume, 0 new" in again.output
    assert [p.stat().st_mtime_ns for p in summaries] == stamps
    assert json.loads((out / "compare.json").read_text())["losses"] == ["toy_plain", "toy_debiased"]

    # `platform report` rebuilds the same table from the run directories.
    rebuilt = CliRunner().invoke(app, ["report", str(out / "runs"), "--out", str(tmp_path / "rep")])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert (tmp_path / "rep" / "results.md").read_text() == md


@pytest.mark.slow
def test_tiny_real_compare_first_party_plugin(tmp_path):
    """The same on a first-party plugin's smoke preset (skipped until that plugin is registered)."""
    name = "simclr"
    if name not in registry("plugin"):
        pytest.skip(f"plugin {name} not available")
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.errors import DataMissingError

    plugin = registry("plugin").get(name).factory()
    try:
        plugin.check(resolve_config(plugin, preset="smoke", sets=[s for s in SIMCLR_TINY if s != "--set"]))
    except DataMissingError as exc:
        pytest.skip(f"dataset missing: {exc}")
    out = tmp_path / "out"
    args = ["compare", "--plugin", name, "--loss", "infonce,dcl", "--preset", "smoke", "--out", str(out)]
    args += ["--jobs", "2", *SIMCLR_TINY]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [r["status"] for r in rows] == ["completed", "completed"], rows
    assert [r["loss"] for r in rows] == ["dcl", "infonce"]
    assert all(0.0 <= float(r["primary_value"]) <= 1.0 for r in rows)
    assert all(r["primary_metric"] == rows[0]["primary_metric"] != "" for r in rows)
    md = (out / "results.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| simclr |"))
    assert row.count("**") == 0  # one seed each: no interval, so no winner is claimed
    assert row.endswith(("| tie: dcl, infonce |", "| tie: infonce, dcl |"))
    assert (out / "curves.png").stat().st_size > 10_000 and (out / "final.png").stat().st_size > 10_000


SIMCLR_TINY = [
    *("--set", "data.train_subset=256", "--set", "data.test_subset=128", "--set", "train.epochs=1"),
    *("--set", "train.batch_size=64", "--set", "eval.linear_epochs=1", "--set", "encoder.width=4"),
]
"""Extra ``--set`` overrides that shrink the simclr smoke preset for this test."""


def test_report_without_runs_and_busy_out(toy_pm, tmp_path):
    import os

    from contrastlab.experiments.out_folder import LOCK_FILE

    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "no run directories" in result.output
    out = tmp_path / "busy"
    out.mkdir()
    (out / LOCK_FILE).write_text(str(os.getppid()))  # a live process that is not us
    result = CliRunner().invoke(app, [*BASE, "--out", str(out)])
    assert result.exit_code == 2 and "another platform compare" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output  # no header announcing runs first
    assert not (out / "runs").exists()


def test_an_out_holding_another_plugins_comparison_is_refused(toy_pm, tmp_path):
    """Reusing --out of another plugin's compare would replace its compare.json and results.md."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "compare.json").write_text(json.dumps({"plugin": "graph", "losses": ["infonce"], "rows": None}))
    (out / "results.md").write_text("graph table\n")
    for extra in ([], ["--dry-run"]):
        result = CliRunner().invoke(app, [*BASE, "--out", str(out), *extra])
        assert result.exit_code == 2, result.output
        assert f"--out {out} holds a graph comparison" in result.output and "choose another --out" in result.output
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert json.loads((out / "compare.json").read_text())["plugin"] == "graph"
    assert (out / "results.md").read_text() == "graph table\n" and not (out / "runs").exists()
    (out / "compare.json").write_text(json.dumps({"plugin": "toy", "losses": ["toy_plain"], "rows": None}))
    result = CliRunner().invoke(app, [*BASE, "--out", str(out), "--dry-run"])  # the same plugin: extends the folder
    assert result.exit_code == 0, result.output


def test_an_out_inside_a_run_directory_is_refused(toy_pm, tmp_path):
    """A grid planned inside a run of platform train would write its runs, logs and tables among that run's files
    (report refuses such an --out too)."""
    run_dir = toy.write_synthetic_run(tmp_path / "a", final={"score": 0.5})
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    for out, extra in ((run_dir / "sub", ["--dry-run"]), (run_dir, [])):
        result = CliRunner().invoke(app, [*BASE, "--out", str(out), *extra])
        assert result.exit_code == 2, result.output
        assert f"is inside the run directory {run_dir.resolve()}" in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before
    result = CliRunner().invoke(app, [*BASE, "--out", str(tmp_path / "a" / "cmp"), "--dry-run"])  # beside it: fine
    assert result.exit_code == 0, result.output


def test_report_needs_out_unless_its_one_dir_is_a_compare_output(toy_pm, tmp_path):
    """Written into a folder of plain runs, the report's tensorboard/ links sat among the runs (platform tensorboard
    showed each run twice); several DIRs overwrote the first one's results."""
    for where in ("a", "b"):
        toy.write_synthetic_run(tmp_path / where, final={"score": 0.5})
    for args, what in (([str(tmp_path / "a"), str(tmp_path / "b")], "several DIRs"),
                       ([str(tmp_path / "a" / "runs")],
                        f"{tmp_path / 'a' / 'runs'}, which is not a compare or tune output folder,")):
        result = CliRunner().invoke(app, ["report", *args])
        assert result.exit_code == 2, result.output
        assert result.output.strip() == (f"error: give --out (e.g. --out report/): with {what} the report would be "
                                         "written among the runs"), result.output
    assert not list(tmp_path.glob("**/results.md")) and not list(tmp_path.glob("**/tensorboard"))
    (tmp_path / "a" / "compare.json").write_text("{}")
    result = CliRunner().invoke(app, ["report", str(tmp_path / "a")])
    assert result.exit_code == 0 and (tmp_path / "a" / "results.md").is_file(), result.output
    result = CliRunner().invoke(app, ["report", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0 and "counted once" in result.output and (tmp_path / "r" / "results.md").is_file()
    run = next((tmp_path / "b" / "runs").glob("*/*/*"))
    for out in (tmp_path / "b", tmp_path / "b" / "runs", run, run / "sub"):  # a plain DIR, or inside a run
        result = CliRunner().invoke(app, ["report", str(tmp_path / "b"), "--out", str(out)])
        assert result.exit_code == 2 and "is inside the runs being read" in result.output, (out, result.output)
    assert not list((tmp_path / "b").glob("**/results.md"))
    result = CliRunner().invoke(app, ["report", str(tmp_path / "a"), "--out", str(tmp_path / "a"), "--rows", ","])
    assert result.exit_code == 0, result.output  # a compare output folder is its own report's home; empty --rows


def test_a_bad_rows_key_is_refused_before_any_run(toy_pm, tmp_path):
    """It used to train the whole grid, fail at the report, and leave the bad key in compare.json."""
    result = CliRunner().invoke(app, [*BASE, "--rows", "nope.key", "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "--rows nope.key is not a config key" in result.output, result.output
    assert not (tmp_path / "c").exists()


def test_set_device_with_devices_is_refused_before_any_run(toy_pm, tmp_path):
    result = CliRunner().invoke(app, [*BASE, "--devices", "0", "--set", "device=cpu", "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "--set device conflicts with --devices" in result.output, result.output
    assert not (tmp_path / "c").exists()


def test_recorded_rows_keeps_a_tuned_compares_single_row(tmp_path: Path) -> None:
    """compare --tuned records rows [] (one row, losses as columns); report must rebuild that, not default rows."""
    from contrastlab.cli.compare import recorded_rows

    tuned, plain, other = tmp_path / "tuned", tmp_path / "plain", tmp_path / "other"
    for d, rows in ((tuned, []), (plain, None), (other, ["env.task"])):
        d.mkdir()
        (d / "compare.json").write_text(json.dumps({"rows": rows}))
    assert recorded_rows([tuned]) == []
    assert recorded_rows([plain]) is None
    assert recorded_rows([tuned, plain]) == []
    assert recorded_rows([tuned, other]) is None  # they disagree: the default rows


@pytest.mark.parametrize(("signum", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_kill_prints_the_resume_hint_like_ctrl_c(toy_pm, tmp_path, monkeypatch, signum, code):
    """``kill PID`` of a compare (SIGTERM) stops the runs like Ctrl-C and says how to resume; exit 143, not 130."""
    import signal
    import time

    from contrastlab.testing import signal_self, sigterm_must_be_handled

    def killed_grid(points, out, **kw):
        signal_self(getattr(signal, signum))
        time.sleep(5)  # the handler interrupts this sleep
        raise AssertionError("the signal did not stop the grid")

    monkeypatch.setattr(runner, "run_grid", killed_grid)
    with sigterm_must_be_handled():  # on the old code SIGTERM would have ended the test process
        result = CliRunner().invoke(app, [*BASE, "--out", str(tmp_path / "out")])
    assert result.exit_code == code, result.output
    assert result.output.strip().splitlines()[-1] == (
        "interrupted; run the same command again to resume the unfinished runs"
    )
    from contrastlab.experiments.out_folder import LOCK_FILE

    assert not (tmp_path / "out" / LOCK_FILE).exists()  # the clean-up ran: a rerun is not refused as busy


def test_report_help_names_every_file_the_report_writes(toy_pm, tmp_path):
    """`platform report --help` said it rebuilds "results.csv, results.md, curves.png, final.png and the TensorBoard
    logdir", but the report also writes summary.csv and aggregate.png: every file it writes is named."""
    toy.write_synthetic_run(tmp_path / "a", final={"score": 0.5})
    result = CliRunner().invoke(app, ["report", str(tmp_path / "a"), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert "summary.csv" in written and "aggregate.png" in written, written
    text = " ".join(CliRunner().invoke(app, ["report", "--help"], terminal_width=400).output.split())
    for name in written:
        assert (name if name != "tensorboard" else "TensorBoard logdir") in text, (name, text)


def test_a_path_with_square_brackets_is_printed_as_it_is(toy_pm, tmp_path):
    """The compare header, the dry-run lines and the report's notes went through rich markup: `--out r[v2]` was
    printed as `r`, so the folder the user was told about did not exist."""
    out = tmp_path / "r[v2]"
    result = CliRunner().invoke(app, [*BASE, "--out", str(out), "--dry-run"], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert f"→ {out}:" in result.output and f"{out}/runs/toy/" in result.output, result.output
    toy.write_synthetic_run(tmp_path / "a[1]", final={"score": 0.5})
    toy.write_synthetic_run(tmp_path / "b", final={"score": 0.5})  # the same run again: a note names both
    result = CliRunner().invoke(app, ["report", str(tmp_path / "b"), str(tmp_path / "a[1]"), "--out", str(out)],
                                terminal_width=400)
    assert result.exit_code == 0 and "note:" in result.output and "a[1]" in result.output, result.output


def test_a_crash_before_the_first_checkpoint_says_resume_starts_over_with_the_same_config(toy_pm, tmp_path):
    """A run that crashed before any checkpoint (e.g. out of memory while the model was built) printed "fix the
    cause, then continue with: platform train --resume ...", but --resume keeps the run's config.yaml and has
    nothing to continue from: it says so now."""
    args = ["train", "--plugin", "toy", "--loss", "toy_plain", "--logdir", str(tmp_path), "--seed", "4",
            "--set", "train.fail_seed=4", "--set", "checkpoint_every=5"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0 and isinstance(result.exception, RuntimeError), result.output
    text = " ".join(result.output.split())
    assert ("no checkpoint was saved, so --resume starts it again from the beginning with this run's config.yaml "
            "(a changed setting needs a new run); fix the cause, then continue with:") in text, text
    result = CliRunner().invoke(app, [*args[:-2], "--set", "checkpoint_every=2", "--logdir", str(tmp_path / "b")])
    assert "fix the cause, then continue with:" in result.output and "no checkpoint" not in result.output
