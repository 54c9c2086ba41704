"""A broken or clashing third-party plugin package costs one warning line, never the whole CLI.

The packages are real ``*.dist-info`` folders with ``entry_points.txt`` on ``sys.path``, read by
``importlib.metadata`` exactly as after ``pip install``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import contrastlab as cl
import contrastlab.platform.plugins as plugins
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.plugins import PluginManager, use_plugin_manager
from contrastlab.testing import fresh_plugin_manager, run_cli

ROOT = Path(__file__).resolve().parents[2]

LOSS_MODULE = """
import contrastlab as cl
import torch


class Loss(torch.nn.Module):
    name = "{loss}"
    description = "test loss of {dist}"
    hyperparameters = ()

    def forward(self, batch):
        return batch.pos_logits.sum() * 0


@cl.hookimpl
def register_losses(register):
    register(Loss)
"""


def fake_dist(site: Path, dist: str, entry: str, module: str, source: str) -> None:
    """An installed distribution ``dist`` whose ``contrastlab`` entry point ``entry`` is ``module``."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[contrastlab]\n{entry} = {module}\n")
    (site / f"{module}.py").write_text(source)


OWN = ("contrastlab-broken", "contrastlab-first", "contrastlab-second", "contrastlab-aaa", "contrastlab-bbb",
       "contrastlab-typo")
"""The packages these tests make; other plugin packages installed where the tests run are left out of the checks."""


def advised(line: str) -> tuple[str, list[str]]:
    """A warning's text up to ``CONTRASTLAB_PLUGINS=``, and the packages of the value it advises that are ours."""
    text, _, value = line.partition("CONTRASTLAB_PLUGINS=")
    return text, [name for name in value.split(",") if name in OWN]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three packages: one whose module does not import, two that register the same loss name."""
    site = tmp_path / "site"
    site.mkdir()
    fake_dist(site, "contrastlab-broken", "broken", "cl_broken", "import no_such_module_xyz\n")
    fake_dist(site, "contrastlab-first", "first", "cl_first", LOSS_MODULE.format(loss="twin", dist="first"))
    fake_dist(site, "contrastlab-second", "second", "cl_second", LOSS_MODULE.format(loss="twin", dist="second"))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("CONTRASTLAB_PLUGINS", raising=False)
    monkeypatch.setattr(plugins, "_warned", set())
    for name in ("cl_broken", "cl_first", "cl_second"):
        sys.modules.pop(name, None)
    return site


def ours(err: str) -> list[str]:
    """Warning lines about the packages these tests make."""
    return [line for line in err.splitlines() if any(f"'{name}'" in line for name in OWN)]


def test_broken_and_duplicate_packages_warn_once_and_the_rest_works(site: Path, capsys) -> None:
    pm = PluginManager()
    losses = pm.registries["loss"]
    assert "dcl" in losses and losses.get("twin").package == "contrastlab-first"
    assert "contrastlab-broken" in pm.skipped
    _ = PluginManager().registries  # a second manager in the same process does not repeat the warnings
    lines = ours(capsys.readouterr().err)
    broken = [line for line in lines if "contrastlab-broken" in line and "skipped" in line]
    assert len(broken) == 1, lines
    assert "ModuleNotFoundError" in broken[0] and "CONTRASTLAB_PLUGINS=" in broken[0]
    assert advised(broken[0])[1] == ["contrastlab-first", "contrastlab-second"]  # leaves only the broken one out
    twin = [line for line in lines if "'twin'" in line]
    assert len(twin) == 1, lines
    assert "contrastlab-first" in twin[0] and "contrastlab-second" in twin[0] and "CONTRASTLAB_PLUGINS" in twin[0]
    # two third-party packages: the advice is how to get the second one's, not how to drop it (it is dropped)
    assert advised(twin[0]) == ("warning: loss 'twin' is registered by package 'contrastlab-first' and again by "
                                "package 'contrastlab-second'; keeping the one from 'contrastlab-first'. To use the "
                                "one from 'contrastlab-second', leave 'contrastlab-first' out: uninstall it or set ",
                                ["contrastlab-second"])
    assert all(line.startswith("warning: ") for line in lines)


def test_an_entry_point_without_a_distribution_is_named_by_its_top_level_module() -> None:
    import importlib.metadata as md

    assert plugins._dist_of(md.EntryPoint(name="x", value="pkg_mod.sub:hooks", group="contrastlab")) == "pkg_mod"


def test_an_entry_point_name_taken_by_another_package_keeps_the_first(tmp_path: Path, monkeypatch, capsys) -> None:
    """Two packages whose entry points share a name: the first package's (by name) loads, the other one is left
    out with a warning naming both, and how to leave the other one out."""
    site = tmp_path / "site"
    site.mkdir()
    fake_dist(site, "contrastlab-aaa", "hooks", "cl_aaa", LOSS_MODULE.format(loss="from_aaa", dist="aaa"))
    fake_dist(site, "contrastlab-bbb", "hooks", "cl_bbb", LOSS_MODULE.format(loss="from_bbb", dist="bbb"))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("CONTRASTLAB_PLUGINS", raising=False)
    monkeypatch.setattr(plugins, "_warned", set())
    pm = PluginManager()
    losses = pm.registries["loss"]
    assert "from_aaa" in losses and "from_bbb" not in losses and pm.info["hooks"].package == "contrastlab-aaa"
    (line,) = ours(capsys.readouterr().err)
    assert advised(line) == ("warning: entry point 'hooks' is provided by package 'contrastlab-aaa' and again by "
                             "package 'contrastlab-bbb'; keeping the one from 'contrastlab-aaa'. To leave "
                             "'contrastlab-bbb' out, uninstall it or set ", ["contrastlab-aaa"])


def test_a_package_with_a_misspelt_hook_is_left_out_whole(tmp_path: Path, monkeypatch, capsys) -> None:
    """Its module imports and registers, then pluggy finds a hook no spec knows: its other hooks (a valid
    ``register_losses``) must go too, or its loss would be registered by a package reported as skipped."""
    site = tmp_path / "site"
    site.mkdir()
    misspelt = LOSS_MODULE.format(loss="half_typo", dist="typo") + (
        "\n\n@cl.hookimpl\ndef register_lossess(register):\n    pass\n")
    fake_dist(site, "contrastlab-typo", "typo", "cl_typo", misspelt)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("CONTRASTLAB_PLUGINS", raising=False)
    monkeypatch.setattr(plugins, "_warned", set())
    pm = PluginManager()
    assert "half_typo" not in pm.registries["loss"] and "dcl" in pm.registries["loss"]
    assert "contrastlab-typo" in pm.skipped and "typo" not in pm.info and not pm.pm.has_plugin("typo")
    (line,) = ours(capsys.readouterr().err)
    assert "register_lossess" in line and line.startswith("warning: plugin package 'contrastlab-typo' skipped")


def test_allow_list_workaround_silences_the_broken_package(site: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CONTRASTLAB_PLUGINS", "contrastlab-first,contrastlab-second")
    pm = PluginManager()
    assert "twin" in pm.registries["loss"] and not pm.skipped
    assert "contrastlab-broken" not in capsys.readouterr().err


def test_cli_keeps_working_with_a_broken_package(site: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CONTRASTLAB_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT / "src")])
    result = subprocess.run(
        [sys.executable, "-m", "contrastlab.cli", "list", "losses", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert '"twin"' in result.stdout and '"dcl"' in result.stdout
    warnings = ours(result.stderr)
    assert len(warnings) == 2, result.stderr  # the broken package, the duplicate name
    assert "Traceback" not in result.stderr


def test_hook_that_raises_drops_the_whole_package(capsys, monkeypatch) -> None:
    import contrastlab as cl

    monkeypatch.setattr(plugins, "_warned", set())

    class HalfBroken:
        @cl.hookimpl
        def register_losses(self, register) -> None:
            class Fine:
                name = "half_fine"

            register(Fine)

        @cl.hookimpl
        def register_plugins(self, register) -> None:
            raise RuntimeError("plugin table corrupt")

    with fresh_plugin_manager(HalfBroken(), package="half-broken") as pm:
        assert "half_fine" not in pm.registries["loss"] and "dcl" in pm.registries["loss"]
        code, out = run_cli(["list", "plugins", "--json"])
    assert code == 0 and "curl" in out
    err = capsys.readouterr().err
    assert "half-broken" in err and "RuntimeError: plugin table corrupt" in err


def test_two_builtins_with_one_name_is_still_a_bug() -> None:
    import contrastlab as cl

    class Dup:
        name = "dcl"

    class Module:
        @cl.hookimpl
        def register_losses(self, register) -> None:
            register(Dup)

    pm = PluginManager(entry_points=False)
    pm.register_module(Module(), package="contrastlab", name="dup-builtin")
    with use_plugin_manager(pm), pytest.raises(ConfigError, match="registered twice"):
        _ = pm.registries


class _SamplerWithoutAccepts:
    """A third-party sampler whose ``accepts`` is misspelt ``accept``."""

    name = "one_way"
    accept = frozenset({"two_views"})

    def __init__(self, embed_dim: int = 0) -> None:
        self.embed_dim = embed_dim


class _BadSamplerModule:
    import contrastlab as _cl

    @_cl.hookimpl
    def register_samplers(self, register) -> None:
        register(_SamplerWithoutAccepts)


class _NamelessLossModule:
    import contrastlab as _cl

    @_cl.hookimpl
    def register_losses(self, register) -> None:
        register(object)


class _TaskWithIntConfig(cl.TaskPlugin):
    """A third-party task whose ``config_model`` is not a ``TaskConfig`` (it made `platform train` crash)."""

    name = "bad_task"
    config_model = int


class _TaskWithoutDefaultPreset(cl.TaskPlugin):
    """A third-party task whose presets lack its default preset ``smoke``."""

    name = "bad_task"
    presets = {"big": {}}


class _TaskWithAPresetThatIsNoDict(cl.TaskPlugin):
    """A third-party task one of whose presets is a list, not a dict of overrides."""

    name = "bad_task"
    presets = {"smoke": {}, "big": ["train.steps=5"]}


class _NotATaskPlugin:
    """A plugin class that does not subclass ``TaskPlugin``."""

    name = "bad_task"


def _plugin_module(task: type) -> object:
    class Module:
        @cl.hookimpl
        def register_plugins(self, register) -> None:
            register(task)

    return Module()


@pytest.mark.parametrize(
    ("bad", "problem"),
    [(_BadSamplerModule(), "sampler 'one_way' from package 'contrastlab-toy' declares no inputs"),
     (_NamelessLossModule(), "has no name"),
     (_plugin_module(_TaskWithIntConfig), "plugin 'bad_task' from package 'contrastlab-toy': config_model int is "
      "not a subclass of contrastlab.TaskConfig"),
     (_plugin_module(_TaskWithoutDefaultPreset), "plugin 'bad_task' from package 'contrastlab-toy': its default "
      "preset 'smoke' is not in its presets (big)"),
     (_plugin_module(_TaskWithAPresetThatIsNoDict), "plugin 'bad_task' from package 'contrastlab-toy': presets must "
      "be a dict of preset name -> dict of overrides"),
     (_plugin_module(_NotATaskPlugin), "plugin 'bad_task' from package 'contrastlab-toy': "
      "_NotATaskPlugin is not a subclass of contrastlab.TaskPlugin")],
    ids=["sampler-without-accepts", "loss-without-name", "plugin-config-not-taskconfig",
         "plugin-default-preset-missing", "plugin-preset-not-a-dict", "plugin-not-taskplugin"],
)
def test_invalid_registration_skips_the_package_not_every_command(bad, problem, capsys, monkeypatch) -> None:
    import contrastlab_toy.plugin

    monkeypatch.setattr(plugins, "_warned", set())
    with fresh_plugin_manager(contrastlab_toy.plugin, bad, package="contrastlab-toy") as pm:
        losses = pm.registries["loss"]
        assert "dcl" in losses and "toy_margin" not in losses  # the whole package is out, not half of it
        assert "toy_clusters" not in pm.registries["plugin"] and "contrastlab-toy" in pm.skipped
        code, out = run_cli(["list", "losses"])
        assert code == 0 and "dcl" in out
        code, out = run_cli(["config", "--plugin", "recsys", "--preset", "smoke"])
        assert code == 0, out
        code, out = run_cli(["train", "--plugin", "toy_clusters", "--loss", "dcl"])  # its plugin: gone, and why
        assert code == 2 and "unknown plugin 'toy_clusters'" in out and "Traceback" not in out, out
        assert "Skipped plugin packages (see the warning above): 'contrastlab-toy'" in out, out
    lines = [line for line in capsys.readouterr().err.splitlines() if "contrastlab-toy" in line]
    assert len(lines) == 1, lines
    assert lines[0].startswith("warning: plugin package 'contrastlab-toy' skipped:")
    assert problem in lines[0] and "CONTRASTLAB_PLUGINS=" in lines[0]


def test_invalid_builtin_registration_is_still_a_bug() -> None:
    import contrastlab as cl

    class Module:
        @cl.hookimpl
        def register_samplers(self, register) -> None:
            register(_SamplerWithoutAccepts)

    pm = PluginManager(entry_points=False)
    pm.register_module(Module(), package="contrastlab", name="bad-builtin")
    with use_plugin_manager(pm), pytest.raises(ConfigError, match="declares no inputs"):
        _ = pm.registries
