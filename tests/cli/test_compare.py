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
