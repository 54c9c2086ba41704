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
    for args, needle in ((["--steps", "tests,bogus"], "unknown step 'bogus'"), (["--frobnicate"], "unknown option")):
        proc = _suite(*args, out=tmp_path / "x")
        assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


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
