"""Recipes (``platform compare --recipe``), the preset policy and the ETA line printed before anything runs."""

from __future__ import annotations

import functools
import json

import pytest
from typer.testing import CliRunner

from contrastlab.cli import app
from contrastlab.experiments import grid as cmp
from contrastlab.experiments import recipes
from contrastlab.platform.errors import ConfigError, UnknownNameError

SIX_TASKS = {
    ("cartpole", "swingup"): 8,
    ("cheetah", "run"): 4,
    ("finger", "spin"): 2,
    ("walker", "walk"): 2,
    ("reacher", "easy"): 4,
    ("ball_in_cup", "catch"): 4,
}
"""DCL Table 3's tasks with CURL's action repeat for each."""


@pytest.fixture
def fast_render_check(monkeypatch):
    """Render the headless check frame once per test instead of once per configuration (0.3 s each)."""
    import contrastlab.envs

    monkeypatch.setattr(contrastlab.envs, "check_rendering", functools.cache(contrastlab.envs.check_rendering))


@pytest.fixture
def toy():
    """The compare test plugin ``toy`` (test_compare_support) registered through the real hook mechanism."""
    import test_compare_support

    from contrastlab.platform.plugins import PluginManager, use_plugin_manager

    pm = PluginManager(builtins=False, entry_points=False)
    pm.register_module(test_compare_support, package="toy-test", name="toy_test_plugin")
    with use_plugin_manager(pm):
        yield pm


def _overrides(point: cmp.GridPoint) -> dict[str, str]:
    return dict(o.split("=", 1) for o in point.overrides)


def test_dcl_table3_is_the_papers_grid():
    recipe = recipes.load_recipe("dcl-table3")
    assert (recipe.plugin, recipe.preset, recipe.seeds) == ("curl", "paper", 3)
    points = recipes.expand_recipe(recipe, [1, 2, 3])
    assert len(points) == 126 and len({p.config_hash for p in points}) == 42
    assert {(_overrides(p)["env.domain"], _overrides(p)["env.task"]) for p in points} == set(SIX_TASKS)
    for p in points:
        ov = _overrides(p)
        assert p.preset == "paper" and ov["agent.batch_size"] == "512" and ov["train.env_frames"] == "100000"
        assert "env.action_repeat" not in ov  # the curl config picks CURL's value per domain
    infonce = {tuple(sorted(_overrides(p).items())) for p in points if p.loss == "infonce"}
    assert len(infonce) == 6 and all(dict(ov)["agent.num_positives"] == "1" for ov in infonce)
    assert not any("loss.tau_plus" in dict(ov) for ov in infonce)
    dcl = {(_overrides(p)["agent.num_positives"], _overrides(p)["loss.tau_plus"]) for p in points if p.loss == "dcl"}
    assert dcl == {(m, t) for m in ("1", "2") for t in ("0.01", "0.05", "0.1")}


def test_dcl_table3_resolves_to_curl_settings():
    """Every configuration validates, with CURL's action repeat per task, batch 512, 100k frames, M and τ+."""
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import registry
    from contrastlab.plugins.curl.task import action_repeat

    plugin = registry("plugin").get("curl").factory()
    points = recipes.expand_recipe(recipes.load_recipe("dcl-table3"), [1])
    for p in points:
        config = resolve_config(plugin, preset=p.preset, sets=p.overrides, loss=p.loss)
        ov = _overrides(p)
        assert action_repeat(config) == SIX_TASKS[(config.env.domain, config.env.task)]
        assert (config.agent.batch_size, config.train.env_frames) == (512, 100_000)
        assert config.agent.num_positives == int(ov["agent.num_positives"])
        if p.loss == "dcl":
            assert config.loss.tau_plus == pytest.approx(float(ov["loss.tau_plus"]))


def test_command_line_overrides_win_everywhere():
    recipe = recipes.load_recipe("dcl-table3")
    sets = [("env.domain", "cartpole"), ("env.task", "swingup"), ("loss.tau_plus", "0.1"), ("train.env_frames", "64")]
    points = recipes.expand_recipe(recipe, [1], preset="smoke", sets=sets)
    labels = sorted((p.loss, _overrides(p).get("agent.num_positives"), _overrides(p).get("loss.tau_plus"))
                    for p in points)
    assert labels == [("dcl", "1", "0.1"), ("dcl", "2", "0.1"), ("infonce", "1", None)]  # tasks and τ+ collapsed
    assert all(p.preset == "smoke" and _overrides(p)["train.env_frames"] == "64" for p in points)
    with pytest.raises(UnknownNameError, match=r"unknown key 'loss\.beta'"):
        recipes.expand_recipe(recipe, [1], sets=[("loss.beta", "1.0")])


def test_recipe_files_and_their_errors(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "plugin: toy\npreset: smoke\nseeds: 2\nparts:\n  - losses: [toy_plain]\n"
        "  - losses: toy_debiased\n    grid: {loss.tau_plus: [0.05, 0.1]}\n"
    )
    recipe = recipes.load_recipe(str(path))
    assert recipe.name == "mine" and recipe.seeds == 2
    hparams = {"toy_plain": set(), "toy_debiased": {"tau_plus"}}
    points = recipes.expand_recipe(recipe, [1, 2], hparams_of=hparams.__getitem__)
    assert len(points) == 6
    assert [p.label for p in points[:3:2]] == ["toy_plain", "toy_debiased tau_plus=0.05"]
    cases = {
        "plugin: toy\nparts: []\npreset: smoke\nbogus: 1\n": "unknown key 'bogus'",
        "plugin: toy\npreset: smoke\n": "'parts' is required",
        "plugin: toy\npreset: smoke\nparts: [{losses: []}]\n": "give a non-empty list of loss names",
        "plugin: toy\npreset: smoke\nseeds: 0\nparts: [{losses: [a]}]\n": "'seeds' must be an integer >= 1",
        "plugin: toy\npreset: smoke\nparts: [{losses: [a], sets: {k: [1, 2]}}]\n": "expected a single value",
        "plugin: [toy\n": "malformed YAML",
    }
    for text, message in cases.items():
        path.write_text(text)
        with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
            recipes.load_recipe(str(path))
    with pytest.raises(UnknownNameError, match=r"unknown recipe 'dcl-tabel3'.*Did you mean 'dcl-table3'"):
        recipes.load_recipe("dcl-tabel3")


def test_a_recipe_wide_loss_key_reaches_only_the_parts_whose_losses_have_it():
    """docs: a ``loss.<hp>`` key reaches only the losses that have ``<hp>``, as with ``--set``. A recipe's own
    ``sets: {loss.tau_plus: ...}`` made its InfoNCE part fail ("loss infonce has no hyperparameter 'tau_plus'")."""
    hparams = {"infonce": set(), "dcl": {"tau_plus"}, "hcl": {"tau_plus", "beta"}}
    recipe = recipes.recipe_from_dict({
        "plugin": "toy", "preset": "smoke", "sets": {"loss.tau_plus": 0.05, "train.steps": 5},
        "parts": [{"losses": ["infonce"]}, {"losses": ["dcl", "hcl"]}],
    })  # fmt: skip
    points = recipes.expand_recipe(recipe, [1], hparams_of=hparams.__getitem__)
    assert {p.loss: p.overrides for p in points} == {
        "infonce": ["train.steps=5"],
        "dcl": ["loss.tau_plus=0.05", "train.steps=5"],
        "hcl": ["loss.tau_plus=0.05", "train.steps=5"],
    }
    # the same grid from the command line: identical configurations, so the same run directories
    cli = cmp.expand_grid("toy", ["infonce", "dcl", "hcl"], [1], preset="smoke",
                          sets=[("loss.tau_plus", "0.05"), ("train.steps", "5")], hparams_of=hparams.__getitem__)
    assert sorted(p.config_hash for p in points) == sorted(p.config_hash for p in cli)
    # a recipe-wide key that no loss of the recipe has is still an error
    bad = recipes.recipe_from_dict({"plugin": "toy", "preset": "smoke", "sets": {"loss.beta": 1},
                                    "parts": [{"losses": ["infonce"]}, {"losses": ["dcl"]}]})
    with pytest.raises(UnknownNameError, match=r"unknown key 'loss.beta': no loss of recipe"):
        recipes.expand_recipe(bad, [1], hparams_of=hparams.__getitem__)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--plugin", "curl", "--loss", "infonce,dcl"], "--preset is required for a curl comparison"),
        (["--plugin", "simclr", "--loss", "infonce,dcl"], "--preset is required for a simclr comparison"),
        (["--recipe", "dcl-table3", "--loss", "dcl"], "--recipe fixes the losses and the grid"),
        (["--recipe", "dcl-table3", "--grid", "loss.tau_plus=0.1"], "--recipe fixes the losses and the grid"),
        (["--recipe", "dcl-table3", "--plugin", "simclr"], "does not match recipe dcl-table3"),
        (["--recipe", "nope"], "unknown recipe 'nope'"),
        (["--recipe", "dcl-table3", "--set", "loss.beta=2"], "unknown key 'loss.beta'"),
        (["--loss", "infonce"], "give --plugin and --loss"),
        (["--recipe", "missing.yaml"], "recipe file not found: missing.yaml"),
    ],
)
def test_refused_with_one_line_before_anything_runs(tmp_path, args, message):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["compare", *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1
    assert not out.exists()


def test_cuda_device_without_cuda_is_refused_before_anything_runs(tmp_path, fast_render_check):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "out"
    args = ["compare", "--plugin", "curl", "--loss", "infonce", "--preset", "smoke", "--set", "device=cuda"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 2 and "CUDA is not available" in result.output and not out.exists()
    assert result.output.startswith("error:"), result.output  # before the plan and its ETA are printed
    result = CliRunner().invoke(app, [*args[:-2], "--out", "/proc/x"])
    assert result.exit_code == 2 and result.output.startswith("error: --out /proc/x"), result.output


def test_recipe_dry_run_prints_preset_count_and_eta(tmp_path, fast_render_check):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["compare", "--recipe", "dcl-table3", "--dry-run", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "recipe dcl-table3 (curl): preset paper, 126 runs" in result.output
    assert "126 new" in result.output and "ETA ≈ " in result.output
    import torch

    if not torch.cuda.is_available():
        assert "warning: preset 'paper' is sized for a GPU but runs on the CPU here" in result.output
    assert result.output.count("fresh ") == 126 and not out.exists()
    smoke = CliRunner().invoke(
        app, ["compare", "--recipe", "dcl-table3", "--preset", "smoke", "--seeds", "1", "--dry-run", "--out", str(out)]
    )
    assert smoke.exit_code == 0 and "preset smoke, 42 runs" in smoke.output


def test_eta_schedules_runs_on_the_slots():
    class Fixed:
        name = "fixed"

        def estimate_seconds(self, config, device):
            return 10.0 if device == "cpu" else 1.0

    class Config:
        device = "cpu"

    points = cmp.expand_grid("x", ["a"], [1, 2, 3], hparams_of=lambda loss: set())
    configs = {p.config_hash: Config() for p in points}
    start = cmp.RUN_START_S  # each run's process start, on top of the plugin's estimate
    assert cmp.estimate_wall_time(points, configs, [None], Fixed()) == (30.0 + 3 * start, ["cpu"])
    assert cmp.estimate_wall_time(points, configs, [None, None], Fixed()) == (20.0 + 2 * start, ["cpu"])
    assert cmp.estimate_wall_time(points, configs, ["cuda:0", "cuda:1"], Fixed()) == (2.0 + 2 * start, ["cuda"])
    # a resumed run counts only what it has left (run.json "progress"); it counted as a whole run
    assert cmp.estimate_wall_time(points, configs, [None], Fixed(), [0.75, 0.0, 1.0]) == (12.5 + 3 * start, ["cpu"])
    assert cmp.fmt_duration(45) == "45 s" and cmp.fmt_duration(7200) == "2.0 h"
    assert cmp.fmt_duration(3 * 86400) == "3.0 days"
    assert cmp.fmt_duration(88.3) == "1 min 28 s" and cmp.fmt_duration(120.2) == "2 min"  # smoke runs, to the second
    assert cmp.fmt_duration(59.7) == "1 min" and cmp.fmt_duration(725) == "12 min"


def test_toy_without_gpu_presets_keeps_its_default(toy, tmp_path):
    """A plugin without GPU-sized presets still runs on its default preset; the ETA says it has no estimate."""
    path = tmp_path / "r.yaml"
    path.write_text("plugin: toy\npreset: tiny\nrows: [train.steps]\ntasks: [{train.steps: 2}, {train.steps: 3}]\n"
                    "parts: [{losses: [toy_plain]}]\n")
    result = CliRunner().invoke(app, ["compare", "--plugin", "toy", "--loss", "toy_plain", "--dry-run",
                                      "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert "toy: toy_plain: preset smoke, 1 run →" in result.output and "ETA unknown" in result.output
    result = CliRunner().invoke(app, ["compare", "--recipe", str(path), "--dry-run", "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert "recipe r (toy): preset tiny, 2 runs" in result.output


def test_dry_run_shows_the_recipe_description_and_source(toy, tmp_path):
    """docs/compare.md's recipe file says ``description: one line shown by --dry-run``; it was read and never shown."""
    path = tmp_path / "r.yaml"
    path.write_text("plugin: toy\npreset: tiny\ndescription: two step counts side by side\nsource: no paper\n"
                    "tasks: [{train.steps: 2}, {train.steps: 3}]\nparts: [{losses: [toy_plain]}]\n")
    result = CliRunner().invoke(app, ["compare", "--recipe", str(path), "--dry-run", "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert "recipe r: two step counts side by side (source: no paper)" in result.output
    plain = CliRunner().invoke(app, ["compare", "--plugin", "toy", "--loss", "toy_plain", "--dry-run",
                                     "--out", str(tmp_path / "a")])
    assert plain.exit_code == 0 and "source:" not in plain.output


def test_compare_json_records_recipe_and_rows(toy, tmp_path, monkeypatch):
    """A real (fake-train) run of a recipe file: compare.json keeps the recipe and its rows for `platform report`."""
    import sys

    from contrastlab.experiments import runner

    script = tmp_path / "fake_train.py"
    from test_compare_runner import FAKE_TRAIN

    script.write_text(FAKE_TRAIN)
    monkeypatch.setenv("FAKE_CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.setattr(runner, "platform_base_command", lambda: [sys.executable, str(script)])
    path = tmp_path / "r.yaml"
    path.write_text("plugin: toy\npreset: tiny\nrows: [train.steps]\ntasks: [{train.steps: 2}, {train.steps: 3}]\n"
                    "parts: [{losses: [toy_plain]}, {losses: [toy_debiased], grid: {loss.tau_plus: [0.1, 0.2]}}]\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["compare", "--recipe", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    spec = json.loads((out / "compare.json").read_text())
    assert spec["recipe"] == "r" and spec["rows"] == ["train.steps"] and spec["preset"] == "tiny"
    assert len(spec["runs"]) == 6
    md = (out / "results.md").read_text()
    assert "| toy train.steps=2 |" in md and "toy_debiased tau_plus=0.2" in md
    rebuilt = CliRunner().invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert (tmp_path / "rep" / "results.md").read_text().replace(str(tmp_path / "rep"), "") == md.replace(
        str(out), ""
    )


def test_eta_line_reads_how_far_each_run_to_resume_got(tmp_path):
    """compare's ETA line: a run to resume whose run.json says ``progress`` 0.9 counts a tenth of a run."""
    import json
    from types import SimpleNamespace

    from contrastlab.experiments.plan import eta_lines

    class Fixed:
        name, gpu_presets = "fixed", ()

        def estimate_seconds(self, config, device):
            return 1000.0

    points = cmp.expand_grid("x", ["a"], [1], hparams_of=lambda loss: set())
    configs = {p.config_hash: SimpleNamespace(device="cpu") for p in points}
    plan = SimpleNamespace(plugin=Fixed(), preset="smoke")
    assert "ETA ≈ 17 min" in eta_lines(plan, points, configs, [None], tmp_path)[0]
    run_dir = points[0].run_dir(tmp_path)
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "interrupted", "progress": 0.9}))
    assert f"ETA ≈ {cmp.fmt_duration(100.0 + cmp.RUN_START_S)} for 1 run" in eta_lines(plan, points, configs, [None],
                                                                                     tmp_path)[0]


def test_an_error_keeps_its_square_brackets(tmp_path):
    """Errors went through rich markup: "grid: {key: [values]}" printed as "grid: {key: }" (and `[x]` vanished from
    any message, a file name included). The message also said "(required)" twice."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("plugin: recsys\npreset: smoke\n")
    result = CliRunner().invoke(app, ["compare", "--recipe", str(recipe), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "'parts' is required: list of {losses: [...], sets: {key: value}, grid: {key: [values]}}" in text, text
    assert text.count("required") == 1, text
    missing = tmp_path / "[bold]x.yaml"
    result = CliRunner().invoke(app, ["compare", "--recipe", str(missing), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and f"recipe file not found: {missing}" in result.output, result.output


def test_a_gpu_preset_on_the_cpu_is_warned_about_without_a_time_estimate_too(tmp_path):
    """A plugin with GPU-sized presets but no estimate_seconds (a third-party one) got "ETA unknown" and no warning
    that its GPU preset would run on the CPU, which docs/compare.md promises for every GPU-sized preset."""
    from types import SimpleNamespace

    from contrastlab.experiments.plan import eta_lines

    class NoEstimate:
        name, gpu_presets, default_preset = "ring", frozenset({"big"}), "smoke"

        def estimate_seconds(self, config, device):
            return None

    points = cmp.expand_grid("ring", ["a"], [1], hparams_of=lambda loss: set())
    configs = {p.config_hash: SimpleNamespace(device="cpu") for p in points}
    lines = eta_lines(SimpleNamespace(plugin=NoEstimate(), preset="big"), points, configs, [None], tmp_path)
    assert lines == ["ETA unknown for 1 run (plugin 'ring' gives no time estimate)",
                     "warning: preset 'big' is sized for a GPU but runs on the CPU here; for a quick check use "
                     "--preset smoke"], lines
    assert len(eta_lines(SimpleNamespace(plugin=NoEstimate(), preset="big"), points, configs, ["cuda:0"])) == 1
