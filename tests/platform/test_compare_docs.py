"""Every documented ``platform compare`` command (docs/compare.md, README.md) runs the preset it claims.

The commands are read from the fenced ``bash`` blocks of the docs. Each one is checked three ways:

* as documented, with ``--dry-run``: it is accepted and prints the preset it names (``--preset X``, or its
  recipe's preset);
* in smoke form (one seed, ``--jobs 2`` for ``--devices``, a temporary ``--out``, and ``--set`` overrides that
  shrink every run) with a fake ``platform train``: the whole compare → report path runs, and every run records
  the claimed preset;
* (slow) the same smoke form with the real ``platform train``; a recipe is also narrowed to one task with
  ``--set env.domain=... --set env.task=...``.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contrastlab.cli import app
from contrastlab.experiments import recipes, runner

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "compare.md", ROOT / "README.md"]

TINY = {
    "curl": [
        "train.env_frames=64", "agent.batch_size=8", "agent.buffer_size=200", "agent.init_steps=4",
        "train.eval_every_frames=64", "train.log_every_frames=32", "train.eval_episodes=1", "checkpoint_every=64",
        "agent.hidden_dim=32", "train.save_buffer=false", "env.render_size=64", "agent.crop=56",
    ],
    "simclr": [
        "data.train_subset=256", "data.test_subset=128", "train.epochs=1", "train.batch_size=64",
        "eval.linear_epochs=1", "encoder.width=4",
    ],
}
"""``--set`` overrides that shrink every run of a plugin to seconds (same command, tiny sizes)."""

ONE_TASK = ["env.domain=cartpole", "env.task=swingup"]
"""Narrows a multi-task recipe to one task for the real (slow) execution."""


def documented_commands() -> list[tuple[str, list[str]]]:
    """``(where, argv after 'platform compare')`` for every ``platform compare`` line in a ``bash`` block."""
    found: dict[tuple[str, ...], str] = {}
    for path in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                args = shlex.split(line, comments=True)
                if args[:2] == ["platform", "compare"]:  # the same command in two places is checked once
                    found.setdefault(tuple(args[2:]), f"{path.name}: {' '.join(args)}")
    return [(where, list(args)) for args, where in found.items()]


COMMANDS = documented_commands()


def _opt(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def claimed(args: list[str]) -> tuple[str, str]:
    """``(plugin, preset)`` the command names: ``--preset``, else its recipe's preset."""
    recipe = _opt(args, "--recipe")
    r = recipes.load_recipe(recipe) if recipe else None
    plugin = _opt(args, "--plugin") or (r.plugin if r else "")
    preset = _opt(args, "--preset") or (r.preset if r else None)
    assert preset, f"documented command names no preset: platform compare {' '.join(args)}"
    return plugin, preset


def smoke_form(args: list[str], out: Path, *, one_task: bool = False) -> list[str]:
    """The same command at tiny sizes: one seed, ``--jobs 2`` for ``--devices``, ``--out`` in a temp dir."""
    plugin, _ = claimed(args)
    out_args, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("--devices", "--jobs", "--out", "--seeds", "--seed-list"):
            skip = True
            continue
        out_args.append(a)
        assert i == len(args) - 1 or not args[i + 1].startswith("$"), "shell variables are not runnable"
    out_args += ["--seeds", "1", "--jobs", "2", "--out", str(out)]
    sets = TINY[plugin] + (ONE_TASK if one_task and "--recipe" in args else [])
    return out_args + [x for s in sets for x in ("--set", s)]


@pytest.fixture
def fast_render_check(monkeypatch):
    """Render the headless check frame once per test instead of once per configuration."""
    import contrastlab.envs

    monkeypatch.setattr(contrastlab.envs, "check_rendering", functools.cache(contrastlab.envs.check_rendering))


def _skip_without_data(plugin: str) -> None:
    if plugin != "simclr":
        return
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.errors import DataMissingError
    from contrastlab.platform.plugins import registry

    task = registry("plugin").get(plugin).factory()
    try:
        task.check(resolve_config(task, preset="smoke", sets=TINY[plugin]))
    except DataMissingError as exc:
        pytest.skip(f"dataset missing: {exc}")


def test_the_docs_document_compare_commands():
    assert len(COMMANDS) >= 4, COMMANDS
    assert any("--recipe dcl-table3" in where for where, _ in COMMANDS)
    lines = DOCS[1].read_text().splitlines()
    readme = [shlex.split(line, comments=True)[2:] for line in lines if line.startswith("platform compare")]
    assert readme and all(args in [a for _, a in COMMANDS] for args in readme)  # the README's are checked too
    for _, args in COMMANDS:
        assert set(TINY) >= {claimed(args)[0]}, "add tiny --set overrides for this plugin to TINY"


@pytest.mark.parametrize("where, args", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command_claims_its_preset(where, args, tmp_path, fast_render_check):
    plugin, preset = claimed(args)
    _skip_without_data(plugin)
    out = tmp_path / "out"
    cmd = [a for a in args if a != "--dry-run"] + ["--dry-run"]
    if "--devices" in cmd:  # validate the documented command as it is, on a machine with or without a GPU
        i = cmd.index("--devices")
        cmd[i : i + 2] = ["--jobs", "2"]
    result = CliRunner().invoke(app, ["compare", *cmd, "--out", str(out)])
    assert result.exit_code == 0, f"{where}\n{result.output}"
    assert f": preset {preset}, " in result.output and "ETA" in result.output
    assert not out.exists()


@pytest.mark.parametrize("where, args", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command_runs_in_smoke_form(where, args, tmp_path, monkeypatch, fast_render_check):
    """The whole compare → report path with a fake `platform train` (see test_compare_runner)."""
    from test_compare_runner import FAKE_TRAIN

    plugin, preset = claimed(args)
    _skip_without_data(plugin)
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    monkeypatch.setenv("FAKE_CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(script)])
    monkeypatch.setattr(runner, "run_grid", functools.partial(runner.run_grid, poll=0.02))  # fake runs take ms
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["compare", *smoke_form(args, out)])
    assert result.exit_code == 0, f"{where}\n{result.output}"
    if "--dry-run" in args:
        assert not out.exists()
        return
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert calls and all(c[c.index("--preset") + 1] == preset for c in calls)
    assert all(c[c.index("--plugin") + 1] == plugin for c in calls)
    assert json.loads((out / "compare.json").read_text())["preset"] == preset
    for run_json in out.glob("runs/*/*/*/run.json"):
        assert json.loads(run_json.read_text())["preset"] == preset
    assert (out / "results.md").is_file() and (out / "summary.csv").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("where, args", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command_trains_in_smoke_form(where, args, tmp_path, fast_render_check):
    """Real `platform train` processes at tiny sizes (a recipe narrowed to one task): every run completes with
    the claimed preset."""
    plugin, preset = claimed(args)
    _skip_without_data(plugin)
    if "--dry-run" in args:
        pytest.skip("runs nothing")
    if plugin == "curl" and "--recipe" not in args:  # keeps the suite short: one real curl grid is enough
        pytest.skip("curl's real execution is covered by the recipe command; this one runs with a fake train")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["compare", *smoke_form(args, out, one_task=True)])
    assert result.exit_code == 0, f"{where}\n{result.output}"
    runs = [json.loads(p.read_text()) for p in out.glob("runs/*/*/*/run.json")]
    assert runs and {r["status"] for r in runs} == {"completed"} and {r["preset"] for r in runs} == {preset}
    summaries = [json.loads(p.read_text()) for p in out.glob("runs/*/*/*/summary.json")]
    assert len(summaries) == len(runs) and all(s["primary_metric"] in s["metrics"] for s in summaries)
