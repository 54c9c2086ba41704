"""``cli/app.py``: `platform list`, `plugins`, `config`'s note, `tensorboard` and the entry point ``main``: what
each prints (tables and JSON as the registry says), its defaults and limits, and its exit codes."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import yaml

from contrastlab.testing import run_cli


@pytest.fixture(autouse=True)
def wide_consoles(monkeypatch) -> None:
    """Both CLI consoles 1000 columns wide, so a table cell never wraps: ``COLUMNS`` given to the command is not
    enough, since rich fixes a console's width when it is created if ``COLUMNS`` is set then (pytest-xdist's
    workers and many terminals set it)."""
    from contrastlab.cli import common

    for console in (common.console, common.err_console):
        monkeypatch.setattr(console, "_width", 1000)


def assert_one_line_error(code: int, output: str, *needles: str) -> None:
    """Non-zero exit, an ``error:`` line, no traceback, and the expected words."""
    assert code != 0, output
    assert "Traceback" not in output and "error:" in output, output
    for needle in needles:
        assert needle in output, output


def test_platform_without_a_command_prints_the_help() -> None:
    _code, out = run_cli([])  # exit status 2 (click: help shown for no command)
    assert "Typical session" in out and "platform list losses" in out and "Commands" in out, out
    assert "Missing command" not in out, out


def table_titles(out: str) -> list[str]:
    """The titles of the rich tables in ``out``: the lines that hold only a kind's plural name."""
    return [line.strip() for line in out.splitlines() if line.strip() in ("losses", "samplers", "encoders", "plugins")]


def table_rows(out: str) -> list[list[str]]:
    """The body rows of the rich tables in ``out`` (printed too wide to fold a word): each row's cells, a cell's
    lines joined by newlines."""
    rows: list[list[list[str]]] = []
    fresh = True
    for line in out.splitlines():
        if line.startswith("│"):
            pieces = [c.strip() for c in line.strip().strip("│").split("│")]
            if fresh:
                rows.append([[] for _ in pieces])
                fresh = False
            for cell, piece in zip(rows[-1], pieces, strict=True):
                if piece:
                    cell.append(piece)
        else:
            fresh = True
    return [["\n".join(cell) for cell in row] for row in rows]


def test_list_without_a_kind_lists_every_kind_and_a_kind_only_itself() -> None:
    code, out = run_cli(["list"], env={"COLUMNS": "1000"})
    assert code == 0, out
    assert table_titles(out) == ["losses", "samplers", "encoders", "plugins"], out
    code, out = run_cli(["list", "samplers"], env={"COLUMNS": "1000"})
    assert code == 0, out
    assert table_titles(out) == ["samplers"], out


def test_list_losses_table_shows_each_hyperparameter_with_its_default_and_range_and_the_labels() -> None:
    """The hyperparameter cell has one line `name=default range` per hyperparameter (the range only where there is
    one), as the JSON says; the labels column names the label kinds a loss needs, or `none`."""
    code, out = run_cli(["list", "losses"], env={"COLUMNS": "1000"})
    assert code == 0, out
    header = next(line for line in out.splitlines() if line.startswith("┃") and "name" in line)
    assert [c.strip() for c in header.strip().strip("┃").split("┃")][-1] == "labels", header
    rows = {row[0]: row for row in table_rows(out)}
    losses = json.loads(run_cli(["list", "losses", "--json"])[1])
    assert any(loss["label_kinds"] for loss in losses) and any(not loss["label_kinds"] for loss in losses)
    for loss in losses:
        cells = rows[loss["name"]]
        expected = [f"{hp['name']}={hp['default']!r}" + (f" {hp['range']}" if hp["range"] else "")
                    for hp in loss["hyperparameters"]]
        assert cells[3] == ("\n".join(expected) or "-"), cells
        assert cells[4] == (", ".join(loss["label_kinds"]) or "none"), cells


def test_list_plugins_json_gives_each_plugins_presets_metric_and_sampler_inputs() -> None:
    """`sampler_inputs` is the plugin's declared set in the sampler contract's order (null: undeclared)."""
    from contrastlab.platform.plugins import registry
    from contrastlab.platform.sampler_contract import SAMPLER_INPUTS

    code, out = run_cli(["list", "plugins", "--json"])
    assert code == 0, out
    rows = json.loads(out)
    assert any(row["sampler_inputs"] for row in rows), rows
    for row in rows:
        plugin = registry("plugin").get(row["name"]).factory()
        feeds = plugin.sampler_inputs
        assert row["sampler_inputs"] == (None if feeds is None else [k for k in SAMPLER_INPUTS if k in feeds])
        assert row["presets"] == sorted(plugin.presets) and row["default_preset"] == plugin.default_preset
        assert row["primary_metric"] == plugin.primary_metric


def test_list_plugins_table_gives_every_preset_once_the_default_first() -> None:
    code, out = run_cli(["list", "plugins"], env={"COLUMNS": "1000"})
    assert code == 0, out
    rows = {row[0]: row for row in table_rows(out)}
    plugins = json.loads(run_cli(["list", "plugins", "--json"])[1])
    assert any(len(p["presets"]) > 2 for p in plugins)
    for plugin in plugins:
        default = plugin["default_preset"]
        shown = rows[plugin["name"]][3].replace("\n", " ").split(", ")
        assert shown[0] == default and sorted(shown) == sorted(plugin["presets"]), (shown, plugin)


def test_plugins_prints_a_table_unless_json_is_asked_for() -> None:
    code, out = run_cli(["plugins"], env={"COLUMNS": "1000"})
    assert code == 0, out
    assert "plugin packages" in out, out
    assert any([c.strip() for c in line.split("│")[3:4]] == ["contrastlab.losses"] for line in out.splitlines()), out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


@pytest.mark.parametrize(("args", "port"), [([], "6006"), (["--port", "0"], "0"), (["--port", "65535"], "65535")])
def test_tensorboard_serves_the_logdir_on_localhost_until_ctrl_c(
    args: list[str], port: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Default port 6006 (README), ports 0 (a free one) to 65535 accepted; it waits until Ctrl-C, then says so."""
    from types import SimpleNamespace

    program = importlib.import_module("tensorboard.program")  # the module itself, not tensorboard's lazy proxy

    cli_app = importlib.import_module("contrastlab.cli.app")  # the package exports the Typer object as `app`
    argvs = []

    class Board:
        def configure(self, argv: list) -> None:
            argvs.append(argv)

        def launch(self) -> str:
            return "http://127.0.0.1:6006/"

    def ctrl_c(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(program, "TensorBoard", Board)
    monkeypatch.setattr(cli_app, "time", SimpleNamespace(sleep=ctrl_c))
    code, out = run_cli(["tensorboard", str(tmp_path), *args])
    assert code == 0, out
    assert argvs == [[None, "--logdir", str(tmp_path), "--host", "127.0.0.1", "--port", port]]
    assert "at http://127.0.0.1:6006/" in out and out.rstrip().endswith("stopped"), out


@pytest.mark.parametrize("port", ["-1", "65536"])
def test_tensorboard_port_out_of_range_is_refused_before_launching(
    port: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = importlib.import_module("tensorboard.program")  # the module itself, not tensorboard's lazy proxy

    monkeypatch.setattr(program, "TensorBoard", None)  # calling it would be a TypeError, not the one-line error
    code, out = run_cli(["tensorboard", str(tmp_path), "--port", port])
    assert_one_line_error(code, out, f"--port {port}", "0-65535")


def test_tensorboard_on_a_taken_port_says_to_try_port_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program = importlib.import_module("tensorboard.program")  # the module itself, not tensorboard's lazy proxy

    class Board:
        def configure(self, argv: list) -> None:
            pass

        def launch(self) -> str:
            raise program.TensorBoardServerException("port 6006 is in use")

    monkeypatch.setattr(program, "TensorBoard", Board)
    code, out = run_cli(["tensorboard", str(tmp_path)])
    assert_one_line_error(code, out, "cannot start TensorBoard on port 6006", "--port 0")


def test_config_note_goes_to_stderr_so_the_printed_yaml_stays_loadable() -> None:
    """`platform config ... > my.yaml` (the documented use): the refusal note must not end up in the file."""
    from typer.testing import CliRunner

    from contrastlab.cli import app

    result = CliRunner().invoke(app, ["config", "--plugin", "graph", "--loss", "supcon"])
    assert result.exit_code == 0, result.output
    assert "would refuse" in result.stderr and "would refuse" not in result.stdout, result.output
    assert yaml.safe_load(result.stdout)["loss"]["name"] == "supcon"


def test_main_exits_130_when_interrupted_while_loading_plugins_and_one_line_on_a_plugin_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from types import SimpleNamespace

    from contrastlab.platform.errors import ConfigError

    cli_app = importlib.import_module("contrastlab.cli.app")  # the package exports the Typer object as `app`

    def interrupted(app: object) -> None:
        raise KeyboardInterrupt

    def broken(app: object) -> None:
        raise ConfigError("plugin package 'x' is broken")

    for register, code, line in ((interrupted, 130, "interrupted while starting (nothing was run)"),
                                 (broken, 2, "plugin package 'x' is broken")):
        monkeypatch.setattr(cli_app, "get_plugin_manager", lambda r=register: SimpleNamespace(register_commands=r))
        monkeypatch.setattr(cli_app, "app", lambda: pytest.fail("no command may run"))
        with pytest.raises(SystemExit) as done:
            cli_app.main()
        assert done.value.code == code
        err = capsys.readouterr().err
        assert line in err and "Traceback" not in err, err
