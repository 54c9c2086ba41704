"""The ``platform`` command line (also installed as ``contrastlab``).

Examples::

    platform list losses
    platform config --plugin curl --preset smoke --set loss.name=dcl
    platform train --plugin curl --loss pucl --preset smoke
    platform eval runs/curl/pucl/20261121-120000-s1 --video episode.gif
    platform tensorboard runs
    platform compare --plugin simclr --loss infonce,dcl --seeds 3 --preset smoke
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.rich_utils
from rich.markup import escape
from rich.table import Table

from contrastlab.cli import train as commands_train
from contrastlab.cli.common import (
    PRESET_DEFAULT,
    console,
    print_usage_error,
    reflow_command_help,
    reflow_help,
    say,
    user_errors,
)
from contrastlab.cli.compare import add_compare_commands
from contrastlab.cli.tune import add_tune_commands
from contrastlab.platform.config import resolve_config
from contrastlab.platform.config_yaml import config_to_yaml
from contrastlab.platform.errors import ConfigError, ContrastlabError, IncompatibleError, UnknownNameError
from contrastlab.platform.plugins import get_plugin_manager, get_task_plugin, registry
from contrastlab.platform.preflight import preflight
from contrastlab.platform.registry import Component, unknown_name_message
from contrastlab.platform.sampler_contract import SAMPLER_INPUTS

app = typer.Typer(
    name="platform",
    help=reflow_help(
        "contrastlab: contrastive learning with debiased losses, as plugins.\n\n"
        "Typical session:\n\n"
        "  platform list losses\n\n"
        "  platform train --plugin curl --loss pucl --preset smoke\n\n"
        "  platform tensorboard runs\n\n"
        "  platform compare --plugin simclr --loss infonce,dcl --seeds 3 --preset smoke"
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
typer.rich_utils.rich_format_error = print_usage_error  # Typer's usage-error printer: ours, one line

KINDS = {"losses": "loss", "samplers": "sampler", "encoders": "encoder", "plugins": "plugin"}


def _component_row(comp: Component) -> dict[str, Any]:
    row = comp.as_dict()
    if comp.kind == "plugin":
        plugin = comp.factory()
        row["presets"] = sorted(plugin.presets)
        row["default_preset"] = plugin.default_preset
        row["gpu_presets"] = sorted(plugin.gpu_presets)
        row["primary_metric"] = plugin.primary_metric
        feeds = plugin.sampler_inputs
        row["sampler_inputs"] = None if feeds is None else [k for k in SAMPLER_INPUTS if k in feeds]
        row["hyperparameters"] = []
    return row


def _hparam_text(row: dict[str, Any]) -> str:
    parts = []
    for hp in row["hyperparameters"]:
        text = f"{hp['name']}={hp['default']!r}"
        if hp["range"]:
            text += f" {hp['range']}"
        parts.append(text)
    return "\n".join(parts) or "-"


@app.command("list")
@user_errors
def list_command(
    kind: Annotated[
        str | None,
        typer.Argument(help="What to list: losses, samplers, encoders or plugins (or loss, sampler, ...). Omit to "
                       "list everything."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")] = False,
) -> None:
    """List registered losses, samplers, encoders and task plugins.

    Each row shows the name, the package that registered it, a one-line description, the hyperparameters with
    defaults and ranges, and for plugins their presets.

    Examples:

      platform list losses

      platform list plugins --json
    """
    kind = {single: plural for plural, single in KINDS.items()}.get(kind or "", kind)  # `list loss` = `list losses`
    if kind is not None and kind not in KINDS:
        raise UnknownNameError(unknown_name_message("kind", kind, list(KINDS)))
    kinds = [kind] if kind else list(KINDS)
    data = {k: [_component_row(c) for c in registry(KINDS[k])] for k in kinds}
    if as_json:
        typer.echo(json.dumps(data if kind is None else data[kind], indent=2, default=str))
        return
    for k in kinds:
        table = Table(title=k, show_lines=True)
        # overflow="fold": a word too long for a narrow column goes on over the next line; rich's default cut it
        # with an ellipsis, which at 80 columns hid defaults such as aggregation='outer'
        table.add_column("name", style="bold", overflow="fold")
        table.add_column("package", overflow="fold")
        table.add_column("description", overflow="fold")
        if k == "plugins":
            table.add_column("presets (default first)", overflow="fold")
        else:
            table.add_column("hyperparameters (default, range)", overflow="fold")
        if k == "losses":
            table.add_column("labels", overflow="fold")
        if k == "samplers":
            table.add_column("consumes", overflow="fold")
        for row in data[k]:
            cells = [row["name"], row["package"], row["description"]]
            if k == "plugins":
                presets = [row["default_preset"]] + [p for p in row["presets"] if p != row["default_preset"]]
                cells.append(", ".join(presets))
            else:
                cells.append(_hparam_text(row))
            if k == "losses":
                cells.append(", ".join(row["label_kinds"]) or "none")
            if k == "samplers":
                cells.append(", ".join(row["accepts"]))
            table.add_row(*(escape(c) for c in cells))  # descriptions like "z1[i]" are not markup
        console.print(table)


@app.command("config")
@user_errors
def config_command(
    plugin: Annotated[str, typer.Option("--plugin", "-p", help="Task plugin name (see `platform list plugins`).")],
    preset: Annotated[str | None, typer.Option(help=f"Preset to start from ({PRESET_DEFAULT}).")] = None,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="YAML file with overrides (e.g. a saved config.yaml).")
    ] = None,
    loss: Annotated[str | None, typer.Option(help="Loss name (see `platform list losses`).")] = None,
    sampler: Annotated[str | None, typer.Option(help="Sampler name.")] = None,
    encoder: Annotated[str | None, typer.Option(help="Encoder name.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override one key: --set loss.tau_plus=0.05 (repeatable).")
    ] = None,
) -> None:
    """Print the fully resolved config as YAML, with every field documented.

    Examples:

      platform config --plugin curl --preset smoke

      platform config --plugin simclr --loss dcl --set loss.tau_plus=0.1 > my.yaml
    """
    task = get_task_plugin(plugin)
    config = resolve_config(
        task, preset=preset, config_file=config_file, sets=set_ or [], loss=loss, sampler=sampler, encoder=encoder
    )
    header = f"contrastlab config for plugin '{task.name}', preset '{preset or task.default_preset}'"
    typer.echo(config_to_yaml(config, header=header), nl=False)
    try:  # train's pre-flight: say when `platform train` would refuse this config (incompatible, a bad value)
        preflight(task, config)
    except (IncompatibleError, ConfigError) as exc:
        say(f"note: platform train would refuse this config: {exc}", stderr=True)
    except ContrastlabError:
        pass  # data missing and the like: train says so itself, and the config may be meant for another machine


@app.command("plugins")
@user_errors
def plugins_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """List the installed plugin packages with their version and the hooks they implement.

    Set CONTRASTLAB_PLUGINS=pkg1,pkg2 to load only those third-party packages (empty: built-ins only) and
    CONTRASTLAB_TRACE=1 to print every hook call.

    Examples:

      platform plugins

      CONTRASTLAB_TRACE=1 platform plugins --json
    """
    rows = [vars(info) for info in get_plugin_manager().packages()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="plugin packages")
    for col in ("package", "version", "module", "hooks"):
        table.add_column(col, overflow="fold")  # a long module name goes on over the next line, not cut with "…"
    for row in rows:
        cells = (row["package"], row["version"], row["module"], ", ".join(row["hooks"]))
        table.add_row(*(escape(str(c)) for c in cells))
    console.print(table)


@app.command("tensorboard")
@user_errors
def tensorboard_command(
    logdir: Annotated[Path, typer.Argument(help="Directory with runs (default: ./runs).")] = Path("runs"),
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 picks a free one).")] = 6006,
) -> None:
    """Start TensorBoard on 127.0.0.1 for LOGDIR and print its URL (Ctrl-C stops it).

    Examples:

      platform tensorboard runs/curl
    """
    from contrastlab.platform.errors import RunDirError

    if logdir.exists() and not logdir.is_dir():
        raise RunDirError(f"{logdir} is a file; give the directory that holds the runs (e.g. runs)")
    if not logdir.is_dir():
        raise RunDirError(f"log directory not found: {logdir}")
    from tensorboard import program

    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is out of range; valid range: 0-65535 (0 picks a free port)")
    board = program.TensorBoard()
    board.configure(argv=[None, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port)])
    try:
        url = board.launch()
    except program.TensorBoardServerException as exc:  # e.g. the port is taken by another TensorBoard
        raise ConfigError(f"cannot start TensorBoard on port {port}: {exc}; try --port 0 (a free port)") from None
    typer.echo(f"TensorBoard for {logdir} at {url}  (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        typer.echo("stopped")


commands_train.add_train_commands(app)


add_compare_commands(app)
add_tune_commands(app)
reflow_command_help(app)


def main() -> None:
    """Console-script entry point (``platform`` / ``contrastlab``)."""
    from contrastlab.cli.common import fail
    from contrastlab.platform.errors import ContrastlabError

    try:
        get_plugin_manager().register_commands(app)  # imports the installed plugin packages
        reflow_command_help(app)  # theirs too
    except KeyboardInterrupt:
        sys.stderr.write("interrupted while starting (nothing was run)\n")
        sys.exit(130)
    except ContrastlabError as exc:
        try:
            fail(str(exc))
        except typer.Exit as stop:
            sys.exit(stop.exit_code)
    try:
        app()
    except SystemExit as done:
        if done.code == 130:  # interrupted: a repeated Ctrl-C must not kill the exit itself (exit status 130 stays)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise


if __name__ == "__main__":
    main()
