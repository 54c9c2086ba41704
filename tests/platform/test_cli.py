"""The CLI surface: --help everywhere, list, config, plugins, and one-line errors for bad input."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
import typer
import yaml

import contrastlab as cl
from contrastlab.platform.plugins import PluginManager
from contrastlab.testing import run_cli

COMMANDS = ["list", "config", "train", "eval", "tensorboard", "plugins", "compare", "report"]


def assert_one_line_error(code: int, output: str, *needles: str) -> None:
    """Non-zero exit, an ``error:`` line, no traceback, and the expected words."""
    assert code != 0, output
    assert "Traceback" not in output, output
    assert "error:" in output, output
    for needle in needles:
        assert needle in output, output


def test_top_level_help_lists_commands_with_examples() -> None:
    code, out = run_cli(["--help"])
    assert code == 0
    for command in ["list", "config", "train", "eval", "tensorboard", "plugins"]:
        assert command in out
    assert "platform train --plugin curl --loss pucl --preset smoke" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_examples(command: str) -> None:
    code, out = run_cli([command, "--help"])
    assert code == 0, out
    assert "Example" in out or "example" in out


@pytest.mark.parametrize("kind", ["losses", "samplers", "encoders", "plugins"])
def test_list_json_has_name_package_description_hparams(kind: str) -> None:
    code, out = run_cli(["list", kind, "--json"])
    assert code == 0, out
    rows = json.loads(out)
    assert rows, f"no {kind} registered"
    for row in rows:
        assert row["name"] and row["package"] and row["description"]
        assert isinstance(row["hyperparameters"], list)
        if kind == "plugins":
            assert "smoke" in row["presets"]
    if kind == "losses":
        dcl = next(r for r in rows if r["name"] == "dcl")
        tau = next(h for h in dcl["hyperparameters"] if h["name"] == "tau_plus")
        assert tau["range"] and tau["source"]


def test_list_table_shows_columns() -> None:
    code, out = run_cli(["list", "losses"])
    assert code == 0
    for word in ["name", "package", "description", "hyperparameters", "dcl", "contrastlab", "tau_plus"]:
        assert word in out



@pytest.mark.parametrize("kind", ["losses", "samplers", "encoders", "plugins"])
def test_list_tables_cut_nothing_at_80_columns(kind: str) -> None:
    """New-user trial: at 80 columns (a default terminal, and every pipe) `platform list losses` cut long words with
    an ellipsis, hiding defaults: `aggregation='ou…`, `detach_weights=…`, `similarity='bil…`, and the package
    `contrastlab-t…` of a third-party loss. A word too long for its column now goes on over the next line."""
    code, out = run_cli(["list", kind], env={"COLUMNS": "80"})
    assert code == 0, out
    assert "…" not in out, out
    if kind == "losses":
        lines = out.splitlines()
        at = next(i for i, line in enumerate(lines) if "detach_weights" in line)
        joined = "".join(line.split("│")[4].strip() for line in lines[at:at + 2])
        (hcl,) = [row for row in json.loads(run_cli(["list", "losses", "--json"])[1]) if row["name"] == "hcl"]
        (detach,) = [hp for hp in hcl["hyperparameters"] if hp["name"] == "detach_weights"]
        assert f"detach_weights={detach['default']!r}" in joined, out



def test_plugins_table_cuts_no_module_name_at_80_columns() -> None:
    """New-user trial: `platform plugins` showed `contrastlab.plugins.c…` and `contrastlab.plugins.r…` at 80 columns."""
    code, out = run_cli(["plugins"], env={"COLUMNS": "80"})
    assert code == 0 and "…" not in out, out


def test_list_unknown_kind() -> None:
    code, out = run_cli(["list", "lossez"])
    assert_one_line_error(code, out, "losses")


def test_config_prints_documented_resolved_yaml(toy_pm: PluginManager) -> None:
    code, out = run_cli(
        ["config", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "loss.tau_plus=0.05", "--set", "train.steps=7"]
    )
    assert code == 0, out
    data = yaml.safe_load(out)
    assert data["loss"] == {"name": "dcl", "tau_plus": 0.05}
    assert data["train"]["steps"] == 7
    assert data["sampler"]["temperature"] > 0  # sampler defaults filled in from the registry
    lines = out.splitlines()
    # every key line is preceded by a comment line documenting it
    for i, line in enumerate(lines):
        if line.strip() and not line.strip().startswith("#") and not line.strip().startswith("name:"):
            assert lines[i - 1].strip().startswith("#") or lines[i - 1].rstrip().endswith(":"), line


def test_plugins_command_lists_packages_and_hooks() -> None:
    code, out = run_cli(["plugins", "--json"])
    assert code == 0
    rows = json.loads(out)
    losses = next(r for r in rows if r["module"] == "contrastlab.losses")
    assert losses["package"] == "contrastlab" and "register_losses" in losses["hooks"]
    assert losses["version"] != "unknown"


BAD_INPUTS = [
    (["train", "--plugin", "curll", "--loss", "dcl"], ["unknown plugin", "Did you mean 'curl'"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcll"], ["unknown loss", "Did you mean 'dcl'"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--sampler", "two_vew"], ["unknown sampler", "two_view"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--encoder", "mlpp"], ["unknown encoder", "mlp"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--preset", "smok"], ["toy_clusters preset", "smoke"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--seed", "-1"], ["seed"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--run-name", "../x"], ["--run-name"]),
    (["train", "--plugin", "curl", "--loss", "dcl", "--sampler", "two_view"],
     ["sampler 'two_view' consumes two_views", "plugin 'curl' provides query_key or queue", "query_key, queue"]),
    (["train", "--plugin", "curl", "--loss", "dcl", "--sampler", "queue", "--set", "agent.num_positives=2"],
     ["sampler 'queue' consumes queue", "provides query_key with this config", "compatible samplers: query_key"]),
    (["train", "--plugin", "pu", "--loss", "dcl", "--sampler", "query_key"],
     ["sampler 'query_key' consumes query_key", "plugin 'pu' provides two_views or multi_views"]),
    (["train", "--plugin", "curl", "--loss", "dcl", "--encoder", "resnet18"], ["encoder 'resnet18'", "pixel_conv"]),
    (["train", "--plugin", "simclr", "--loss", "dcl", "--encoder", "pixel_conv"], ["encoder 'pixel_conv'"]),
    (["train", "--plugin", "simclr", "--loss", "punce"], ["punce", "--plugin pu"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.stepz=3"], ["train.stepz", "steps"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=abc"], ["train.steps"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=-5"], ["train.steps"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "loss.tau_plus=1.5"], ["tau_plus", "[0, 1)"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "loss.beta=1"], ["beta", "tau_plus"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "loss.tau_plus=true"], ["not a valid float"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "novalue"], ["KEY=VALUE"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--device", "cuda"], ["CUDA is not available"]),
    (["train", "--plugin", "toy_clusters", "--loss", "dcl", "--device", "tpu"], ["unknown device"]),
    (["train", "--loss", "dcl"], ["--plugin is required"]),
    (["train", "--plugin", "toy_clusters", "--loss", "infonce,dcl", "--preset", "smoke"],
     ["trains one loss", "platform compare --plugin toy_clusters --loss infonce,dcl --preset smoke"]),
    (["config", "--plugin", "nope"], ["unknown plugin"]),
]


@pytest.mark.parametrize(("args", "needles"), BAD_INPUTS, ids=[" ".join(a[3:]) or a[0] for a, _ in BAD_INPUTS])
def test_bad_input_one_line_error(toy_pm: PluginManager, tmp_path: Path, args: list[str], needles: list[str]) -> None:
    code, out = run_cli([*args, "--logdir", str(tmp_path)] if args[0] == "train" else args)
    assert_one_line_error(code, out, *needles)
    assert not any(tmp_path.iterdir()), "nothing may be written before training starts"


def test_malformed_and_missing_yaml(toy_pm: PluginManager, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  steps: [1, 2\n")
    code, out = run_cli(["config", "--plugin", "toy_clusters", "--config", str(bad)])
    assert_one_line_error(code, out, "malformed YAML", "bad.yaml")
    code, out = run_cli(["config", "--plugin", "toy_clusters", "--config", str(tmp_path / "nope.yaml")])
    assert_one_line_error(code, out, "not found")
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("3\n")
    code, out = run_cli(["config", "--plugin", "toy_clusters", "--config", str(scalar)])
    assert_one_line_error(code, out, "mapping")


def test_yaml_config_file_is_applied(toy_pm: PluginManager, tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("loss: {name: hcl, beta: 0.5}\ntrain: {steps: 11}\n")
    code, out = run_cli(["config", "--plugin", "toy_clusters", "--config", str(good)])
    assert code == 0, out
    data = yaml.safe_load(out)
    assert data["loss"]["name"] == "hcl" and data["loss"]["beta"] == 0.5 and data["train"]["steps"] == 11


def test_incompatible_label_aware_loss_is_refused(tmp_path: Path) -> None:
    code, out = run_cli(
        ["train", "--plugin", "curl", "--loss", "supcon", "--preset", "smoke", "--logdir", str(tmp_path)]
    )
    assert_one_line_error(code, out, "supcon", "labels")
    assert not any(tmp_path.iterdir())


def test_eval_and_resume_reject_non_run_dirs(tmp_path: Path) -> None:
    code, out = run_cli(["eval", str(tmp_path)])
    assert_one_line_error(code, out, "not a run directory")
    code, out = run_cli(["train", "--resume", str(tmp_path / "missing")])
    assert_one_line_error(code, out, "not found")


def test_tensorboard_missing_dir(tmp_path: Path) -> None:
    code, out = run_cli(["tensorboard", str(tmp_path / "nothing")])
    assert_one_line_error(code, out, "not found")


def test_missing_dataset_says_how_to_get_it(tmp_path: Path) -> None:
    empty = tmp_path / "data"
    empty.mkdir()
    code, out = run_cli(
        [
            "train",
            "--plugin",
            "simclr",
            "--loss",
            "infonce",
            "--preset",
            "smoke",
            "--set",
            f"data.root={empty}",
            "--logdir",
            str(tmp_path / "runs"),
        ]
    )
    assert_one_line_error(code, out, "not found", "apt-get install -y dataset-fashion-mnist", "data.root")
    assert not (tmp_path / "runs").exists()


def test_label_aware_loss_on_unlabelled_simclr_config_suggests_the_fix(tmp_path: Path) -> None:
    code, out = run_cli(
        ["train", "--plugin", "simclr", "--loss", "supcon", "--preset", "smoke", "--logdir", str(tmp_path)]
    )
    assert_one_line_error(code, out, "supcon", "data.labels=class")


def test_tensorboard_bad_port(tmp_path: Path) -> None:
    code, out = run_cli(["tensorboard", str(tmp_path), "--port", "99999"])
    assert_one_line_error(code, out, "--port 99999")


def test_resume_of_a_completed_run_is_refused(toy_pm: PluginManager, tmp_path: Path) -> None:
    code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path),
                         "--set", "train.steps=5", "--sampler", "two_view"])
    assert code == 0, out
    run_dir = next(tmp_path.glob("*/*/*"))
    overrides = json.loads((run_dir / "run.json").read_text())["overrides"]
    assert "--set sampler.name=two_view" in overrides and "--set train.steps=5" in overrides
    code, out = run_cli(["train", "--resume", str(run_dir)])
    assert_one_line_error(code, out, "already completed")


def test_a_run_name_taken_by_a_completed_run_does_not_suggest_resuming_it(toy_pm: PluginManager,
                                                                          tmp_path: Path) -> None:
    args = ["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path), "--set", "train.steps=3",
            "--run-name", "full"]
    assert run_cli(args)[0] == 0
    code, out = run_cli(args)
    assert_one_line_error(code, out, "already holds a completed run", "summary.json", "choose another --run-name")
    assert "--resume" not in out


def test_list_table_prints_descriptions_verbatim() -> None:
    """Square brackets in a description are text, not rich markup (``z1[i]`` must not become ``z1``)."""
    from typer.testing import CliRunner

    from contrastlab.cli import app
    from contrastlab.losses import InfoNCELoss
    from contrastlab.testing import fresh_plugin_manager

    class Bracketed(InfoNCELoss):
        name, description = "bracketed", "z1[i] vs z2[j]"

    class Package:
        @cl.hookimpl
        def register_losses(self, register) -> None:
            register(Bracketed)

    with fresh_plugin_manager(Package(), package="brackets"):
        result = CliRunner().invoke(app, ["list", "losses"], env={"COLUMNS": "300"})
    assert result.exit_code == 0 and "z1[i]" in result.output and "[j" in result.output, result.output


@pytest.mark.parametrize(("args", "message"), [
    (["eval"], "error: Missing argument 'run_dir'; see `platform eval --help`"),
    (["nope-command"], "error: No such command 'nope-command'; see `platform --help`"),
    (["tran"], "error: No such command 'tran'. Did you mean 'train'? See `platform --help`"),  # not "?; see"
    (["compare", "--losses", "x"], "error: No such option: --losses (Possible options: --loss, --seeds, --set)"),
    (["eval", "somewhere", "--episodes", "0"], "error: Invalid value for '--episodes'"),
])
def test_usage_errors_are_one_line_like_every_other_error(args: list[str], message: str) -> None:
    code, out = run_cli(args)
    assert code == 2 and out.strip().startswith(message) and len(out.strip().splitlines()) == 1, out


def test_config_says_when_train_would_refuse_the_config() -> None:
    code, out = run_cli(["config", "--plugin", "graph", "--loss", "supcon"])
    assert code == 0 and "note: platform train would refuse this config: loss 'supcon' needs" in out
    code, out = run_cli(["config", "--plugin", "graph", "--loss", "dcl"])
    assert code == 0 and "would refuse" not in out
    code, out = run_cli(["config", "--plugin", "recsys", "--loss", "debiased_pos"])  # the plugin's own check
    assert code == 0 and "would refuse this config: plugin 'recsys' cannot use loss 'debiased_pos'" in out


def test_config_says_when_train_would_refuse_a_value_the_plugin_checks() -> None:
    """New-user trial: `platform config --plugin curl --set agent.crop=200` printed the config with no word, and
    `platform train` with the same options then refused it (crop larger than the 100 px renders)."""
    code, out = run_cli(["config", "--plugin", "curl", "--set", "agent.crop=200"])
    assert code == 0 and "  crop: 200" in out, out
    assert "note: platform train would refuse this config: agent.crop=200 is larger than env.render_size" in out


def test_summary_json_on_a_full_disk_prints_the_resume_command(
    toy_pm: PluginManager, tmp_path: Path, monkeypatch
) -> None:
    """Training succeeded but summary.json cannot be written: one error line, then how to continue the run."""
    import errno

    import contrastlab.platform.run as run_module

    real_write = run_module.write_json_atomic

    def full_at_summary(path: Path, data: object) -> None:
        if Path(path).name == "summary.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, data)

    monkeypatch.setattr(run_module, "write_json_atomic", full_at_summary)
    args = ["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path),
            "--set", "train.steps=10", "--set", "checkpoint_every=10"]  # fmt: skip
    code, out = run_cli(args)
    assert_one_line_error(code, out, "summary.json", "No space left on device")
    assert len([line for line in out.splitlines() if line.startswith("error:")]) == 1, out
    (run_dir,) = [p for p in tmp_path.glob("*/*/*") if p.is_dir()]
    assert "fix the cause, then continue with:" in out and f"platform train --resume {run_dir}" in out, out
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    monkeypatch.setattr(run_module, "write_json_atomic", real_write)
    code, out = run_cli(["train", "--resume", str(run_dir)])
    assert code == 0, out
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"


@pytest.mark.parametrize(
    ("command", "option", "default"),
    [
        ("train", "--seed", "(default: 1;"),
        ("train", "--device", "(default: the preset's device, else auto;"),
        ("train", "--preset", "(default: the plugin's default preset, smoke for every built-in plugin;"),
        ("train", "--loss", "(default: the plugin's: punce for pu, infonce for the others)"),
        ("eval", "--episodes", "(default: the run's config;"),
        ("eval", "--device", "(default: the device in the run's config.yaml)"),
        ("config", "--preset", "(default: the plugin's default preset, smoke for every built-in plugin;"),
    ],
)
def test_help_says_each_default(command: str, option: str, default: str) -> None:
    code, out = run_cli([command, "--help"], env={"COLUMNS": "400"})
    assert code == 0, out
    line = next(line for line in out.splitlines() if line.startswith("│") and f" {option} " in line)
    assert default in line, line


def test_tune_help_on_set_says_a_loss_key_must_fit_the_loss() -> None:
    code, out = run_cli(["tune", "--help"], env={"COLUMNS": "400"})
    assert code == 0, out
    line = next(line for line in out.splitlines() if " --set " in line)
    assert "A loss.* key must be a hyperparameter of --loss" in line and "only reaches" not in line, line


@pytest.mark.parametrize("command", ["train", "compare", "tune", "report"])
def test_help_examples_paste_into_a_shell(command: str) -> None:
    """An example that spans lines in --help ends each of its lines but the last with a backslash (a pasted first
    line of `platform tune ... --search ...` used to start 20 paper-preset trials without its `--trials 40`)."""
    import shlex

    from contrastlab.cli import app as cli_app

    click_command = typer.main.get_command(cli_app).commands[command]  # type: ignore[attr-defined]
    help_text = click_command.help or ""
    examples = help_text.split("Examples:", 1)[1] if "Examples:" in help_text else ""
    blocks = [b.strip().splitlines() for b in examples.split("\n\n") if b.strip().startswith("platform ")]
    assert blocks, f"{command} --help has no examples"
    for block in blocks:
        for line in block[:-1]:
            assert line.rstrip().endswith(" \\"), block
        shlex.split(" ".join(line.strip().rstrip("\\") for line in block))  # parses as one command


def example_commands(text: str) -> list[list[str]]:
    """Every ``platform ...`` command in ``text`` (continued lines joined), as argument lists."""
    import re
    import shlex

    joined = re.sub(r"\\\n\s*", " ", text)
    return [shlex.split(m.group(0)) for m in re.finditer(r"^\s*(?:- `)?platform [^\n`#]*", joined, re.M)]


@pytest.mark.parametrize("source", ["compare", "tune", "docs/tune.md", "docs/compare.md", "README.md"])
def test_examples_name_presets_their_plugin_has(source: str) -> None:
    """A pasted example ran into `unknown simclr preset 'paper'` (simclr's is cifar10-paper)."""
    from contrastlab.cli import app as cli_app
    from contrastlab.platform.plugins import get_task_plugin

    if source.endswith(".md"):
        text = (Path(__file__).resolve().parents[2] / source).read_text()
    else:
        text = typer.main.get_command(cli_app).commands[source].help or ""  # type: ignore[attr-defined]
    checked = 0
    for args in example_commands(text):
        options = dict(itertools.pairwise(args))
        plugin, preset = options.get("--plugin"), options.get("--preset")
        if plugin in ("curl", "simclr", "pu", "graph", "recsys") and preset is not None:
            assert preset in sorted(get_task_plugin(plugin).presets), " ".join(args)
            checked += 1
    assert checked, f"no example of {source} names a plugin and a preset"


@pytest.mark.parametrize(("content", "needle"), [
    (b"{{{ not : valid : [", "malformed YAML in"), (b"- 1\n- 2\n", "must contain a mapping of keys, not list"),
    (b"\xff\xfe\x00", "is not a text (UTF-8) file"),
])
@pytest.mark.parametrize("command", ["resume", "eval"])
def test_a_corrupt_config_yaml_of_a_run_is_one_line(toy_pm: PluginManager, tmp_path: Path, content: bytes,
                                                     needle: str, command: str) -> None:
    """`platform train --resume` and `platform eval` of a run whose config.yaml was damaged: a YAML, Unicode or
    attribute error traceback."""
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import get_task_plugin
    from contrastlab.platform.run import Run

    task = get_task_plugin("toy_clusters")
    run = Run.create(task, resolve_config(task), tmp_path, run_name="r")
    run.mark("interrupted")
    run.close()
    (run.dir / "config.yaml").write_bytes(content)
    code, out = run_cli(["train", "--resume", str(run.dir)] if command == "resume" else ["eval", str(run.dir)])
    assert_one_line_error(code, out, needle, str(run.dir / "config.yaml"))


def test_an_empty_preset_is_refused_before_anything_is_written(toy_pm: PluginManager, tmp_path: Path) -> None:
    """`platform train --preset ""` trained the default preset."""
    code, out = run_cli(["train", "--plugin", "toy_clusters", "--preset", "", "--logdir", str(tmp_path)])
    assert_one_line_error(code, out, "unknown toy_clusters preset ''")
    assert not any(tmp_path.iterdir())


def test_a_busy_machine_gets_one_note_on_openmp_spinning(monkeypatch) -> None:
    """At load average 6 on 2 cores a recsys run took 58-67 s with the defaults and 3 s with OMP_WAIT_POLICY=PASSIVE,
    and nothing said why."""
    import io

    from rich.console import Console

    from contrastlab.cli import train as train_cli

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(train_cli, "err_console", Console(file=io.StringIO(), force_terminal=True))
    monkeypatch.setattr(train_cli.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(train_cli.os, "getloadavg", lambda: (6.0, 5.0, 4.0))
    note = train_cli.note_if_busy(threads=2)
    assert note is not None and "load average 6.0 on 2 cores" in note and "OMP_WAIT_POLICY=PASSIVE" in note
    assert "\n" not in note
    assert train_cli.note_if_busy(threads=1) is None  # one thread does not spin-wait
    monkeypatch.setattr(train_cli.os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    assert train_cli.note_if_busy(threads=2) is None  # not busy
    monkeypatch.setattr(train_cli.os, "getloadavg", lambda: (6.0, 5.0, 4.0))
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert train_cli.note_if_busy(threads=2) is None  # the user chose


def test_train_says_when_its_configuration_trains_no_loss(toy_pm: PluginManager, tmp_path: Path, monkeypatch) -> None:
    """pu's end-to-end baseline trains no contrastive loss: `--loss dcl` ran silently and filed the run under dcl."""
    from contrastlab.platform.plugins import get_task_plugin

    args = ["train", "--plugin", "toy_clusters", "--loss", "dcl", "--logdir", str(tmp_path), "--set", "train.steps=2"]
    code, out = run_cli(args)
    assert code == 0 and "trains no contrastive loss" not in out, out
    monkeypatch.setattr(type(get_task_plugin("toy_clusters")), "uses_loss", lambda self, config: False)
    code, out = run_cli(args)
    assert code == 0, out
    assert "note: this toy_clusters configuration trains no contrastive loss, so loss 'dcl' is not used" in out


def test_list_takes_the_singular_kind_too() -> None:
    """`platform list loss` (the registry's own word: `loss 'dcl'`, `sampler 'queue'`) was refused with "unknown kind
    'loss'; ... Did you mean 'losses'?"; it lists the same as the plural now."""
    for plural in ("losses", "samplers", "encoders", "plugins"):
        singular = plural.removesuffix("es") if plural == "losses" else plural.removesuffix("s")
        code, out = run_cli(["list", singular, "--json"])
        assert code == 0, out
        assert out == run_cli(["list", plural, "--json"])[1]
    code, out = run_cli(["list", "lossez"])
    assert code == 2 and "unknown kind 'lossez'" in out, out


def test_compare_dry_run_lists_a_loss_free_run_under_loss_none(toy_pm: PluginManager, tmp_path: Path,
                                                               monkeypatch) -> None:
    """pu's end-to-end baseline in `compare --dry-run` read "pucl method=end_to_end": a loss it never trains, where
    the tables say `none`. The line now says `none` and the folder the run is filed under."""
    from contrastlab.platform.plugins import get_task_plugin

    monkeypatch.setattr(type(get_task_plugin("toy_clusters")), "uses_loss", lambda self, config: False)
    code, out = run_cli(["compare", "--plugin", "toy_clusters", "--loss", "infonce,dcl", "--dry-run",
                         "--out", str(tmp_path / "out")])
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith("fresh")]
    assert len(lines) == 1 and "none (filed under dcl)" in lines[0] and "/dcl/" in lines[0], out


def test_eval_table_title_keeps_square_brackets_of_the_run_path(toy_pm: PluginManager, tmp_path: Path) -> None:
    """`platform eval` titled its table through rich markup: a run under `--logdir r[v2]` was shown as `eval .../r/...`
    (the `[v2]` taken for a style), while every other line printed the path as it is. The title now names the run
    (plugin / loss / seed) instead of its path; the lines that print the path print it as it is."""
    logdir = tmp_path / "r[v2]"
    code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl", "--set", "train.steps=4",
                         "--logdir", str(logdir), "--run-name", "x"])
    assert code == 0, out
    run_dir = logdir / "toy_clusters" / "dcl" / "x"
    code, out = run_cli(["eval", str(run_dir)])
    assert code == 0, out
    lines = out.splitlines()
    assert any(line.startswith(f"evaluating {run_dir} (checkpoint at step") for line in lines), out
    assert f"eval.json: {run_dir / 'eval.json'}" in lines, out
    assert "".join(lines).count(str(run_dir)) == 2, out  # those two lines: the path is nowhere cut or restyled
    assert "eval: toy_clusters / dcl (seed 1)" in " ".join(out.split()), out  # the title, wrapped to the table


@pytest.mark.parametrize(("command", "sentence"), [
    ("compare", "Outputs in --out: results.csv, summary.csv, results.md"),
    ("tune", "best.json (for `platform compare --tuned`), trials.csv, trials.md"),
    ("list", "the hyperparameters with defaults and ranges"),
])
def test_help_paragraphs_are_not_broken_where_the_source_wraps(command: str, sentence: str) -> None:
    """New-user trial: Typer keeps the docstring's own line breaks, so `platform compare --help` broke its
    paragraphs at the source's wrap points as well as the terminal's ("... Outputs in --out: results.csv," then
    "summary.csv, ..." on the next line, and short ragged lines between). Prose is reflowed; examples keep theirs."""
    code, out = run_cli([command, "--help"], env={"COLUMNS": "400"})
    assert code == 0, out
    assert any(sentence in line for line in out.splitlines()), out
    if command == "compare":  # an indented example continued with a backslash keeps its break
        assert any(line.strip().startswith("--seeds 5 --backend ray") for line in out.splitlines()), out


@pytest.mark.parametrize("command", [*COMMANDS, "tune"])
def test_help_examples_stay_whole_at_80_columns(command: str) -> None:
    """New-user trial: at 80 columns rich wrapped the longer examples of `compare --help` and `tune --help`, so a
    copied example ran its first half (`... --grid` / `... --search`) and failed. Each example line fits, and a
    line that goes on is continued with a backslash."""
    code, out = run_cli([command, "--help"], env={"COLUMNS": "80"})
    assert code == 0, out
    text = out.split("╭")[0]  # the description, before the option boxes
    blocks = [block.strip().splitlines() for block in re.split(r"\n\s*\n", text)]
    examples = [[line.strip() for line in block] for block in blocks if block and block[0].startswith("platform ")]
    assert examples or command in ("list", "config", "eval", "plugins", "tensorboard"), out
    for block in examples:  # each line after the first goes on from a line ending in a backslash
        assert all(before.endswith("\\") for before in block[:-1]), block


@pytest.mark.parametrize("command", [*COMMANDS, "tune"])
def test_help_examples_are_indented_blocks_under_their_heading(command: str) -> None:
    """`platform report --help` printed its examples flush with the prose: Typer dedents the text after the first
    paragraph by its smallest indentation (`inspect.cleandoc`), which was the examples' own when nothing after the
    "Examples:" heading was prose. list, config, eval and plugins ran theirs into one line ("Examples: a; b")."""
    code, out = run_cli([command, "--help"], env={"COLUMNS": "200"})
    assert code == 0, out
    lines = out.split("╭")[0].splitlines()
    heading = next(i for i, line in enumerate(lines) if line.strip() == "Examples:")
    indent = len(lines[heading]) - len(lines[heading].lstrip())
    examples = [line for line in lines[heading + 1:] if line.strip().startswith(("platform ", "CONTRASTLAB_"))]
    assert examples and not any("; platform" in line for line in examples), out
    assert all(len(line) - len(line.lstrip()) >= indent + 2 for line in examples), out


def test_top_level_help_indents_its_typical_session() -> None:
    code, out = run_cli(["--help"], env={"COLUMNS": "200"})
    assert code == 0, out
    lines = out.split("╭")[0].splitlines()
    heading = next(line for line in lines if line.strip() == "Typical session:")
    commands = [line for line in lines if line.strip().startswith("platform ")]
    assert len(commands) == 4, out
    assert all(len(c) - len(c.lstrip()) >= len(heading) - len(heading.lstrip()) + 2 for c in commands), out
