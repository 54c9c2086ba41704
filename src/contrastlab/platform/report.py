"""``platform report``: aggregate run directories into tables, plots and a side-by-side TensorBoard logdir.

Outputs (written to ``OUT``; tables in :mod:`.report_tables`, plots in :mod:`.report_plots`):

* ``results.csv``: one row per run (status, error, every final metric);
* ``summary.csv``: one row per configuration: mean, std, 95 % bootstrap interval, IQM and its interval, verdict;
* ``results.md``: per task, mean ± std [95 % bootstrap CI] over seeds of the primary metric in the shape of DCL
  Table 3 (tasks as rows, losses/τ+ as columns), the best in bold only where its interval excludes the others'
  (else "tie"); then per-task IQM, the aggregate over tasks (IQM with a stratified bootstrap, as rliable), all
  final metrics and the failures;
* ``curves.png``: learning curve of the primary metric, mean ± std band per configuration;
* ``aggregate.png``: IQM over tasks × seeds of the primary metric's curve, with its 95 % stratified bootstrap band;
* ``final.png``: final primary metric per configuration (bar = mean, whisker = 95 % CI, dots = seeds);
* ``tensorboard/<task>/<configuration>/s<seed>``: links to the run directories (``tensorboard --logdir``).

A configuration is (plugin, preset, loss, ``--set`` overrides except the seed). Override keys whose value
differs between configurations name them: ``loss.*`` keys go to the column, the others (and the plugin)
name the task row.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from contrastlab.platform import stats as st
from contrastlab.platform.errors import ConfigError, RunDirError

_IGNORED_KEYS = {"seed", "device"}


@dataclass
class RunRecord:
    """What the report needs from one run directory."""

    run_dir: Path
    """The run directory."""
    plugin: str
    """Task plugin name."""
    loss: str
    """Loss name."""
    seed: int
    """Seed."""
    preset: str | None
    """Preset name."""
    overrides: dict[str, str]
    """``--set`` overrides ``{key: value}`` (seed and device excluded)."""
    status: str
    """``completed``, ``failed``, ``interrupted``, ``running`` ..."""
    error: str | None = None
    """One-line error of a failed run."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Final metrics from ``summary.json`` (empty unless completed)."""
    primary: str = ""
    """Primary metric name."""
    higher_is_better: bool = True
    """Direction of the primary metric."""
    wall_time_s: float | None = None
    """Wall time of a completed run."""

    @property
    def ident(self) -> tuple[Any, ...]:
        """Configuration identity (everything but the seed)."""
        return (self.plugin, self.preset, self.loss, tuple(sorted(self.overrides.items())))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def find_run_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """Directories under ``paths`` with a ``run.json`` (symlinks, e.g. ``tensorboard/``, not followed)."""
    found: dict[Path, None] = {}
    for root in map(Path, paths):
        if not root.is_dir():
            raise RunDirError(f"not a directory: {root}")
        if (root / "run.json").is_file():
            found[root] = None
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "checkpoints")
            if "run.json" in filenames:
                found[Path(dirpath)] = None
                dirnames[:] = []
    return list(found)


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """``["--set loss.tau_plus=0.1", "train.steps=5"]`` → ``{"loss.tau_plus": "0.1", "train.steps": "5"}``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, _, value = str(item).removeprefix("--set").strip().partition("=")
        if key.strip() and key.strip() not in _IGNORED_KEYS:
            out[key.strip()] = value.strip()
    return out


def _primary_of(plugin: str) -> tuple[str, bool]:
    try:
        from contrastlab.platform.plugins import registry

        factory = registry("plugin").get(plugin).factory
        return str(factory.primary_metric), bool(factory.higher_is_better)
    except Exception:  # an uninstalled third-party plugin: fall back to the summaries
        return "", True


def load_run(run_dir: Path) -> RunRecord:
    """Read ``run.json``, ``summary.json`` and a compare error file of one run directory."""
    run_dir = Path(run_dir)
    info, summary = _read_json(run_dir / "run.json"), _read_json(run_dir / "summary.json")
    status = str(info.get("status") or ("completed" if summary else "unknown"))
    if status == "completed" and not summary:
        status = "incomplete"
    error = info.get("error")
    err_file = run_dir / "compare_error.txt"
    if err_file.is_file():
        error = err_file.read_text().strip() or error
        status = "failed" if status != "completed" else status
    primary, higher = summary.get("primary_metric"), summary.get("higher_is_better")
    if not primary or higher is None:
        primary, higher = _primary_of(str(info.get("plugin", "")))
    metrics = {k: float(v) for k, v in (summary.get("metrics") or {}).items() if isinstance(v, (int, float))}
    if not primary and metrics:
        primary = next(iter(metrics))
    return RunRecord(
        run_dir=run_dir,
        plugin=str(info.get("plugin", summary.get("plugin", "?"))),
        loss=str(info.get("loss", summary.get("loss", "?"))),
        seed=int(info.get("seed", summary.get("seed", 0))),
        preset=info.get("preset"),
        overrides=parse_overrides(info.get("overrides", [])),
        status=status,
        error=error,
        metrics=metrics if status == "completed" else {},
        primary=str(primary or ""),
        higher_is_better=bool(higher),
        wall_time_s=summary.get("wall_time_s"),
    )


def load_curves(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` from ``metrics.jsonl`` (later duplicates of a step win)."""
    curves: dict[str, dict[int, float]] = {}
    path = Path(run_dir) / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    for line in lines:
        try:
            row = json.loads(line)
            step = int(row["step"])
        except (ValueError, KeyError, TypeError):
            continue
        for tag, value in row.items():
            if tag not in ("step", "wall_time") and isinstance(value, (int, float)) and math.isfinite(value):
                curves.setdefault(tag, {})[step] = float(value)
    return {tag: sorted(points.items()) for tag, points in curves.items()}


# ---------------------------------------------------------------------------------------------- grouping
@dataclass
class Group:
    """All seeds of one configuration, placed in a task row and a configuration column."""

    row: str
    """Task label (plugin plus non-loss keys that vary)."""
    column: str
    """Configuration label (loss plus ``loss.*`` keys that vary)."""
    runs: list[RunRecord]
    """Its runs (any status), sorted by seed."""
    _intervals: dict[tuple[str, str], tuple[float, float, float]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def primary(self) -> str:
        """Primary metric of the row's plugin."""
        return next((r.primary for r in self.runs if r.primary), "")

    @property
    def higher_is_better(self) -> bool:
        """Direction of the primary metric."""
        return next((r.higher_is_better for r in self.runs if r.primary), True)

    def values(self, metric: str | None = None) -> list[float]:
        """Finite final values of ``metric`` (default: primary) over the completed seeds."""
        metric = metric or self.primary
        vals = [r.metrics.get(metric) for r in self.runs if r.status == "completed"]
        return [v for v in vals if v is not None and math.isfinite(v)]  # a diverged (NaN) seed does not count

    def stats(self, metric: str | None = None) -> tuple[float, float, int]:
        """``(mean, sample std (n−1; 0 for one seed), n)``; ``(nan, nan, 0)`` without completed runs."""
        vals = self.values(metric)
        if not vals:
            return math.nan, math.nan, 0
        mean = sum(vals) / len(vals)
        var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1) if len(vals) > 1 else 0.0
        return mean, math.sqrt(var), len(vals)

    def interval(self, stat: str = "mean", metric: str | None = None) -> tuple[float, float, float]:
        """``(estimate, low, high)``: ``stat`` (``mean``/``iqm``) over the completed seeds with a 95 % percentile
        bootstrap interval (fixed seed, see :mod:`.stats`); the bounds are nan below two seeds."""
        key = (stat, metric or self.primary)
        if key not in self._intervals:
            vals = self.values(metric)
            est = st.interval(np.array(vals), stat) if vals else (math.nan, math.nan, math.nan)
            self._intervals[key] = (float(est[0]), float(est[1]), float(est[2]))
        return self._intervals[key]


def _label(parts: Sequence[str]) -> str:
    return " ".join(p for p in parts if p)


def group_runs(records: Sequence[RunRecord], rows: Sequence[str] | None = None) -> list[Group]:
    """Group runs by configuration and label rows/columns by the keys that vary (see the module docstring).

    ``rows``: override keys that name the task rows (default: every varying key not under ``loss.``); other
    varying non-loss keys join the column label.
    """
    known = {r.plugin: (r.primary, r.higher_is_better) for r in records if r.primary and r.status == "completed"}
    for rec in records:  # a run that failed before writing summary.json takes its plugin's primary metric
        if not rec.primary and rec.plugin in known:
            rec.primary, rec.higher_is_better = known[rec.plugin]
    by_ident: dict[tuple[Any, ...], list[RunRecord]] = {}
    for rec in records:
        by_ident.setdefault(rec.ident, []).append(rec)
    keys = sorted({k for rec in records for k in rec.overrides})
    varying = [k for k in keys if len({rec.overrides.get(k) for rec in records}) > 1]
    presets_vary = len({rec.preset for rec in records}) > 1
    row_keys = list(rows) if rows is not None else [k for k in varying if not k.startswith("loss.")]
    col_keys = [k for k in varying if k not in row_keys]
    groups = []
    for recs in by_ident.values():
        first = recs[0]
        ov = first.overrides
        row = _label(
            [
                first.plugin,
                f"preset={first.preset}" if presets_vary else "",
                *(f"{k}={ov[k]}" for k in row_keys if k in ov),
            ]
        )
        col = _label([first.loss, *(f"{k.removeprefix('loss.')}={ov[k]}" for k in col_keys if k in ov)])
        groups.append(Group(row, col, sorted(recs, key=lambda r: r.seed)))
    return sorted(groups, key=lambda g: (g.row, g.column))


# ---------------------------------------------------------------------------------------------- tensorboard
def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", text).strip("_") or "run"


def link_tensorboard(groups: Sequence[Group], logdir: Path) -> Path:
    """``logdir/<task>/<configuration>/s<seed>`` → run directory (relative symlinks; event-file copies where
    links are not allowed). ``tensorboard --logdir logdir`` then shows the runs side by side."""
    if logdir.is_symlink() or logdir.is_file():
        logdir.unlink()
    elif logdir.exists():
        shutil.rmtree(logdir)
    for g in groups:
        for r in g.runs:
            if not any(r.run_dir.glob("events.out.tfevents.*")):
                continue
            link = logdir / _slug(g.row) / _slug(g.column) / f"s{r.seed}"
            link.parent.mkdir(parents=True, exist_ok=True)
            try:
                link.symlink_to(os.path.relpath(r.run_dir.resolve(), link.parent.resolve()), target_is_directory=True)
            except OSError:
                link.mkdir(exist_ok=True)
                for ev in r.run_dir.glob("events.out.tfevents.*"):
                    shutil.copy2(ev, link / ev.name)
    logdir.mkdir(parents=True, exist_ok=True)
    return logdir


# ---------------------------------------------------------------------------------------------- entry point
def _check_keys_exist(
    records: Sequence[RunRecord], dirs: Sequence[Path], rows: Sequence[str] | None, curve: str | None
) -> None:
    """``--rows`` keys must be overrides of some run and ``--curve`` a tag some run logged (one-line errors)."""
    if rows:
        keys = {k for rec in records for k in rec.overrides}
        unknown = [k for k in rows if k not in keys]
        if unknown:
            raise ConfigError(
                f"--rows {unknown[0]} is not an override of any run; available: {', '.join(sorted(keys)) or '(none)'}"
            )
    if curve:
        tags = {t for d in dirs for t in load_curves(d)}
        if curve not in tags:
            raise ConfigError(f"--curve {curve} was not logged by any run; logged tags: {', '.join(sorted(tags))}")


def build_report(
    paths: Iterable[Path | str], out: Path | str, *, rows: Sequence[str] | None = None, curve: str | None = None
) -> dict[str, Path]:
    """Collect the runs under ``paths`` and write every output to ``out``; returns ``{name: path}``."""
    from contrastlab.platform.report_plots import curve_tags, plot_aggregate, plot_curves, plot_final
    from contrastlab.platform.report_tables import markdown, write_csv, write_summary_csv

    dirs = find_run_dirs(paths)
    if not dirs:
        raise RunDirError(f"no run directories (with run.json) under {', '.join(map(str, paths))}")
    records = [load_run(d) for d in dirs]
    _check_keys_exist(records, dirs, rows, curve)
    groups = group_runs(records, rows=rows)
    tags = curve_tags(groups, tag=curve)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(markdown(groups, curve_tags=tags))
    return {
        "results.csv": write_csv(groups, out / "results.csv"),
        "summary.csv": write_summary_csv(groups, out / "summary.csv"),
        "results.md": out / "results.md",
        "curves.png": plot_curves(groups, out / "curves.png", tags=tags),
        "aggregate.png": plot_aggregate(groups, out / "aggregate.png", tags=tags),
        "final.png": plot_final(groups, out / "final.png"),
        "tensorboard": link_tensorboard(groups, out / "tensorboard"),
    }
