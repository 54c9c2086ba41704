"""The four device calls of docs/gpu.md §2, rehearsed on the CPU in the suite's *GPU* mode (no ``--dry-run``).

``--dry-run`` takes other branches of ``gpu_suite.sh`` (CPU sizes, a collect-only test step, one flag set), so the
commands the lent GPU machine runs would otherwise first run there. Here a stand-in ``PYTHON`` reports a CUDA
device and runs each command the suite gives it on the CPU, at tiny sizes: ``--device cuda`` becomes ``cpu``,
batch 512 becomes 16, training budgets 48 frames, ``agent.compile`` is switched off (minutes of compilation on a
CPU) and the ``cuda`` tests are collected only. Every command line is recorded before that rewrite, so the test
checks what the GPU machine will be asked to run, and that the four calls' outputs add up in the report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "reference" / "curl"

FAKE_CUDA = '''"""A CUDA device as far as the suite's checks go (the commands themselves run on the CPU)."""
import torch

torch.cuda.is_available = lambda: True
torch.cuda.get_device_name = lambda *args, **kwargs: "FAKE GPU (a CPU)"
torch.cuda.synchronize = lambda *args, **kwargs: None
'''

STAND_IN = '''#!/usr/bin/env bash
# PYTHON for gpu_suite.sh: record the command, then run it on the CPU at tiny sizes (tests/benchmarks/test_gpu_calls.py)
echo "$*" >> "{calls}"
export PYTHONPATH="{fake}${{PYTHONPATH:+:$PYTHONPATH}}"
args=(); train=0; resume=0; prev=""
for a in "$@"; do
  case "$a" in train) train=1 ;; --resume) resume=1 ;; esac
  case "$prev:$a" in
    --device:cuda) a=cpu ;;
    --batch:*) a=16 ;; --updates:*) a=1 ;; --rounds:*) a=1 ;; --fill:*) a=40 ;;
    *:agent.compile=true) a=agent.compile=false ;;
    *:train.env_frames=*) a=train.env_frames=48 ;; *:train.eval_every_frames=*) a=train.eval_every_frames=48 ;;
  esac
  args+=("$a"); prev="$a"
done
case " $* " in
  *" -m pytest "*) args+=(--collect-only) ;; *" benchmarks/losses.py "*) args+=(--quick --threads 1) ;;
esac
if [ "$train" = 1 ] && [ "$resume" = 0 ]; then
  args+=(--set agent.batch_size=8 --set agent.init_steps=2 --set env.render_size=48 --set agent.crop=40
         --set agent.hidden_dim=32 --set agent.buffer_size=1000 --set train.eval_episodes=1
         --set env.low_cost_render=true)
fi
exec "{python}" "${{args[@]}}"
'''

CALLS = (["--steps", "tests,curl"], ["--steps", "runs", "--frames", "100000", "--seeds", "1", "--losses", "infonce"],
         ["--steps", "pack", "--pack-ks", "1 4", "--pack-frames", "20000"], ["--steps", "losses,report"])
"""docs/gpu.md §2, calls 1-4."""


@pytest.mark.slow
@pytest.mark.skipif(not REFERENCE.is_dir(), reason="needs the reference CURL agent (../shared/reference/curl)")
def test_the_four_device_calls_in_gpu_mode_run_the_gpu_commands_and_add_up_in_the_report(tmp_path: Path) -> None:
    fake = tmp_path / "fake_cuda"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(FAKE_CUDA)
    calls = tmp_path / "calls.txt"
    python = tmp_path / "python.sh"
    python.write_text(STAND_IN.format(calls=calls, fake=fake, python=sys.executable))
    python.chmod(0o755)
    bundle = tmp_path / "bundle"  # the real packages are this environment's; the bundle only has to be valid
    bundle.mkdir()
    marker = tmp_path / "bundle_marker.py"
    marker.write_text("")
    with tarfile.open(bundle / "site.tar.xz", "w:xz") as tar:
        tar.add(marker, arcname=marker.name)
    (bundle / "site.python").write_text(f"{sys.version_info[0]}.{sys.version_info[1]}\n")
    shutil.copytree(REFERENCE, bundle / "curl_reference")
    suite, results = tmp_path / "gs", tmp_path / "gs" / "results-section.md"  # not the repository's docs/results.md
    env = {**os.environ, "BUNDLE": str(bundle), "SITE": str(tmp_path / "site"), "PYTHON": str(python),
           "OMP_NUM_THREADS": "1", "MUJOCO_GL": "egl", "PYTHONPATH": ""}
    env.pop("CURL_REFERENCE_DIR", None)
    for n, args in enumerate(CALLS, 1):
        out = tmp_path / f"out{n}"
        out.mkdir()
        proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_device.sh"), *args, "--out", str(suite),
                               "--results-md", str(results)], cwd=ROOT, env={**env, "OUT": str(out)},
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"call {n}: " + proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "CUDA available: True" in proc.stdout
        assert ("gpu_device.sh: rendering works" in proc.stdout) == (n < 4)  # call 4 renders nothing
        assert (out / "gpu-suite.tgz").is_file()

    # what the GPU machine is asked to run
    ran = calls.read_text()
    assert "-m pytest -q -m cuda -p no:cacheprovider\n" in ran
    reference = "benchmarks/curl_reference.py --device cuda --batch 512 --updates 50 --rounds 3 --fill 1000"
    assert f"{reference} --set agent.channels_last=false --json" in ran
    assert f"{reference} --set agent.channels_last=true --set agent.bf16=true --set agent.compile=true --json" in ran
    assert "--loss infonce --seed 1 --preset paper --device cuda --set train.env_frames=100000" in ran
    assert ran.count("--preset paper --device cuda --set train.env_frames=20000") == 5  # K = 1, then K = 4
    assert "benchmarks/losses.py --device cuda\n" in ran

    # the last call brings back the report of all four
    returned = {p.name for p in (tmp_path / "out4").iterdir()}
    assert returned == {"gpu-suite.tgz", "gpu_suite.json", "results.md"}
    data = json.loads((tmp_path / "out4" / "gpu_suite.json").read_text())
    assert data["dry_run"] is False and data["device"]["device"] == "FAKE GPU (a CPU)"
    assert [s["step"] for s in data["steps"]] == ["tests", "losses", "curl", "pack", "runs"]
    assert all(s["exit_code"] == 0 for s in data["steps"])
    assert data["curl_reference"]["ours_updates_per_s"] > 0 and len(data["curl_flags"]) == 3
    assert [p["k"] for p in data["pack"]] == [1, 4] and all(p["failed"] == 0 for p in data["pack"])
    (run,) = data["runs"]
    assert run["loss"] == "infonce" and run["finished"]
    assert "benchmark" in data["losses_log"].lower() or "| infonce |" in data["losses_log"]
    md = (tmp_path / "out4" / "results.md").read_text()
    assert "FAKE GPU (a CPU)" in md and "Dry run" not in md and "| 4 |" in md and "| infonce | 1 |" in md
