"""``platform tune``'s own option checks: each refusal is one line naming the options, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrastlab.testing import run_cli

pytest.importorskip("optuna")

BASE = ["tune", "--plugin", "recsys", "--loss", "dcl", "--preset", "smoke", "--trials", "1"]


@pytest.mark.parametrize(("args", "message"), [
    (["--search", "loss.tau_plus=uniform(0.01,0.3)", "--pruner", "mean"], "--pruner mean: choose median or none"),
    (["--search", "loss.tau_plus=uniform(0.01,0.3)", "--search", "loss.tau_plus=uniform(0.1,0.2)",
      "--search", "train.epochs=int(1,2)", "--search", "train.epochs=int(2,3)"],
     "--search: loss.tau_plus, train.epochs are given twice"),
    (["--search", "loss.tau_plus=uniform(0.01,0.3)", "--set", "loss.tau_plus=0.1"],
     "--set and --search both give loss.tau_plus"),
    (["--search", "loss.tau_plus=uniform(0.01,0.3)", "--set", "device=cpu", "--device", "cpu"],
     "--set device conflicts with --device"),
    (["--search", "loss.tau_plus=uniform(0.01,0.3)", "--set", "device=cpu", "--backend", "ray",
      "--gpus-per-run", "0.5"], "--set device conflicts with --gpus-per-run"),
    (["--search", "loss.tau_plus=uniform(0.01,0.3)", "--trials", "0", "--parallel", "0"], "--trials 0: must be ≥ 1"),
])  # fmt: skip
def test_tune_option_errors_are_one_line(tmp_path: Path, monkeypatch, args: list[str], message: str) -> None:
    from contrastlab.experiments import ray_cluster

    monkeypatch.setattr(ray_cluster, "import_ray", lambda: None)  # Ray is an optional extra
    out = tmp_path / "out"
    code, text = run_cli([*BASE, *args, "--out", str(out)])
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and message in errors[0] and "Traceback" not in text, text
    assert not out.exists()



@pytest.mark.parametrize("args", [["--device", "cpu"], ["--set", "device=cpu"], ["--seeds-per-trial", "1"],
                                  ["--set", "device=cpu", "--backend", "ray"],
                                  ["--set", "device=cpu", "--backend", "ray", "--gpus-per-run", "0"]])
def test_tune_options_that_are_fine_pass_its_checks(tmp_path: Path, monkeypatch, args: list[str]) -> None:
    """``--device`` on the local backend, or ``--set device=...`` alone or on Ray without GPUs per run, is no
    conflict: the command gets past its option checks (stopped here at the next step, the study's storage)."""
    from contrastlab.experiments import ray_cluster
    from contrastlab.experiments import tune as tn
    from contrastlab.platform.errors import ConfigError

    monkeypatch.setattr(ray_cluster, "import_ray", lambda: None)  # Ray is an optional extra
    def stop_here(url: str) -> None:
        raise ConfigError("stopped after the option checks")

    monkeypatch.setattr(tn, "check_storage", stop_here)
    code, text = run_cli([*BASE, "--search", "loss.tau_plus=uniform(0.01,0.3)", *args, "--out", str(tmp_path / "o")])
    assert code == 2 and text.strip() == "error: stopped after the option checks", text
