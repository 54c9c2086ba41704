"""``benchmarks/gpu_report.py``: issue 10's GPU figures (speed-flag variants, K runs per GPU, the 100k-frame run)
are collected from what the suite's steps wrote, with their targets; nothing is estimated."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def curl_json(path: Path, sets: list[str], ours: float, ref: float) -> None:
    path.write_text(json.dumps({"batch": 512, "sets": sets, "ours_updates_per_s": ours,
                                "reference_updates_per_s": ref, "speedup_vs_reference": ours / ref}))


def test_pack_log_gives_each_runs_share_of_the_single_run_speed(tmp_path: Path, load_benchmark) -> None:
    report = load_benchmark("gpu_report")
    (tmp_path / "pack.log").write_text(
        "K=1 runs: 60 s wall, 300 env frames/s in total, 0 failed\n"
        "K=4 runs: 100 s wall, 900 env frames/s in total, 1 failed\n"
        "K=4 runs: 95 s wall, 840 env frames/s in total, 0 failed\n"  # measured again: the last line counts
        "K=8 runs: 200 s wall, 1000 env frames/s in total, 0 failed\n"
        "K=1 runs: 3 s wall, 13 env frames/s in total, 1 failed\n")  # a failed repeat: the clean line stays
    pack = report.pack_summary(tmp_path)
    assert [r["k"] for r in pack] == [1, 4, 8] and pack[0]["total_fps"] == 300
    assert pack[1] == {"k": 4, "wall_s": 95, "total_fps": 840, "failed": 0, "per_run_fps": 210.0,
                       "per_run_vs_single": 0.7}
    assert pack[2]["per_run_vs_single"] == 125 / 300
    assert report.pack_summary(tmp_path / "nowhere") == []


def test_section_states_issue_10_targets_from_the_measurements(tmp_path: Path, load_benchmark) -> None:
    report = load_benchmark("gpu_report")
    curl_json(tmp_path / "curl_reference.json", [], 30.0, 10.0)
    curl_json(tmp_path / "curl_reference_channels_last+bf16.json", ["agent.channels_last=true", "agent.bf16=true"],
              55.0, 10.0)
    curl_json(tmp_path / "curl_reference_channels_last.json", ["agent.channels_last=true"], 40.0, 10.0)
    (tmp_path / "pack.log").write_text("K=1 runs: 60 s wall, 300 env frames/s in total, 0 failed\n"
                                       "K=4 runs: 80 s wall, 880 env frames/s in total, 0 failed\n")
    (tmp_path / "device.json").write_text(json.dumps({"device": "NVIDIA H100", "torch": "2.11.0"}))
    md = tmp_path / "results.md"
    data = report.main(["--out", str(tmp_path), "--runs-dir", str(tmp_path / "runs"), "--results-md", str(md)])
    assert [v["sets"] for v in data["curl_flags"]] == [["agent.channels_last=true"],
                                                       ["agent.channels_last=true", "agent.bf16=true"]]
    text = md.read_text()
    assert "the same with `channels_last + bf16`: ours **55.0**/s" in text
    assert "best 5.50× at batch 512 (met)" in text
    assert "| 4 | 80 | 880 | 220 | 73% | 0 |" in text
    assert "Best K by total frames/s: **4**." in text
    assert "≥ 4 runs at ≥ 70% of the single-run speed each: met." in text
    assert json.loads((tmp_path / "gpu_suite.json").read_text())["pack"][1]["k"] == 4


def test_a_report_made_again_from_a_cpu_runs_files_stays_a_dry_run(tmp_path: Path, load_benchmark) -> None:
    report = load_benchmark("gpu_report")
    (tmp_path / "device.json").write_text(json.dumps({"device": "cpu (x86_64)", "torch": "2.13.0"}))
    md = tmp_path / "results.md"
    data = report.main(["--out", str(tmp_path), "--runs-dir", str(tmp_path / "runs"), "--results-md", str(md)])
    assert data["dry_run"] is True and "Dry run (CPU, tiny sizes): not a measurement." in md.read_text()


def test_step_times_and_failures_come_from_the_step_files(tmp_path: Path, load_benchmark) -> None:
    """``steps/<step>.txt`` (written by the suite after each step) gives each step's latest wall time and exit
    status, in the suite's order; the report's own file (an earlier report) and a malformed file are left out."""
    report = load_benchmark("gpu_report")
    steps = tmp_path / "steps"
    steps.mkdir()
    for step, text in (("curl", "0 240\n"), ("tests", "0 95\n"), ("report", "0 4\n"), ("runs", "124 x\n"),
                       ("losses", "2 12\n")):
        (steps / f"{step}.txt").write_text(text)
    assert report.step_records(tmp_path) == [{"step": "tests", "exit_code": 0, "seconds": 95},
                                             {"step": "losses", "exit_code": 2, "seconds": 12},
                                             {"step": "curl", "exit_code": 0, "seconds": 240}]
    line = report.step_line(report.step_records(tmp_path))
    assert line == ("- steps (wall time of the latest run of each): `tests` 95 s, `losses` 12 s (**failed**, exit 2), "
                    "`curl` 240 s")
    assert report.step_records(tmp_path / "nowhere") == [] and "no record" in report.step_line([])


def test_archives_of_calls_on_fresh_machines_unpack_into_one_report(tmp_path: Path, load_benchmark) -> None:
    """docs/gpu.md: the archives of calls that each found a fresh machine, unpacked here one over the other, give
    the report of all of them, step times included."""
    report = load_benchmark("gpu_report")
    calls = [{"steps/curl.txt": "0 300\n", "curl_reference.json": None},
             {"steps/pack.txt": "1 200\n", "pack.log": "K=1 runs: 60 s wall, 300 env frames/s in total, 0 failed\n"},
             {"steps/losses.txt": "0 50\n", "device.json": json.dumps({"device": "NVIDIA H100", "torch": "2.11.0"})}]
    here = tmp_path / "here"
    for n, files in enumerate(calls):
        machine = tmp_path / f"machine{n}" / "gpu-suite"
        for name, text in files.items():
            (machine / name).parent.mkdir(parents=True, exist_ok=True)
            if name == "curl_reference.json":
                curl_json(machine / name, [], 60.0, 10.0)
            else:
                (machine / name).write_text(text)
        archive = tmp_path / f"call{n}.tgz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(machine, arcname="gpu-suite")
        with tarfile.open(archive) as tar:
            tar.extractall(here, filter="data")
    data = report.main(["--out", str(here / "gpu-suite"), "--runs-dir", str(here / "gpu-suite" / "runs"),
                        "--results-md", str(tmp_path / "results.md")])
    assert [s["step"] for s in data["steps"]] == ["losses", "curl", "pack"]
    assert data["curl_reference"]["speedup_vs_reference"] == 6.0 and data["pack"][0]["k"] == 1
