"""Collect what ``benchmarks/gpu_suite.sh`` measured into ``OUT/gpu_suite.json`` and a Markdown section.

The section replaces the text between ``<!-- gpu-suite:begin -->`` and ``<!-- gpu-suite:end -->`` in
``--results-md`` (appended, with the markers, when they are absent). Nothing is estimated: a step that did not
run is reported as "not run". Usage::

    python benchmarks/gpu_report.py --out gpu-suite --runs-dir gpu-suite/runs --results-md docs/results.md
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path
from typing import Any

from contrastlab.platform.rundir import RunDir, find_run_dirs

BEGIN, END = "<!-- gpu-suite:begin -->", "<!-- gpu-suite:end -->"
CURL_PAPER_CARTPOLE_100K = (582, 146)
"""CURL paper, Table 1, cartpole-swingup at 100k environment steps: mean ± std over seeds."""


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def pytest_summary(out: Path) -> dict[str, Any] | None:
    """Counts from the closing line of ``tests.log`` (``N passed, M skipped in T s``) and the exit code."""
    log = out / "tests.log"
    if not log.is_file():
        return None
    text = log.read_text()
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected|tests? collected)",
                                              text)}
    rc = (out / "tests.rc").read_text().strip() if (out / "tests.rc").is_file() else None
    return {"counts": counts, "exit_code": None if rc is None else int(rc)}


ISSUE10_SPEEDUP = 5.0
"""Issue 10: our CURL updates/s at batch 512 at least this many times the reference's on the same GPU."""
ISSUE10_PACK = (4, 0.7)
"""Issue 10: at least this many concurrent runs on one GPU, each at this fraction of the single-run speed."""
ISSUE10_RUN = (100_000, 300)
"""Issue 10: a run of this many environment frames in at most this many seconds of wall time on one H100."""

PACK_LINE = re.compile(r"K=(\d+) runs: (\d+) s wall, (\d+) env frames/s in total, (\d+) failed")


STEPS = ("tests", "losses", "curl", "pack", "runs")
"""The suite's measuring steps, in the order it runs them (the report's own record is of an earlier report)."""


def step_records(out: Path) -> list[dict[str, Any]]:
    """Each measuring step's record, ``steps/<step>.txt`` (``<exit status> <seconds>``, written by ``gpu_suite.sh``
    after the step's latest run), in the suite's order: what failed, and how long each step took."""
    records = []
    for step in STEPS:
        path = out / "steps" / f"{step}.txt"
        parts = path.read_text().split() if path.is_file() else []
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            records.append({"step": step, "exit_code": int(parts[0]), "seconds": int(parts[1])})
    return records


def step_line(steps: list[dict[str, Any]]) -> str:
    """One Markdown line: each step's wall time, and which failed (its exit status)."""
    if not steps:
        return "- steps: no record (`steps/`)"
    parts = [f"`{r['step']}` {r['seconds']} s" + (f" (**failed**, exit {r['exit_code']})" if r["exit_code"] else "")
             for r in steps]
    return "- steps (wall time of the latest run of each): " + ", ".join(parts)


def curl_flag_variants(out: Path) -> list[dict[str, Any]]:
    """The ``curl`` step's runs with speed flags (``curl_reference_<flags>.json``), in the order of their flags."""
    variants = [_read_json(path) for path in sorted(out.glob("curl_reference_*.json"))]
    return sorted((v for v in variants if v), key=lambda v: len(v.get("sets", [])))


def pack_summary(out: Path) -> list[dict[str, Any]]:
    """One record per K from ``pack.log`` (for a K measured more than once, the last line without failed runs, else
    the last line): the total environment frames/s of K concurrent runs, each run's share, and that share relative
    to K = 1 (``None`` without K = 1)."""
    log = out / "pack.log"
    by_k: dict[int, dict[str, Any]] = {}
    for k, wall, total, failed in PACK_LINE.findall(log.read_text() if log.is_file() else ""):
        if int(failed) and by_k.get(int(k), {}).get("failed") == 0:
            continue  # a failed repeat does not replace a clean measurement
        by_k[int(k)] = {"k": int(k), "wall_s": int(wall), "total_fps": int(total), "failed": int(failed),
                        "per_run_fps": int(total) / int(k)}
    single = by_k.get(1, {}).get("per_run_fps")
    for rec in by_k.values():
        rec["per_run_vs_single"] = rec["per_run_fps"] / single if single else None
    return [by_k[k] for k in sorted(by_k)]


def eval_curve(run_dir: Path, tag: str = "eval/episode_return") -> list[tuple[int, float]]:
    """``(env frames, return)`` pairs logged in ``metrics.jsonl``."""
    path = RunDir(run_dir).metrics_jsonl
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(int(r["step"]), float(r[tag])) for r in rows if r.get(tag) is not None]


def collect_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """One record per finished or unfinished curl run under ``runs_dir``."""
    records = []
    for run_dir in sorted(find_run_dirs([runs_dir]) if runs_dir.is_dir() else []):
        layout = RunDir(run_dir)
        summary = _read_json(layout.summary_json)
        info = _read_json(layout.run_json) or {}
        if info.get("plugin") != "curl":
            continue
        curve = eval_curve(run_dir)
        rec: dict[str, Any] = {"name": run_dir.name, "loss": info.get("loss"), "finished": summary is not None,
                               "curve": curve, "seed": info.get("seed")}
        if summary is not None:
            m = summary["metrics"]
            rec.update(seed=summary.get("seed"), final_return=m.get("eval/episode_return"),
                       env_frames=m.get("train/env_frames"), wall_time_s=summary.get("wall_time_s"),
                       frames_per_second=m.get("perf/frames_per_second"),
                       clamped_frac=m.get("train/clamped_frac"), loss_hparams=summary.get("loss_hparams"))
        elif curve:
            rec.update(env_frames=curve[-1][0], last_return=curve[-1][1])
        records.append(rec)
    return records


def _fmt(x: Any, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def pack_lines(pack: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of the pack step (:func:`pack_summary`): the table, the best K and issue 10's target."""
    if not pack:
        return ["- K runs per GPU (pack step): not run"]
    k_min, share = ISSUE10_PACK
    lines = ["", "K concurrent curl runs on the one GPU (`gpu_suite.sh --steps pack`; frames/s include each "
             "process's start and evaluation):", "",
             "| K | wall (s) | total env frames/s | per run | per run vs K = 1 | failed |",
             "|---|---|---|---|---|---|"]
    for rec in pack:
        rel = rec["per_run_vs_single"]
        lines.append(f"| {rec['k']} | {rec['wall_s']} | {rec['total_fps']} | {rec['per_run_fps']:.0f} | "
                     f"{'–' if rel is None else f'{rel:.0%}'} | {rec['failed']} |")
    ok = [r for r in pack if r["failed"] == 0]
    if ok:
        best_k = max(ok, key=lambda r: r["total_fps"])
        lines.append(f"\nBest K by total frames/s: **{best_k['k']}**.")
    at_k = [r for r in ok if r["k"] >= k_min and r["per_run_vs_single"] is not None]
    if at_k:
        met = any(r["per_run_vs_single"] >= share for r in at_k)
        lines.append(f"Issue 10 target ≥ {k_min} runs at ≥ {share:.0%} of the single-run speed each: "
                     f"{'met' if met else 'not met'}.")
    return lines


def markdown(data: dict[str, Any], frames: int) -> str:
    """The Markdown section for docs/results.md."""
    dev = data.get("device") or {}
    lines = [BEGIN, "", f"### GPU suite: {dev.get('device', 'unknown device')}", "",
             f"`bash benchmarks/gpu_suite.sh` on **{dev.get('device')}**, torch {dev.get('torch')} "
             f"(CUDA {dev.get('cuda')}), Python {dev.get('python')}."
             + (" **Dry run (CPU, tiny sizes): not a measurement.**" if data.get("dry_run") else ""), ""]
    lines.append(step_line(data.get("steps") or []))
    tests = data.get("tests")
    lines.append("- CUDA tests (`pytest -m cuda`): " + (
        "not run" if tests is None else
        ", ".join(f"{v} {k}" for k, v in tests["counts"].items()) + f" (exit code {tests['exit_code']})"))
    curl = data.get("curl_reference")
    if curl is None:
        lines.append("- CURL updates/s: not run")
    else:
        lines.append(f"- CURL updates/s at batch {curl['batch']} (critic + contrastive every update, actor/α/targets "
                     f"every 2nd; replay sampling and crops included), same GPU, alternating rounds: ours "
                     f"without speed flags (float32, `agent.channels_last=false`) "
                     f"**{curl['ours_updates_per_s']:.1f}**/s vs reference CURL "
                     f"{curl['reference_updates_per_s']:.1f}/s "
                     f"→ **{curl['speedup_vs_reference']:.2f}×** the reference.")
    for variant in data.get("curl_flags") or []:
        flags = " + ".join(v.removeprefix("agent.").removesuffix("=true") for v in variant.get("sets", [])
                           if v.endswith("=true"))
        lines.append(f"- the same with `{flags}`: ours **{variant['ours_updates_per_s']:.1f}**/s vs reference "
                     f"{variant['reference_updates_per_s']:.1f}/s → **{variant['speedup_vs_reference']:.2f}×**")
    if curl is not None:
        best = max([curl, *(data.get("curl_flags") or [])], key=lambda v: v["speedup_vs_reference"])
        verdict = "met" if best["speedup_vs_reference"] >= ISSUE10_SPEEDUP else "not met"
        lines.append(f"- issue 10 target, ≥ {ISSUE10_SPEEDUP:g}× the reference's updates/s at batch 512: best "
                     f"{best['speedup_vs_reference']:.2f}× at batch {best['batch']} ({verdict})")
    lines += pack_lines(data.get("pack") or [])
    runs = data.get("runs") or []
    if runs:
        mean, std = CURL_PAPER_CARTPOLE_100K
        lines += ["", f"cartpole-swingup, `--preset paper` (batch 512), {frames:,} env frames, all runs at once on the "
                  f"one GPU. CURL paper (Table 1, 100k): {mean} ± {std}.", "",
                  "| loss | seed | final return | env frames | wall (min) | frames/s | clamped frac | finished |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in runs:
            ret = r.get("final_return", r.get("last_return"))
            lines.append(f"| {r['loss']} | {r.get('seed')} | {_fmt(ret)} | {r.get('env_frames') or 0:,.0f} | "
                         f"{_fmt((r.get('wall_time_s') or 0) / 60 if r.get('wall_time_s') else None)} | "
                         f"{_fmt(r.get('frames_per_second'))} | {_fmt(r.get('clamped_frac'), 3)} | "
                         f"{'yes' if r['finished'] else 'no'} |")
        by_loss: dict[str, list[float]] = {}
        for r in runs:
            if r["finished"] and r.get("final_return") is not None:
                by_loss.setdefault(r["loss"], []).append(r["final_return"])
        run_frames, run_wall = ISSUE10_RUN
        walls = [r["wall_time_s"] for r in runs if r["finished"] and r.get("wall_time_s")
                 and (r.get("env_frames") or 0) >= run_frames]
        if walls:
            lines.append(f"\nIssue 10 target, a {run_frames // 1000}k-frame run in ≤ {run_wall / 60:g} min wall on one "
                         f"H100 (alone; with {len(runs)} run(s) sharing the GPU here): fastest "
                         f"{min(walls) / 60:.1f} min ({'met' if min(walls) <= run_wall else 'not met'}).")
        for loss, vals in by_loss.items():
            sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
            lines.append(f"\n{loss}: mean final return {statistics.mean(vals):.1f} ± {sd:.1f} over {len(vals)} "
                         f"seed(s) (target ≥ {mean}).")
    else:
        lines.append("- cartpole-swingup learning runs: not run")
    losses_log = data.get("losses_log")
    if losses_log:
        lines += ["", "<details><summary>Loss benchmark on the GPU (benchmarks/losses.py --device cuda)</summary>",
                  "", "```", losses_log.rstrip(), "```", "", "</details>"]
    lines += ["", END]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace the marked section of ``path`` (or append it)."""
    text = path.read_text() if path.is_file() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + ("\n\n" if text else "") + section + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Collect, write the JSON and the Markdown section; return the collected data."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--runs-dir", type=Path, required=True)
    p.add_argument("--results-md", type=Path, required=True)
    p.add_argument("--frames", type=int, default=100_000, help="env frames per run, when no run has finished")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    losses_log = args.out / "losses.log"
    device = _read_json(args.out / "device.json")
    runs = collect_runs(args.runs_dir)
    finished_frames = [r["env_frames"] for r in runs if r["finished"] and r.get("env_frames")]
    data = {
        # a suite that ran on a CPU is a dry run, also when the report is made again from its files
        "dry_run": args.dry_run or str((device or {}).get("device", "")).startswith("cpu"),
        "device": device,
        "steps": step_records(args.out),
        "tests": pytest_summary(args.out),
        "curl_reference": _read_json(args.out / "curl_reference.json"),
        "curl_flags": curl_flag_variants(args.out),
        "pack": pack_summary(args.out),
        "runs": runs,
        "losses_log": losses_log.read_text() if losses_log.is_file() else None,
    }
    (args.out / "gpu_suite.json").write_text(json.dumps(data, indent=2))
    write_section(args.results_md, markdown(data, int(max(finished_frames)) if finished_frames else args.frames))
    print(f"wrote {args.out / 'gpu_suite.json'} and the gpu-suite section of {args.results_md}")
    return data


if __name__ == "__main__":
    main()
