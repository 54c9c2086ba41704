"""Grid parsing/expansion, validation before anything runs, run naming and run state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_compare_support as toy

from contrastlab.experiments import grid as cmp
from contrastlab.experiments import runner
from contrastlab.platform.errors import ConfigError, DeviceError, IncompatibleError, UnknownNameError
from contrastlab.platform.plugins import PluginManager, use_plugin_manager

HPARAMS = {"infonce": set(), "dcl": {"tau_plus"}, "hcl": {"tau_plus", "beta"}}


@pytest.fixture
def toy_pm():
    pm = PluginManager(builtins=False, entry_points=False)
    pm.register_module(toy, package="toy-test", name="toy_test_plugin")
    with use_plugin_manager(pm):
        yield pm


def test_parse_grid_and_set():
    axis = cmp.parse_grid("loss.tau_plus=0.01, 0.05,0.1")
    assert axis == cmp.GridAxis("loss.tau_plus", ("0.01", "0.05", "0.1"))
    assert cmp.parse_set("train.steps=20") == ("train.steps", "20")


@pytest.mark.parametrize(
    "spec, words",
    [
        ("loss.tau_plus", "expected key=v1,v2"),
        ("=0.1,0.2", "bad key"),
        ("loss.tau_plus=", "empty value"),
        ("loss.tau_plus=0.1,,0.2", "empty value"),
        ("loss..tau=0.1", "bad key"),
        ("loss.tau plus=0.1", "bad key"),
        ("loss.tau_plus=0.1,0.1", "duplicated"),
        ("loss.tau_plus=0.1,0.10,1e-1", r"duplicated value\(s\) 0.1, 0.10, 1e-1"),  # one value, three spellings
        ("train.batch_size=64,064", "duplicated"),
        ("seed=1,2", "--seeds"),
        ("loss.name=dcl,hcl", "--loss"),
    ],
)
def test_malformed_grid_is_a_clear_error(spec, words):
    with pytest.raises(ConfigError, match=words) as info:
        cmp.parse_grid(spec)
    assert "\n" not in str(info.value) and spec in str(info.value)


@pytest.mark.parametrize("spec", ["train.steps", "train.steps=", "=3"])
def test_malformed_set(spec):
    with pytest.raises(ConfigError, match="--set"):
        cmp.parse_set(spec)


def test_seeds_losses_devices():
    assert cmp.parse_seeds(3, None) == [1, 2, 3]
    assert cmp.parse_seeds(None, "7,2") == [7, 2]
    assert cmp.parse_seeds(None, None) == [1]
    for bad in [(0, None), (None, "1,x"), (None, "1,1"), (2, "1")]:
        with pytest.raises(ConfigError):
            cmp.parse_seeds(*bad)
    assert cmp.parse_losses("infonce, dcl") == ["infonce", "dcl"]
    for bad in ["", "dcl,", "dcl,dcl"]:
        with pytest.raises(ConfigError):
            cmp.parse_losses(bad)
    assert cmp.parse_devices("0,1", available=2) == ["cuda:0", "cuda:1"]
    with pytest.raises(DeviceError, match="2 requested, 1 visible"):
        cmp.parse_devices("0,1", available=1)
    for bad in ["0,0", "a", "-1"]:
        with pytest.raises(ConfigError):
            cmp.parse_devices(bad, available=4)


def test_runs_per_gpu_slots():
    assert cmp.device_slots(["cuda:0"], 3) == ["cuda:0"] * 3
    assert cmp.device_slots(["cuda:0", "cuda:1"], 2) == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]
    assert cmp.device_slots(["cuda:1"]) == ["cuda:1"]
    with pytest.raises(ConfigError, match="--runs-per-gpu 0"):
        cmp.device_slots(["cuda:0"], 0)


def test_devices_on_this_machine_without_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceError, match="no CUDA device"):
        cmp.parse_devices("0")


def test_expand_table3_shape():
    """infonce once per seed, dcl once per tau_plus and seed (DCL Table 3: CURL column + DCL at 3 τ+)."""
    axes = [cmp.parse_grid("loss.tau_plus=0.01,0.05,0.1")]
    points = cmp.expand_grid(
        "curl", ["infonce", "dcl"], [1, 2, 3], preset="smoke", axes=axes, hparams_of=HPARAMS.__getitem__
    )
    assert len(points) == 3 + 3 * 3
    infonce = [p for p in points if p.loss == "infonce"]
    assert [p.seed for p in infonce] == [1, 2, 3] and all(p.overrides == [] for p in infonce)
    dcl = [p for p in points if p.loss == "dcl"]
    assert [p.overrides for p in dcl[::3]] == [["loss.tau_plus=0.01"], ["loss.tau_plus=0.05"], ["loss.tau_plus=0.1"]]
    assert sorted({p.label for p in points}) == [
        "dcl tau_plus=0.01",
        "dcl tau_plus=0.05",
        "dcl tau_plus=0.1",
        "infonce",
    ]
    names = [p.run_dir(Path("out")) for p in points]
    assert len(set(names)) == len(names)
    assert dcl[0].run_name.startswith("tau_plus=0.01-") and dcl[0].run_name.endswith("-s1")
    assert len({p.config_hash for p in dcl}) == 3  # seeds share their configuration's hash
    again = cmp.expand_grid(
        "curl", ["infonce", "dcl"], [1, 2, 3], preset="smoke", axes=axes, hparams_of=HPARAMS.__getitem__
    )
    assert [p.run_name for p in again] == [p.run_name for p in points]  # deterministic → resumable


def test_expand_two_axes_and_fixed_sets():
    axes = [cmp.parse_grid("loss.beta=0.5,1.0"), cmp.parse_grid("train.batch_size=64,128")]
    sets = [cmp.parse_set("loss.tau_plus=0.1"), cmp.parse_set("train.steps=5")]
    points = cmp.expand_grid(
        "simclr", ["infonce", "dcl", "hcl"], [1], sets=sets, axes=axes, hparams_of=HPARAMS.__getitem__
    )
    by_loss = {loss: [p for p in points if p.loss == loss] for loss in HPARAMS}
    assert len(by_loss["infonce"]) == 2 and len(by_loss["dcl"]) == 2 and len(by_loss["hcl"]) == 4
    assert by_loss["infonce"][0].overrides == ["train.steps=5", "train.batch_size=64"]
    assert by_loss["dcl"][1].overrides == ["loss.tau_plus=0.1", "train.steps=5", "train.batch_size=128"]
    assert by_loss["hcl"][3].overrides[-2:] == ["loss.beta=1.0", "train.batch_size=128"]


def test_expand_errors():
    with pytest.raises(UnknownNameError, match=r"unknown key 'loss\.tau_plsu'.*valid loss keys: loss\.tau_plus"):
        cmp.expand_grid(
            "x", ["infonce", "dcl"], [1], axes=[cmp.parse_grid("loss.tau_plsu=0.1")], hparams_of=HPARAMS.__getitem__
        )
    with pytest.raises(UnknownNameError, match="loss infonce has no hyperparameter 'tau_plus'"):
        cmp.expand_grid("x", ["infonce"], [1], sets=[("loss.tau_plus", "0.1")], hparams_of=HPARAMS.__getitem__)
    with pytest.raises(UnknownNameError, match="none of the losses infonce, dcl has hyperparameter 'beta'"):
        cmp.expand_grid("x", ["infonce", "dcl"], [1], sets=[("loss.beta", "1")], hparams_of=HPARAMS.__getitem__)
    with pytest.raises(ConfigError, match="more than once"):
        cmp.expand_grid(
            "x",
            ["dcl"],
            [1],
            sets=[("loss.tau_plus", "0.1")],
            axes=[cmp.parse_grid("loss.tau_plus=0.2,0.3")],
            hparams_of=HPARAMS.__getitem__,
        )
    with pytest.raises(ConfigError, match="empty"):
        cmp.expand_grid("x", [], [1], hparams_of=HPARAMS.__getitem__)


def test_validate_points_fails_fast(toy_pm):
    ok = cmp.expand_grid(
        "toy", ["toy_plain", "toy_debiased"], [1, 2], preset="smoke", axes=[cmp.parse_grid("loss.tau_plus=0.05,0.1")]
    )
    configs = cmp.validate_points(ok)
    assert len(configs) == 3 and len(ok) == 6
    tau = sorted(c.loss.hparams()["tau_plus"] for c in configs.values() if c.loss.name == "toy_debiased")
    assert tau == [0.05, 0.1]
    with pytest.raises(ConfigError, match=r"train\.nope"):
        cmp.validate_points(cmp.expand_grid("toy", ["toy_plain"], [1], axes=[cmp.parse_grid("train.nope=1,2")]))
    with pytest.raises(ConfigError, match="tau_plus"):
        cmp.validate_points(cmp.expand_grid("toy", ["toy_debiased"], [1], axes=[cmp.parse_grid("loss.tau_plus=2")]))
    with pytest.raises(IncompatibleError, match="toy_supervised"):
        cmp.validate_points(cmp.expand_grid("toy", ["toy_plain", "toy_supervised"], [1]))
    with pytest.raises(UnknownNameError, match="preset"):
        cmp.validate_points(cmp.expand_grid("toy", ["toy_plain"], [1], preset="nope"))


def test_run_state_and_train_command(tmp_path):
    point = cmp.GridPoint("toy", "toy_debiased", 2, "smoke", ("train.steps=3",), (("loss.tau_plus", "0.1"),))
    run_dir = point.run_dir(tmp_path)
    assert runner.run_state(run_dir) == "fresh"
    cmd = runner.train_command(point, tmp_path, "cuda:1", ["platform"])
    assert cmd == [
        "platform",
        "train",
        "--plugin",
        "toy",
        "--loss",
        "toy_debiased",
        "--seed",
        "2",
        "--preset",
        "smoke",
        "--set",
        "train.steps=3",
        "--set",
        "loss.tau_plus=0.1",
        "--logdir",
        str(tmp_path / "runs"),
        "--run-name",
        point.run_name,
        "--device",
        "cuda:1",
    ]
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("seed: 2\n")
    (run_dir / "run.json").write_text(json.dumps({"status": "interrupted"}))
    assert runner.run_state(run_dir) == "resume"
    assert runner.train_command(point, tmp_path, None, ["platform"]) == ["platform", "train", "--resume", str(run_dir)]
    (run_dir / "run.json").write_text(json.dumps({"status": "completed"}))
    assert runner.run_state(run_dir) == "resume"  # no summary.json yet: not finished
    (run_dir / "summary.json").write_text("{}")
    assert runner.run_state(run_dir) == "completed"


def test_a_configuration_that_trains_no_loss_runs_once_per_seed_not_once_per_loss():
    """pu's end-to-end baseline under --loss infonce,dcl,hcl is one run per seed (it was pooled 3 times, n inflated)."""
    from types import SimpleNamespace

    points = cmp.expand_grid("pu", ["infonce", "dcl", "hcl"], [1, 2], preset="smoke", hparams_of=HPARAMS.get,
                             axes=[cmp.parse_grid("method=probe,e2e"), cmp.parse_grid("loss.tau_plus=0.1,0.2")])
    configs = {p.config_hash: SimpleNamespace(method=dict(p.grid)["method"]) for p in points}

    class Plugin:
        def uses_loss(self, config) -> bool:
            return config.method != "e2e"

    kept = cmp.drop_loss_free_repeats(points, configs, Plugin())
    e2e = [p for p in kept if dict(p.grid)["method"] == "e2e"]
    assert [(p.loss, p.seed) for p in e2e] == [("dcl", 1), ("dcl", 2)]  # one per seed: the loss sorting first
    assert set(cmp.drop_loss_free_repeats(points[::-1], configs, Plugin())) == set(kept)  # whatever the order
    # seed 1 ran under hcl in an earlier command (another --loss order): its folder is resumed, not trained again
    again = cmp.drop_loss_free_repeats(points, configs, Plugin(), started=lambda p: (p.loss, p.seed) == ("hcl", 1))
    assert [(p.loss, p.seed) for p in again if dict(p.grid)["method"] == "e2e"] == [("hcl", 1), ("dcl", 2)]
    assert [p for p in kept if dict(p.grid)["method"] == "probe"] == [
        p for p in points if dict(p.grid)["method"] == "probe"]  # runs that train their loss are all kept
    assert cmp.drop_loss_free_repeats(points, configs, SimpleNamespace(uses_loss=lambda c: True)) == points


def test_a_set_device_with_a_runner_given_device_is_refused_up_front():
    """compare --devices (or Ray --gpus-per-run, tune --device) passes --device to every run, whose train would then
    refuse --set device=…: every run failed after the plan was printed."""
    with pytest.raises(ConfigError, match="--set device conflicts with --devices"):
        cmp.refuse_device_set(["train.steps", "device"], "--devices")
    cmp.refuse_device_set(["device"], None)
    cmp.refuse_device_set(["train.steps"], "--devices")


def test_default_out_ignores_the_order_of_losses_sets_and_grid_values(tmp_path, monkeypatch) -> None:
    """``--loss dcl,infonce`` resumes ``--loss infonce,dcl`` (the folder name hashed the order as typed, so
    reordering retrained every run); a folder an earlier version named that way is still found."""
    from contrastlab.experiments.grid import GridAxis
    from contrastlab.experiments.plan import _compare_dir, default_out

    monkeypatch.chdir(tmp_path)
    a = GridAxis("loss.tau_plus", ("0.1", "0.05"))
    b = GridAxis("train.batch_size", ("64", "32"))
    sets = [("train.epochs", "1"), ("eval.every_epochs", "1")]
    first = default_out("pu", "smoke", ["infonce", "dcl"], sets, [a, b])
    again = default_out(
        "pu", "smoke", ["dcl", "infonce"], sets[::-1],
        [GridAxis("train.batch_size", ("32", "64")), GridAxis("loss.tau_plus", ("0.05", "0.1"))],
    )  # fmt: skip
    assert first == again
    assert default_out("pu", "smoke", ["dcl"], sets, [a, b]) != first  # a different grid: another folder
    legacy = _compare_dir("pu", ["pu", "smoke", ["infonce", "dcl"], sorted(sets), [[a.key, list(a.values)]]])
    assert legacy != default_out("pu", "smoke", ["infonce", "dcl"], sets, [a])
    legacy.mkdir(parents=True)
    assert default_out("pu", "smoke", ["infonce", "dcl"], sets, [a]) == legacy  # an earlier version's folder


def test_a_loss_key_no_chosen_loss_has_names_the_losses_that_have_it(tmp_path):
    """`compare --loss infonce --grid loss.tau_plus=...` said only "valid loss keys: (none)"; as `platform train`
    does, it now names the registered losses with that hyperparameter."""
    from typer.testing import CliRunner

    from contrastlab.cli import app

    args = ["compare", "--plugin", "recsys", "--preset", "smoke", "--loss", "infonce", "--grid",
            "loss.tau_plus=0.05,0.1", "--out", str(tmp_path / "out"), "--dry-run"]  # fmt: skip
    result = CliRunner().invoke(app, args, terminal_width=400)
    assert result.exit_code == 2 and not (tmp_path / "out").exists(), result.output
    message = ("unknown key 'loss.tau_plus': loss infonce has no hyperparameter 'tau_plus'; valid loss keys: (none); "
               "losses with tau_plus: bcl, dcl, debiased_pos, hcl (choose one with --loss)")
    assert message in result.output, result.output


def test_a_grid_over_the_run_limit_is_refused_before_it_is_expanded():
    """``--seeds 1000000`` expanded (and validated) a million points for over 40 s before anything was said."""
    from contrastlab.experiments.grid import MAX_RUNS, GridAxis, expand_grid

    hp = {"infonce": set(), "dcl": {"tau_plus"}}.__getitem__
    axes = [GridAxis("loss.tau_plus", ("0.1", "0.2"))]
    seeds = list(range(1, MAX_RUNS // 3 + 2))  # infonce: n runs, dcl: 2n runs, 3n > MAX_RUNS
    with pytest.raises(ConfigError, match=r"the grid has 100,002 runs .* more than the 100,000"):
        expand_grid("graph", ["infonce", "dcl"], seeds, axes=axes, hparams_of=hp)
    assert len(expand_grid("graph", ["infonce", "dcl"], seeds[:1000], axes=axes, hparams_of=hp)) == 3000
