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
