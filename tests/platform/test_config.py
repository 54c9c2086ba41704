"""Config resolution order, --set parsing, component switching and the documented YAML."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from contrastlab.platform.config import deep_merge, parse_set, resolve_config
from contrastlab.platform.errors import ConfigError, UnknownNameError
from contrastlab.platform.plugins import PluginManager, registry
from contrastlab.platform.registry import HParam, Registry


def toy():
    return registry("plugin").get("toy_clusters").factory()


def test_parse_set_reads_yaml_values() -> None:
    assert parse_set("a.b=0.5") == (["a", "b"], 0.5)
    assert parse_set("flag=true") == (["flag"], True)
    assert parse_set("xs=[1, 2]") == (["xs"], [1, 2])
    assert parse_set("name=dcl") == (["name"], "dcl")
    with pytest.raises(ConfigError):
        parse_set("a..b=1")


def test_deep_merge_is_recursive_and_pure() -> None:
    base = {"a": {"b": 1, "c": 2}, "d": 3}
    out = deep_merge(base, {"a": {"b": 9}})
    assert out == {"a": {"b": 9, "c": 2}, "d": 3} and base["a"]["b"] == 1


def test_resolution_order_preset_file_flags_sets(toy_pm: PluginManager, tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(yaml.safe_dump({"train": {"steps": 5, "lr": 0.5}, "seed": 9}))
    cfg = resolve_config(toy(), preset="smoke", config_file=file, sets=["train.steps=6"], seed=4)
    assert cfg.train.steps == 6 and cfg.train.lr == 0.5 and cfg.seed == 4


def test_switching_loss_drops_foreign_hparams(toy_pm: PluginManager, tmp_path: Path) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(yaml.safe_dump({"loss": {"name": "hcl", "beta": 0.7}}))
    cfg = resolve_config(toy(), config_file=file, loss="dcl")
    assert cfg.loss.name == "dcl" and "beta" not in cfg.loss.hparams()
    cfg = resolve_config(toy(), config_file=file)
    assert cfg.loss.hparams()["beta"] == 0.7 and "tau_plus" in cfg.loss.hparams()
    cfg = resolve_config(toy(), sets=["loss.name=pucl", "loss.c=0.2"])
    assert cfg.loss.name == "pucl" and cfg.loss.hparams()["c"] == 0.2


@pytest.mark.parametrize(("flag", "value", "item"), [
    ("loss", "infonce", "loss.name=dcl"), ("loss", "infonce", "loss={name: dcl}"), ("seed", 3, "seed=5"),
    ("device", "cpu", "device=cuda"), ("sampler", "two_view", "sampler.name=multi_view"),
])
def test_a_set_of_a_key_with_its_own_flag_given_too_is_refused(toy_pm: PluginManager, flag, value, item) -> None:
    """`--loss infonce --set loss.name=dcl` silently trained dcl; now neither wins silently."""
    with pytest.raises(ConfigError, match=rf"conflicts with --{flag} {value}; give one of them"):
        resolve_config(toy(), sets=[item], **{flag: value})
    cfg = resolve_config(toy(), loss="dcl", seed=3, sets=["loss.tau_plus=0.2"])  # the flag's own settings are fine
    assert cfg.loss.hparams()["tau_plus"] == 0.2
    assert resolve_config(toy(), loss="dcl", seed=3, sets=["loss.name=dcl", "seed=3"]).seed == 3  # the same value


def test_prepare_config_sees_explicit_keys(toy_pm: PluginManager) -> None:
    seen = {}
    task = toy()

    def prepare(config, explicit):
        seen["keys"] = explicit
        return config

    task.prepare_config = prepare
    resolve_config(task, sets=["loss.tau_plus=0.2"], loss="dcl")
    assert "loss.tau_plus" in seen["keys"] and "train.steps" in seen["keys"]  # from the smoke preset


def test_unknown_preset_lists_presets(toy_pm: PluginManager) -> None:
    with pytest.raises(UnknownNameError, match="smoke"):
        resolve_config(toy(), preset="big")


def test_registry_hparam_validation_and_coercion() -> None:
    class Thing:
        name = "thing"
        hyperparameters = (
            HParam("x", 0.5, "a fraction", range="[0, 1]", check=lambda v: 0 <= v <= 1),
            HParam("n", 3, "a count", range=">= 1", check=lambda v: v >= 1),
            HParam("flag", False, "a switch"),
        )

        def __init__(self, x: float, n: int, flag: bool) -> None:
            self.values = (x, n, flag)

    reg = Registry("thing")
    reg.add(Thing, package="pkg")
    assert reg.create("thing", x="0.25", n="4", flag="true").values == (0.25, 4, True)
    with pytest.raises(ConfigError, match=r"x=2.0 is out of range; valid range: \[0, 1\]"):
        reg.create("thing", x=2.0)
    with pytest.raises(ConfigError, match="not a valid int"):
        reg.create("thing", n=2.5)
    with pytest.raises(UnknownNameError, match="valid: x, n, flag"):
        reg.create("thing", y=1)


def test_resolution_never_mutates_presets(toy_pm: PluginManager) -> None:
    task = toy()
    before = repr(task.presets)
    resolve_config(task, preset="smoke", sets=["train.steps=3", "train.lr=0.5"])
    assert repr(type(task).presets) == before


def test_component_hparam_without_name_targets_the_default_component(toy_pm: PluginManager) -> None:
    cfg = resolve_config(toy(), sets=["sampler.temperature=0.2"])
    assert cfg.sampler.name == "two_view" and cfg.sampler.hparams()["temperature"] == 0.2


@pytest.mark.parametrize(("item", "reason"), [
    ("train.lr=inf", "must be a finite number"), ("train.lr=.inf", "must be a finite number"),
    ("data.noise=.nan", "must be a finite number"), ("data.noise=-.inf", "must be a finite number"),
    ("train.lr=true", "expected a number, not true/false"), ("train.steps=false", "expected a number, not true/false"),
])
def test_a_number_field_refuses_inf_nan_and_booleans(toy_pm: PluginManager, item: str, reason: str) -> None:
    """`--set train.lr=inf` passed `gt=0` and `--set train.lr=true` was read as 1.0: both trained silently."""
    key = item.split("=")[0]
    with pytest.raises(ConfigError, match=rf"^invalid config value {key}=.*: {reason}$"):
        resolve_config(toy(), sets=[item])


def test_a_config_file_and_a_runs_config_are_checked_for_numbers_too(toy_pm: PluginManager, tmp_path: Path) -> None:
    from contrastlab.platform.config import config_from_dict, config_to_dict

    file = tmp_path / "c.yaml"
    file.write_text("train:\n  lr: .inf\n")
    with pytest.raises(ConfigError, match=r"train\.lr=inf: must be a finite number"):
        resolve_config(toy(), config_file=file)
    data = config_to_dict(resolve_config(toy()))
    data["data"]["noise"] = float("nan")
    with pytest.raises(ConfigError, match=r"data\.noise=nan: must be a finite number"):
        config_from_dict(toy(), data)
    assert resolve_config(toy(), sets=["train.lr=0.5", "train.steps=3", "data.noise=0"]).train.lr == 0.5


def test_a_mapping_hyperparameter_counts_as_set_so_it_is_refused_not_replaced(toy_pm: PluginManager) -> None:
    """simclr fills loss.tau_plus = 1/C when it is not set, and `--set loss.tau_plus={a: 1}` counted as not set
    (its explicit key is loss.tau_plus.a): the bad value was replaced silently instead of refused."""
    from contrastlab.platform.task import ComponentSpec

    task = toy()

    def prepare(config, explicit):
        if "loss.tau_plus" not in explicit:
            config.loss = ComponentSpec(name=config.loss.name, **{**config.loss.hparams(), "tau_plus": 0.25})
        return config

    task.prepare_config = prepare
    with pytest.raises(ConfigError, match=r"loss 'dcl': tau_plus=\{'a': 1\} is not a valid float"):
        resolve_config(task, loss="dcl", sets=["loss.tau_plus={a: 1}"])
    assert resolve_config(task, loss="dcl").loss.hparams()["tau_plus"] == 0.25


def test_a_hyperparameter_set_before_the_component_name_is_kept(toy_pm: PluginManager) -> None:
    """`--set loss.tau_plus=0.2 --set loss.name=dcl` trained dcl with its default tau_plus: the 0.2 was dropped."""
    cfg = resolve_config(toy(), sets=["loss.tau_plus=0.2", "loss.name=dcl"])
    assert cfg.loss.name == "dcl" and cfg.loss.hparams()["tau_plus"] == 0.2
    with pytest.raises(UnknownNameError, match="loss 'infonce' has no hyperparameter 'tau_plus'"):
        resolve_config(toy(), loss=None, sets=["loss.name=dcl", "loss.tau_plus=0.2", "loss.name=infonce"])
    cfg = resolve_config(toy(), sets=["loss.tau_plus=0.2", "loss={name: hcl}"])  # a whole section replaces it all
    assert cfg.loss.name == "hcl" and cfg.loss.hparams()["tau_plus"] != 0.2


@pytest.mark.parametrize("device", ["cuda:x", "cuda:-1", "cuda:", "gpu", "cuda:0:1"])
def test_a_malformed_device_is_refused_whether_or_not_cuda_is_present(
    toy_pm: PluginManager, monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """On a CUDA machine `--device cuda:x` reached int() and torch: a ValueError/RuntimeError traceback."""
    import torch

    from contrastlab.platform.errors import DeviceError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(DeviceError, match=rf"^unknown device '{re.escape(device)}'; valid: auto, cpu, cuda, cuda:K$"):
        resolve_config(toy(), device=device)
    assert resolve_config(toy(), device=" CUDA:1 ").device == " CUDA:1 "  # resolve_device reads it as cuda:1


def test_an_empty_preset_name_is_refused_not_read_as_the_default(toy_pm: PluginManager) -> None:
    """`platform train --preset ""` trained the default preset."""
    with pytest.raises(UnknownNameError, match=r"unknown toy_clusters preset ''; valid: "):
        resolve_config(toy(), preset="")


def test_number_checks_reach_constrained_items_and_optional_lists() -> None:
    """A list of ``Annotated[float, Field(gt=0)]`` (graph's eval.c_grid) took inf and true (read as 1.0)."""
    from typing import Annotated

    from pydantic import BaseModel, Field

    from contrastlab.platform.config import check_numbers

    class Section(BaseModel):
        grid: list[Annotated[float, Field(gt=0)]] = [1.0]
        sizes: list[Annotated[int, Field(ge=1)]] | None = None

    for data, needle in (({"grid": [1.0, float("inf")]}, "grid=inf: must be a finite number"),
                         ({"grid": [True]}, "grid=True: expected a number"),
                         ({"sizes": [2, False]}, "sizes=False: expected a number")):
        with pytest.raises(ConfigError, match=needle):
            check_numbers(data, Section)
    check_numbers({"grid": [0.5, 2], "sizes": [3]}, Section)


@pytest.mark.parametrize(
    ("preset", "message"),
    [({"train": {"stepz": 40}}, "unknown config key 'train.stepz'"),
     ({"train": {"steps": "forty"}}, "invalid config value train.steps='forty'")],
    ids=["unknown-key", "bad-value"],
)
def test_a_bad_key_in_a_plugins_preset_is_blamed_on_the_preset(toy_pm: PluginManager, monkeypatch, preset, message):
    """A plugin author's typo in a preset read as if the user had typed it ("unknown config key 'train.stepz'",
    with nothing of the sort on the command line): the error now names the plugin and the preset."""
    task = toy()
    monkeypatch.setattr(type(task), "presets", {**type(task).presets, "smoke": preset})
    with pytest.raises(ConfigError) as info:
        resolve_config(task, preset="smoke", sets=["train.lr=0.5"])
    text = str(info.value)
    assert text.startswith("plugin 'toy_clusters', preset 'smoke' (the plugin's own settings, not this command): ")
    assert message in text and "\n" not in text, text


def test_a_hyperparameter_of_another_loss_names_the_losses_that_have_it(toy_pm: PluginManager) -> None:
    """`--set loss.tau_plus=0.05` without `--loss dcl` said "loss 'infonce' has no hyperparameter 'tau_plus'; valid:
    (none)." and left the user to find which loss has it: the error now lists them and how to pick one."""
    curl = registry("plugin").get("curl").factory()
    with pytest.raises(UnknownNameError) as info:
        resolve_config(curl, preset="smoke", sets=["loss.tau_plus=0.05"])
    text = str(info.value)
    assert "loss 'infonce' has no hyperparameter 'tau_plus'" in text
    assert "Losses with tau_plus: bcl, dcl, debiased_pos, hcl (choose one with --loss)." in text, text
    with pytest.raises(UnknownNameError) as info:  # a name no component has: no such list
        resolve_config(curl, preset="smoke", sets=["loss.nope=1"])
    assert "Losses with" not in str(info.value)


def test_a_hyperparameter_of_the_configured_sampler_given_to_the_loss_names_its_section(toy_pm: PluginManager) -> None:
    """New-user trial: `--set loss.temperature=0.1` said only "loss 'dcl' has no hyperparameter 'temperature';
    valid: tau_plus." The temperature is the sampler's (tau_plus is not a temperature); the error says so."""
    simclr = registry("plugin").get("simclr").factory()
    with pytest.raises(UnknownNameError) as info:
        resolve_config(simclr, preset="smoke", loss="dcl", sets=["loss.temperature=0.1"])
    text = str(info.value)
    assert text.startswith("loss 'dcl' has no hyperparameter 'temperature'; valid: tau_plus.")
    assert text.endswith(" The sampler 'two_view' has temperature: --set sampler.temperature=VALUE."), text
    with pytest.raises(UnknownNameError) as info:  # and the other way round
        resolve_config(simclr, preset="smoke", loss="dcl", sets=["sampler.tau_plus=0.1"])
    assert str(info.value).endswith(" The loss 'dcl' has tau_plus: --set loss.tau_plus=VALUE."), str(info.value)
    with pytest.raises(UnknownNameError) as info:  # a name no configured component has: no hint
        resolve_config(simclr, preset="smoke", loss="dcl", sets=["loss.nope=1"])
    assert "--set sampler." not in str(info.value) and "has nope" not in str(info.value)


def test_a_bad_key_in_a_config_file_names_the_file(toy_pm: PluginManager, tmp_path: Path) -> None:
    """`platform train --plugin curl --config best.yaml` with a recsys best.yaml said "unknown config key
    'train.epochs'" with no word of the file it came from."""
    path = tmp_path / "best.yaml"
    path.write_text("train:\n  stepz: 3\n")
    with pytest.raises(ConfigError, match=r"^--config .*best\.yaml: unknown config key 'train\.stepz'"):
        resolve_config(toy(), config_file=path)
    path.write_text("train:\n  steps: many\n")
    with pytest.raises(ConfigError, match=r"^--config .*best\.yaml: invalid config value train\.steps='many'"):
        resolve_config(toy(), config_file=path)
    path.write_text("train:\n  steps: 3\n")
    assert resolve_config(toy(), config_file=path).train.steps == 3


def test_a_sampler_or_encoder_hyperparameter_hint_names_a_flag_every_command_has(toy_pm: PluginManager) -> None:
    """The hint said "choose one with --sampler" / "--encoder", options that `platform compare` and `platform tune`
    do not have ("No such option: --sampler"); `--set sampler.name=NAME` works in train, config, compare and tune."""
    curl = registry("plugin").get("curl").factory()
    with pytest.raises(UnknownNameError) as info:
        resolve_config(curl, preset="smoke", sets=["sampler.size=64"])
    text = str(info.value)
    assert "Samplers with size: queue (choose one with --set sampler.name=NAME)." in text, text
    with pytest.raises(UnknownNameError) as info:
        resolve_config(toy(), sets=["encoder.num_filters=8"])
    assert "Encoders with num_filters: pixel_conv (choose one with --set encoder.name=NAME)." in str(info.value)


def test_a_section_key_given_without_its_section_names_where_it_goes(toy_pm: PluginManager) -> None:
    """`--set tau_plus=0.1` and `--set steps=5` listed the top-level keys only; the user had to guess the section."""
    with pytest.raises(ConfigError, match=r"unknown config key 'tau_plus'; .*Did you mean 'loss\.tau_plus'\?$"):
        resolve_config(toy(), loss="dcl", sets=["tau_plus=0.1"])
    with pytest.raises(ConfigError, match=r"unknown config key 'steps'; .*Did you mean 'train\.steps'\?$"):
        resolve_config(toy(), sets=["steps=5"])
    with pytest.raises(ConfigError, match=r"unknown config key 'sed'; .*Did you mean 'seed'\?$"):  # a plain typo
        resolve_config(toy(), sets=["sed=5"])


def test_error_lines_name_the_section_and_keep_a_validators_own_words() -> None:
    """An unknown key inside a section lists that section's keys; a field validator's message is shown without
    pydantic's "Value error, " prefix; a whole-section check names the section (not ``key={...}``)."""
    from contrastlab.platform.plugins import get_task_plugin

    cases = [
        ("graph", "sed=5", "unknown config key 'sed'; valid keys: augment, "),
        ("graph", "train.epochz=3", "unknown config key 'train.epochz'; valid keys in 'train': batch_size, epochs, "
                                    "log_every, lr, max_steps, weight_decay. Did you mean 'epochs'?"),
        ("pu", "data.dataset=banana", "invalid config value data.dataset='banana': unknown dataset 'banana'; valid: "),
        ("recsys", "data.synthetic.users=200000", "invalid config section data.synthetic: users × items = 200000 × "),
    ]
    for plugin, item, message in cases:
        with pytest.raises(ConfigError) as info:
            resolve_config(get_task_plugin(plugin), sets=[item])
        assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize(("plugin", "sampler"), [("graph", "multi_view"), ("recsys", "two_view")])
def test_a_sampler_chosen_by_flag_takes_its_own_defaults_not_the_plugins_default_samplers(plugin: str,
                                                                                          sampler: str) -> None:
    """graph's default sampler is two_view at temperature 0.2 and recsys's query_key (cosine, 0.2): ``--sampler
    NAME`` must get NAME's registered defaults, not those values (nor a ``similarity`` two_view does not have)."""
    from contrastlab.platform.plugins import get_task_plugin

    spec = resolve_config(get_task_plugin(plugin), sampler=sampler).sampler
    defaults = {h.name: h.default for h in registry("sampler").get(sampler).hyperparameters}
    assert (spec.name, spec.hparams()) == (sampler, defaults)


def test_a_config_file_naming_another_sampler_drops_the_presets_sampler_values(tmp_path: Path) -> None:
    """graph's paper preset sets ``sampler: {name: two_view, temperature: 0.2}``; a ``--config`` file with
    ``sampler: {name: multi_view}``, ``--sampler multi_view`` and ``--set sampler.name=multi_view`` all mean
    multi_view at its own default temperature."""
    from contrastlab.platform.plugins import get_task_plugin

    file = tmp_path / "c.yaml"
    file.write_text(yaml.safe_dump({"sampler": {"name": "multi_view"}}))
    graph = get_task_plugin("graph")
    for how in ({"config_file": file}, {"sampler": "multi_view"}, {"sets": ["sampler.name=multi_view"]}):
        spec = resolve_config(graph, preset="paper", **how).sampler
        assert (spec.name, spec.hparams()) == ("multi_view", {"temperature": 0.5}), how  # MultiViewSampler's default


def test_set_edge_cases_give_one_line_errors_or_the_documented_values() -> None:
    """``--set train=5`` and a scalar for a list field are one-line errors (not a crash in the number check);
    ``--loss dcl --set loss.tau_plus=0.3`` is no conflict; a whole-section ``--set loss={...}`` forgets the
    hyperparameters set before it, so a later ``loss.name`` does not bring them back."""
    from contrastlab.platform.plugins import get_task_plugin

    graph = get_task_plugin("graph")
    for item, message in (("train=5", "invalid config value train=5: "),
                          ("eval.c_grid=5", "invalid config value eval.c_grid=5: ")):
        with pytest.raises(ConfigError) as info:
            resolve_config(graph, sets=[item])
        assert str(info.value).startswith(message), str(info.value)
    assert resolve_config(graph, loss="dcl", sets=["loss.tau_plus=0.3"]).loss.hparams()["tau_plus"] == 0.3
    dcl_default = next(h.default for h in registry("loss").get("dcl").hyperparameters if h.name == "tau_plus")
    cfg = resolve_config(graph, sets=["loss.tau_plus=0.3", "loss={name: infonce}", "loss.name=dcl"])
    assert cfg.loss.hparams()["tau_plus"] == dcl_default != 0.3


def test_malformed_yaml_names_the_line_and_column(tmp_path: Path) -> None:
    from contrastlab.platform.config import load_yaml_file

    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\nb: [1,\n")
    with pytest.raises(ConfigError) as info:
        load_yaml_file(bad)
    with pytest.raises(yaml.YAMLError) as raw:
        yaml.safe_load(bad.read_text())
    assert str(info.value) == f"malformed YAML in {bad} (line 3, column 1): {raw.value.problem}", str(info.value)


def test_a_config_file_value_a_later_set_completes_is_not_refused_on_its_own(tmp_path: Path) -> None:
    """A whole-section check (recsys: users × items within the generator's limit) is judged on the full config:
    a ``--config`` file raising ``users`` with ``--set`` lowering ``items`` is valid, and the file is not blamed."""
    from contrastlab.platform.plugins import get_task_plugin

    file = tmp_path / "c.yaml"
    file.write_text(yaml.safe_dump({"data": {"synthetic": {"users": 200_000}}}))
    cfg = resolve_config(get_task_plugin("recsys"), config_file=file, sets=["data.synthetic.items=100"])
    assert (cfg.data.synthetic.users, cfg.data.synthetic.items) == (200_000, 100)
    with pytest.raises(ConfigError) as info:  # without the --set the full config is refused, naming the section
        resolve_config(get_task_plugin("recsys"), config_file=file)
    assert str(info.value).startswith("invalid config section data.synthetic: users × items = 200000 × 500")
