"""Plugin manager: built-ins registered like plugins, entry points, allow-list, tracing, name clashes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from toy_dist import install_fake_toy_dist

import contrastlab as cl
from contrastlab.platform.errors import UnknownNameError
from contrastlab.platform.plugins import BUILTIN_MODULES, PluginManager
from contrastlab.testing import fresh_plugin_manager

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = Path(sys.executable).with_name("platform")


def test_builtins_are_registered_as_plugins_of_package_contrastlab() -> None:
    pm = PluginManager(entry_points=False)
    names = {info.name for info in pm.packages()}
    assert set(BUILTIN_MODULES) <= names
    assert all(info.package == "contrastlab" for info in pm.packages())
    assert {"infonce", "dcl", "pucl"} <= set(pm.registries["loss"].names())
    assert pm.registries["loss"].get("dcl").package == "contrastlab"


def test_plugins_lists_each_module_with_its_package_version_and_hooks() -> None:
    """What `platform plugins` shows: a module's own name, and for an object of hooks the module of its class."""

    class Hooks:
        @cl.hookimpl
        def register_losses(self, register) -> None:
            """Registers nothing."""

    pm = PluginManager(entry_points=False)
    pm.register_module(Hooks(), package="not-installed-pkg", name="hooks")
    losses = pm.info["contrastlab.losses"]
    assert (losses.module, losses.package, losses.hooks) == ("contrastlab.losses", "contrastlab", ["register_losses"])
    hooks = pm.info["hooks"]
    assert (hooks.module, hooks.version, hooks.hooks) == (__name__, "unknown", ["register_losses"])


def test_fixed_registry_names_exist() -> None:
    assert set(cl.list_losses()) >= {
        "infonce",
        "dcl",
        "hcl",
        "bcl",
        "pucl",
        "punce",
        "debiased_pos",
        "supcon",
        "unbiased",
    }
    assert set(cl.list_samplers()) >= {"two_view", "multi_view", "query_key", "queue"}
    assert {"curl", "simclr", "pu"} <= set(cl.list_plugins())


def test_third_party_module_registers_loss_and_plugin(toy_pm: PluginManager) -> None:
    assert toy_pm.registries["loss"].get("toy_margin").package == "contrastlab-toy"
    assert toy_pm.registries["plugin"].get("toy_clusters").package == "contrastlab-toy"
    assert "toy_margin" in cl.list_losses()


def test_duplicate_name_keeps_the_first_and_warns_naming_both_packages(capsys, monkeypatch) -> None:
    import contrastlab.platform.plugins as plugins

    monkeypatch.setattr(plugins, "_warned", set())

    class Clash:
        @cl.hookimpl
        def register_losses(self, register) -> None:
            class Dup:
                name = "dcl"

            register(Dup)

    with fresh_plugin_manager(Clash(), package="clashing-pkg") as pm:
        assert pm.registries["loss"].get("dcl").package == "contrastlab"
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("warning:")
    assert "'contrastlab'" in err and "clashing-pkg" in err and "CONTRASTLAB_PLUGINS" in err


def test_unknown_names_list_valid_ones_and_suggest() -> None:
    with pytest.raises(UnknownNameError) as info:
        cl.make_loss("dlc")
    msg = str(info.value)
    assert "infonce" in msg and "Did you mean 'dcl'" in msg
    with pytest.raises(UnknownNameError, match="tau_plus"):
        cl.make_loss("dcl", tau_pls=0.1)


def _env(site: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"CONTRASTLAB_PLUGINS", "CONTRASTLAB_TRACE"}}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT / "examples" / "plugin_template" / "src")])
    env.update(extra)
    return env


def _platform(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PLATFORM), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_entry_point_plugin_trains_through_installed_script(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_fake_toy_dist(site)
    env = _env(site)
    listed = _platform(["plugins"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "contrastlab-toy" in listed.stdout and "register_losses" in listed.stdout
    result = _platform(
        [
            "train",
            "--plugin",
            "toy_clusters",
            "--loss",
            "toy_margin",
            "--logdir",
            str(tmp_path / "runs"),
            "--set",
            "train.steps=30",
        ],
        env,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    runs = list((tmp_path / "runs" / "toy_clusters" / "toy_margin").iterdir())
    assert len(runs) == 1 and (runs[0] / "summary.json").is_file()


def test_allow_list_and_trace(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_fake_toy_dist(site)
    blocked = _platform(["list", "plugins", "--json"], _env(site, CONTRASTLAB_PLUGINS=""), tmp_path)
    assert blocked.returncode == 0 and "toy_clusters" not in blocked.stdout
    allowed = _platform(
        ["list", "plugins", "--json"],
        _env(site, CONTRASTLAB_PLUGINS="contrastlab-toy", CONTRASTLAB_TRACE="1"),
        tmp_path,
    )
    assert allowed.returncode == 0 and "toy_clusters" in allowed.stdout
    assert "[contrastlab trace] call register_losses" in allowed.stderr
    assert "contrastlab_toy" in allowed.stderr or "toy (contrastlab-toy)" in allowed.stderr
    other = _platform(["list", "plugins", "--json"], _env(site, CONTRASTLAB_PLUGINS="something-else"), tmp_path)
    assert "toy_clusters" not in other.stdout
    assert "CONTRASTLAB_PLUGINS names 'something-else'" in other.stderr


def _app_with_a_train_command(monkeypatch) -> typer.Typer:
    """A Typer app with one command, `train` (callback ``builtin_train``), and the warn-once memory cleared."""
    import contrastlab.platform.plugins as plugins

    monkeypatch.setattr(plugins, "_warned", set())
    app = typer.Typer()

    @app.command("train")
    def builtin_train() -> None:
        """The built-in."""

    return app


def _add_hijack_and_ring_info(app: typer.Typer) -> None:
    """What the third-party hooks below add: a `train` (callback ``hijack``) and a new `ring_info` command."""

    @app.command("train")
    def hijack() -> None:
        """Not the built-in."""

    @app.command()
    def ring_info() -> None:
        """A new command."""


def test_a_command_named_like_an_existing_one_is_left_out_with_a_warning(capsys, monkeypatch) -> None:
    """A third-party `register_commands` hook that added a command named `train` replaced the built-in
    `platform train` silently (`platform train --plugin ...` then said "No such option: --plugin"). As for
    losses and plugins, the first registration keeps the name and one warning names both packages."""
    app = _app_with_a_train_command(monkeypatch)

    class Commands:
        @cl.hookimpl
        def register_commands(self, app) -> None:
            _add_hijack_and_ring_info(app)

    with fresh_plugin_manager(Commands(), package="clashing-pkg") as pm:
        pm.register_commands(app)
    names = [(c.name, c.callback.__name__) for c in app.registered_commands]
    assert names == [("train", "builtin_train"), (None, "ring_info")], names
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("warning: command 'train'"), err
    assert "'contrastlab'" in err and "clashing-pkg" in err and "CONTRASTLAB_PLUGINS" in err, err


def test_a_register_commands_hook_that_raises_leaves_none_of_its_commands(capsys, monkeypatch) -> None:
    """A hook that added a command (here one named `train`) and then raised was "skipped" with a warning, yet the
    commands it had added stayed: its `train` replaced the built-in, past the name-clash check."""
    app = _app_with_a_train_command(monkeypatch)

    class HalfCommands:
        @cl.hookimpl
        def register_commands(self, app) -> None:
            _add_hijack_and_ring_info(app)
            raise RuntimeError("boom")

    with fresh_plugin_manager(HalfCommands(), package="half-pkg") as pm:
        pm.register_commands(app)
        assert "half-pkg" in pm.skipped
    names = [(c.name, c.callback.__name__) for c in app.registered_commands]
    assert names == [("train", "builtin_train")], names
    err = capsys.readouterr().err.strip()
    assert "plugin package 'half-pkg' skipped" in err and "boom" in err, err


def test_a_command_group_named_like_an_existing_command_is_left_out_with_a_warning(capsys, monkeypatch) -> None:
    """`app.add_typer(sub, name="train")` in a register_commands hook replaced the built-in `platform train` with a
    group, past the check that keeps a command's first owner; a group with a new name stays."""
    app = _app_with_a_train_command(monkeypatch)

    class Groups:
        @cl.hookimpl
        def register_commands(self, app) -> None:
            for name in ("train", "ring"):
                sub = typer.Typer()

                @sub.command("info")
                def info() -> None:
                    """A sub-command."""

                app.add_typer(sub, name=name)

    with fresh_plugin_manager(Groups(), package="group-pkg") as pm:
        pm.register_commands(app)
    assert [c.callback.__name__ for c in app.registered_commands] == ["builtin_train"]
    assert [g.name for g in app.registered_groups] == ["ring"]
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("warning: command 'train'") and "group-pkg" in err, err
