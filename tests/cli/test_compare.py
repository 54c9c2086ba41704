"""``platform compare`` / ``tune`` backend options (from a bad-input sweep)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from contrastlab.cli.compare import check_backend
from contrastlab.platform.errors import ConfigError
from contrastlab.testing import run_cli


@pytest.mark.parametrize(("cpus", "gpus", "named"), [
    (math.nan, 0.0, "--cpus-per-run nan"), (math.inf, 0.0, "--cpus-per-run inf"),
    (1.0, math.nan, "--gpus-per-run nan"), (0.0, math.inf, "--gpus-per-run inf"),
])  # fmt: skip
def test_ray_resources_must_be_finite(cpus: float, gpus: float, named: str) -> None:
    """nan passed every comparison and reached Ray (compare --dry-run: exit 0; tune: a private Ray instance was
    started first); inf CPUs too."""
    with pytest.raises(ConfigError, match="must be finite") as info:
        check_backend("ray", None, None, None, cpus, gpus, None)
    assert named in str(info.value)


def one_error(out: str) -> str:
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in out, out
    return errors[0]


@pytest.mark.parametrize("option", [["--cpus-per-run", "2"], ["--gpus-per-run", "0.5"], ["--max-retries", "5"]])
def test_ray_options_need_the_ray_backend(tmp_path: Path, option: list[str]) -> None:
    """They were silently ignored on the local backend (``--address`` alone was refused)."""
    out_dir = tmp_path / "out"
    code, out = run_cli(["compare", "--plugin", "graph", "--preset", "smoke", "--loss", "infonce", "--dry-run",
                         "--out", str(out_dir), *option])  # fmt: skip
    assert code == 2 and f"{option[0]} needs --backend ray" in one_error(out)
    code, out = run_cli(["tune", "--plugin", "graph", "--loss", "dcl", "--preset", "smoke", "--trials", "1",
                         "--search", "loss.tau_plus=uniform(0,0.2)", "--out", str(out_dir), "--study", "x",
                         "--storage", "bad://", *option])  # fmt: skip
    assert code == 2 and f"{option[0]} needs --backend ray" in one_error(out)
    assert not out_dir.exists()


def test_ray_defaults_are_filled_in() -> None:
    assert check_backend("local", None, None, None, None, None, None) is None
    opts = check_backend("ray", None, None, None, None, None, None)
    assert opts == {"address": None, "cpus_per_run": 1.0, "gpus_per_run": 0.0, "max_retries": 2}


def test_a_run_to_resume_with_a_damaged_run_json_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """It was planned as 'to resume', then its `platform train --resume` failed at run time (exit 1, the grid
    reported one failed run); the cause was known before anything started."""
    from contrastlab.experiments.plan import make_plan

    out_dir = tmp_path / "out"
    (point,) = make_plan("graph", "infonce", None, None, None, "smoke", [], []).points
    run_dir = point.run_dir(out_dir)
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("seed: 1\n")
    (run_dir / "run.json").write_text("garbage")
    for extra in ([], ["--dry-run"]):
        code, out = run_cli(["compare", "--plugin", "graph", "--preset", "smoke", "--loss", "infonce",
                             "--out", str(out_dir), *extra])  # fmt: skip
        error = one_error(out)
        assert code == 2 and f"{run_dir / 'run.json'} is unreadable" in error and "move" in error, out
    assert sorted(p.name for p in out_dir.iterdir()) == ["runs"] and (run_dir / "run.json").read_text() == "garbage"


@pytest.mark.parametrize("command", ["compare", "tune"])
def test_a_run_size_the_private_ray_instance_refuses_writes_nothing(tmp_path: Path, monkeypatch, command) -> None:
    """Without --address, compare started its private Ray instance (and checked --gpus-per-run against it) only
    after printing its header and writing OUT/compare.json: the refused command left that folder behind (tune
    already checked first). The instance's refusal is stood in for here (no GPU-less Ray start in the test)."""
    pytest.importorskip("ray")
    from contrastlab.experiments import ray_cluster

    def refuse(address, cpus, gpus):
        raise ConfigError(f"--gpus-per-run {gpus:g}: the local Ray instance has no GPUs (resources: CPU 2)")

    monkeypatch.setattr(ray_cluster, "connect_checked", refuse)
    monkeypatch.setattr("contrastlab.experiments.ray_runner.connect_checked", refuse)
    out_dir = tmp_path / "out"
    args = ["--plugin", "graph", "--preset", "smoke", "--out", str(out_dir), "--backend", "ray", "--gpus-per-run", "1"]
    extra = (["--loss", "infonce"] if command == "compare" else
             ["--loss", "dcl", "--trials", "1", "--search", "loss.tau_plus=uniform(0,0.2)"])
    code, out = run_cli([command, *args, *extra])
    assert code == 2 and "the local Ray instance has no GPUs" in one_error(out)
    assert len(out.strip().splitlines()) == 1, out
    assert not out_dir.exists()


@pytest.mark.parametrize(("args", "message"), [
    (("slurm", None, None, None, None, None, None), "--backend slurm: choose local or ray"),
    (("local", "auto", None, None, None, None, None), "--address needs --backend ray"),
    (("ray", None, 2, None, None, None, None), "--jobs/--devices are for --backend local"),
    (("ray", None, None, "0", None, None, None), "--jobs/--devices are for --backend local"),
    (("ray", None, None, None, -1.0, 1.0, None), "--cpus-per-run -1 --gpus-per-run 1: must be ≥ 0"),
    (("ray", None, None, None, 1.0, -0.5, None), "--cpus-per-run 1 --gpus-per-run -0.5: must be ≥ 0"),
    (("ray", None, None, None, 0.0, None, None), "--cpus-per-run 0 --gpus-per-run 0: must be ≥ 0 and not both 0"),
    (("ray", None, None, None, None, 1.5, None), "--gpus-per-run 1.5: above 1 it must be a whole number"),
    (("ray", None, None, None, None, None, -1), "--max-retries -1: must be ≥ 0"),
])  # fmt: skip
def test_backend_options_are_refused_at_their_limits(args: tuple, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_backend(*args)
    assert message in str(info.value)


@pytest.mark.parametrize(("cpus", "gpus", "retries"), [(0.0, 0.25, 0), (0.5, 0.0, None), (None, 2.0, 3),
                                                       (None, 1.0, None)])
def test_backend_options_just_inside_their_limits_pass(cpus: float | None, gpus: float | None,
                                                       retries: int | None, monkeypatch) -> None:
    """No CPU with a quarter GPU, half a CPU, whole GPUs above 1, no retries: all allowed; a given ``--address``
    is checked against the cluster before anything runs."""
    from contrastlab.experiments import ray_cluster

    checked: list[tuple] = []
    monkeypatch.setattr(ray_cluster, "import_ray", lambda: None)
    monkeypatch.setattr(ray_cluster, "check_address", lambda address: None)  # no network in a test
    monkeypatch.setattr(ray_cluster, "connect_checked", lambda *a: checked.append(a))
    opts = check_backend("ray", "10.0.0.5:6379", None, None, cpus, gpus, retries)
    expected = (1.0 if cpus is None else cpus, 0.0 if gpus is None else gpus, 2 if retries is None else retries)
    assert opts == {"address": "10.0.0.5:6379", "cpus_per_run": expected[0], "gpus_per_run": expected[1],
                    "max_retries": expected[2]}
    assert checked == [("10.0.0.5:6379", expected[0], expected[1])]
    assert check_backend("ray", None, None, None, cpus, gpus, retries) == {**opts, "address": None}
    assert len(checked) == 1  # the private instance is started later, by compare itself


def test_a_bad_rows_key_names_the_sections_runs_have_and_good_keys_pass() -> None:
    """``--rows`` accepts any dotted key of any run's config; a refusal lists the sections the keys start with."""
    from types import SimpleNamespace

    from contrastlab.cli.compare import check_row_keys, row_keys

    configs = {"a": SimpleNamespace(model_dump=lambda: {"seed": 1, "loss": {"name": "dcl"}, "train": {"steps": 3}}),
               "b": SimpleNamespace(model_dump=lambda: {"seed": 2, "env": {"task": "run"}})}
    check_row_keys(["env.task", "train.steps", "seed"], configs)  # a key of one run is enough
    with pytest.raises(ConfigError) as info:
        check_row_keys(["train.stepz"], configs)
    assert str(info.value) == ("--rows train.stepz is not a config key of these runs; their keys start with env., "
                               "loss., train. (see platform config)")
    assert row_keys(" env.task, ,seed ") == ["env.task", "seed"] and row_keys(None) == [] and row_keys(",") == []


def test_print_results_echoes_the_main_table_and_the_paired_comparison_only(tmp_path: Path, capsys) -> None:
    """The answer to "does it help?" is shown, as written (brackets are text, long rows stay whole); other
    sections of results.md are not; every output is named."""
    from contrastlab.cli.compare import print_results

    row = "| dcl tau_plus=0.1 | 0.812 ± 0.004 [0.80, 0.82] | 0.795 ± 0.006 [0.78, 0.81] | [b]tie[/b] | 3 of 3 |"
    (tmp_path / "results.md").write_text(f"# Results\n\n{row}\n\n## Against the baseline (infonce)\n\n| dcl |\n\n"
                                         "## Failed runs\n\nnone\n")
    print_results(tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:7] == ["# Results", "", row, "", "## Against the baseline (infonce)", "", "| dcl |"], lines
    names = ("results.csv", "summary.csv", "results.md", "curves.png", "aggregate.png", "final.png")
    assert lines[7:13] == [f"{name:13s} {tmp_path / name}" for name in names]
    assert lines[13:] == ["TensorBoard (either command):", f"  platform tensorboard {tmp_path / 'tensorboard'}",
                          f"  tensorboard --logdir {tmp_path / 'tensorboard'}"]


def test_a_report_inside_any_run_or_any_plain_dir_is_refused(tmp_path: Path) -> None:
    """``--out`` inside one of several runs of a compare output, or inside one of several plain DIRs, would put
    the report among the runs; beside them it is fine."""
    from contrastlab.cli.compare import report_home

    for run in ("cmp/runs/r1", "cmp/runs/r2", "a/r3", "b/r4"):
        (tmp_path / run).mkdir(parents=True)
        (tmp_path / run / "run.json").write_text("{}")
    (tmp_path / "cmp" / "compare.json").write_text("{}")
    for dirs, out in (([tmp_path / "cmp"], tmp_path / "cmp" / "runs" / "r2" / "x"),
                      ([tmp_path / "a", tmp_path / "b"], tmp_path / "b" / "x")):
        with pytest.raises(ConfigError, match="is inside the runs being read"):
            report_home(dirs, out)
    assert report_home([tmp_path / "cmp"], tmp_path / "cmp" / "report") == tmp_path / "cmp" / "report"
    assert report_home([tmp_path / "a", tmp_path / "b"], tmp_path / "r") == tmp_path / "r"


def test_jobs_must_be_at_least_1_and_is_how_many_runs_go_at_a_time(tmp_path: Path) -> None:
    """--jobs 0 is refused in one line; --jobs N (default 1) is the "N at a time" of the dry run's header."""
    out = tmp_path / "o"
    base = ["compare", "--plugin", "recsys", "--loss", "infonce,dcl", "--preset", "smoke", "--out", str(out),
            "--dry-run"]
    code, text = run_cli([*base, "--jobs", "0"])
    assert code == 2 and "error: --jobs 0: must be ≥ 1" in text and "Traceback" not in text, text
    for jobs, at_a_time in (([], 1), (["--jobs", "1"], 1), (["--jobs", "3"], 3)):
        code, text = run_cli([*base, *jobs])
        assert code == 0 and f"; {at_a_time} at a time;" in " ".join(text.split()), text
    assert not out.exists()


def test_devices_take_one_run_per_gpu_unless_runs_per_gpu_says_more(tmp_path: Path, monkeypatch) -> None:
    """--devices 0,1 runs 2 at a time (--runs-per-gpu defaults to 1); --runs-per-gpu 3 makes it 6."""
    from contrastlab.experiments import grid as cmp

    parse = cmp.parse_devices
    monkeypatch.setattr(cmp, "parse_devices", lambda spec: parse(spec, available=2))  # two GPUs, here or not
    base = ["compare", "--plugin", "recsys", "--loss", "infonce,dcl", "--preset", "smoke", "--out",
            str(tmp_path / "o"), "--dry-run", "--devices", "0,1"]
    for extra, at_a_time in (([], 2), (["--runs-per-gpu", "3"], 6)):
        code, text = run_cli([*base, *extra])
        assert code == 0 and f"; {at_a_time} at a time;" in " ".join(text.split()), text


def test_a_local_run_device_this_machine_lacks_is_refused_up_front_but_not_for_ray(tmp_path: Path) -> None:
    """Local runs train on their config's device here: a CUDA device this machine lacks is one line before
    anything runs (not N failed runs). On Ray the runs train on the workers' devices: no local check."""
    base = ["compare", "--plugin", "recsys", "--loss", "infonce,dcl", "--preset", "smoke", "--out",
            str(tmp_path / "o"), "--dry-run", "--set", "device=cuda:99"]
    code, text = run_cli(base)
    assert code == 2 and "error: device 'cuda:99'" in text and "Traceback" not in text, text
    pytest.importorskip("ray")
    code, text = run_cli([*base, "--backend", "ray"])
    assert code == 0 and "on Ray" in text, text
