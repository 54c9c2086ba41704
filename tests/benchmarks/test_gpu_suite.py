"""``benchmarks/gpu_suite.sh`` checked on the CPU: its ``--dry-run`` runs every step at tiny sizes.

No timing is asserted (speed targets live in the benchmark scripts); the test pins that each step runs, that the
report collects what the steps wrote, and that the Markdown section is written between its markers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "reference" / "curl"


def _suite(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", "MUJOCO_GL": "egl"}
    return subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_suite.sh"), "--dry-run", "--out", str(out), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_dry_run_runs_every_step_and_writes_the_report(tmp_path: Path) -> None:
    steps = "tests,losses,curl,runs,report" if REFERENCE.is_dir() else "tests,losses,runs,report"
    out = tmp_path / "suite"
    proc = _suite("--steps", steps, "--frames", "200", "--seeds", "1", "--losses", "dcl", out=out)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads((out / "gpu_suite.json").read_text())
    assert data["dry_run"] is True and data["device"]["device"].startswith("cpu")
    assert data["tests"]["exit_code"] == 0 and data["tests"]["counts"]
    if REFERENCE.is_dir():
        ref = data["curl_reference"]
        assert ref["ours_updates_per_s"] > 0 and ref["reference_updates_per_s"] > 0
    (run,) = data["runs"]
    assert run["loss"] == "dcl" and run["env_frames"] >= 200 and 0.0 <= run["clamped_frac"] <= 1.0
    md = (out / "results.md").read_text()
    assert md.count("<!-- gpu-suite:begin -->") == 1 and md.count("<!-- gpu-suite:end -->") == 1
    assert "Dry run" in md and "| dcl | 1 |" in md
    # a second start skips the finished run instead of training it again
    again = _suite("--steps", "runs", "--frames", "200", "--seeds", "1", "--losses", "dcl", out=out)
    assert again.returncode == 0 and "finished earlier, skipped" in again.stdout


def test_bad_options_are_refused_in_one_line(tmp_path: Path) -> None:
    """Also a missing value and numbers that are not numbers: refused before any step runs, not minutes later
    when the step that reads them comes (a call of the device tool lost)."""
    for args, needle in ((["--steps", "tests,bogus"], "unknown step 'bogus'"), (["--frobnicate"], "unknown option"),
                         (["--frames"], "--frames needs a value"), (["--frames", "1e5"], "--frames takes positive"),
                         (["--pack-ks", "1 x"], "--pack-ks takes positive"), (["--pack-frames", "0"], "--pack-frames"),
                         (["--seeds", "1 a"], "--seeds takes whole numbers"), (["--losses", " "], "--losses needs")):
        proc = _suite(*args, out=tmp_path / "x")
        assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, args
        assert not (tmp_path / "x").exists()


def _failing_python(tmp_path: Path, fail_on: str) -> Path:
    """A PYTHON for the suite that fails, as a crashing step would, when its arguments contain ``fail_on``."""
    script = tmp_path / "python.sh"
    script.write_text(f'#!/usr/bin/env bash\nfor a in "$@"; do if [ "$a" = "{fail_on}" ]; then\n'
                      f'  echo "Traceback: boom ($a)" >&2; exit 1; fi; done\nexec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return script


def test_a_failed_step_does_not_stop_the_next_steps_or_the_report(tmp_path: Path) -> None:
    """A failing step (here the loss benchmark) is one line; the steps after it and the report still run (on the
    device, ``--steps losses,report`` must still bring the table back), and the suite exits with 1."""
    out = tmp_path / "suite"
    env_python = _failing_python(tmp_path, "benchmarks/losses.py")
    env = {**os.environ, "PYTHON": str(env_python), "OMP_NUM_THREADS": "1", "MUJOCO_GL": "egl"}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_suite.sh"), "--dry-run", "--out", str(out),
                           "--steps", "losses,report"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "step 'losses' failed (exit 1)" in proc.stderr and "failed steps: losses" in proc.stdout
    assert (out / "gpu_suite.json").is_file() and (out / "results.md").is_file()  # the report ran
    assert sorted(p.name for p in (out / "steps").iterdir()) == ["losses.txt", "report.txt"]
    status, seconds = (out / "steps" / "losses.txt").read_text().split()
    data = json.loads((out / "gpu_suite.json").read_text())
    assert status == "1" and data["steps"] == [{"step": "losses", "exit_code": 1, "seconds": int(seconds)}]
    md = (out / "results.md").read_text()
    assert "- steps (wall time of the latest run of each): `losses` " in md and "(**failed**, exit 1)" in md


def test_a_failed_run_shows_the_end_of_its_log(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    proc = _suite("--steps", "runs", "--frames", "40", "--seeds", "1", "--losses", "nosuchloss", out=out)
    assert proc.returncode == 1
    assert "run cartpole-nosuchloss-s1 failed; the end of" in proc.stderr
    assert "unknown loss 'nosuchloss'" in proc.stderr  # the reason, in the reply itself
    assert "step 'runs' failed" in proc.stderr


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="needs the reference CURL agent (../shared/reference/curl)")
def test_a_failed_curl_measurement_does_not_skip_the_other_flag_sets(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    env = {**os.environ, "PYTHON": str(_failing_python(tmp_path, "agent.channels_last=false")), "OMP_NUM_THREADS": "1",
           "MUJOCO_GL": "egl", "CURL_REFERENCE_DIR": str(REFERENCE)}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_suite.sh"), "--dry-run", "--out", str(out),
                           "--steps", "curl"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "curl: 1 of 2 measurements failed" in proc.stderr
    assert not (out / "curl_reference.json").exists()  # the baseline failed ...
    assert json.loads((out / "curl_reference_channels_last.json").read_text())["ours_updates_per_s"] > 0  # ... not this


@pytest.mark.slow
def test_pack_step_run_again_in_the_same_folder_measures_again(tmp_path: Path) -> None:
    """A repeated call (e.g. after a stop on a warm machine) starts fresh runs: it must not meet the last call's
    completed runs and fail, nor let a failed line replace a good one in the report."""
    out = tmp_path / "suite"
    for _ in range(2):
        proc = _suite("--steps", "pack,report", "--pack-ks", "1", "--pack-frames", "24", out=out)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = (out / "pack.log").read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("K=1 runs:") and line.endswith(" 0 failed") for line in lines)
    (pack,) = json.loads((out / "gpu_suite.json").read_text())["pack"]
    assert pack["k"] == 1 and pack["failed"] == 0


def test_the_suites_cuda_tests_compare_every_speed_flag_on_the_gpu() -> None:
    """The ``tests`` step runs ``pytest -m cuda``: each speed flag's same-update check must be among them, or the
    GPU machine checks only ``compile`` against the plain update (docs/gpu.md, call 1)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", "cuda", "-p", "no:cacheprovider",
           "tests/plugins/curl/test_curl_fast.py"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MUJOCO_GL": "egl"})
    ids = [line for line in proc.stdout.splitlines() if "test_speed_flags_give_the_same_update" in line]
    for flag in ("channels_last", "bf16", "compile"):
        assert any(flag in node for node in ids), (flag, ids)
