"""Run directories as records: loading ``run.json``/``summary.json``/``metrics.jsonl`` and grouping seeds into
configurations (:class:`Group`). The data model shared by :mod:`.tables`, :mod:`.plots` and :mod:`.report`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from contrastlab.experiments import stats as st
from contrastlab.experiments.grid import display_value
from contrastlab.platform.rundir import RunDir, find_run_dirs

__all__ = ["Group", "RunRecord", "find_run_dirs", "group_runs", "load_curves", "load_run", "parse_overrides"]

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
    layout = RunDir(run_dir)
    run_dir = layout.path
    info, summary = layout.info(), layout.summary()
    status = str(info.get("status") or ("completed" if summary else "unknown"))
    error = info.get("error")
    if status == "completed" and not summary:
        status, error = "incomplete", error or "run.json says completed, but summary.json is missing or unreadable"
    err_file = layout.compare_error
    if err_file.is_file():
        error = err_file.read_text().strip() or error
        status = "failed" if status != "completed" else status
    primary, higher = summary.get("primary_metric"), summary.get("higher_is_better")
    if not primary or higher is None:
        primary, higher = _primary_of(str(info.get("plugin", "")))
    metrics = {k: math.nan if v is None else float(v)  # summary.json writes a nan metric as null
               for k, v in (summary.get("metrics") or {}).items() if v is None or isinstance(v, (int, float))}
    if not primary and metrics:
        primary = next(iter(metrics))
    overrides, loss = parse_overrides(info.get("overrides", [])), str(info.get("loss", summary.get("loss", "?")))
    if summary.get("loss_used") is False:  # e.g. pu's end-to-end baseline: no loss trained it, so none is named
        loss, overrides = "none", {k: v for k, v in overrides.items() if not k.startswith("loss.")}
    return RunRecord(
        run_dir=run_dir,
        plugin=str(info.get("plugin", summary.get("plugin", "?"))),
        loss=loss,
        seed=int(info.get("seed", summary.get("seed", 0))),
        preset=info.get("preset"),
        overrides=overrides,
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
    path = RunDir(run_dir).metrics_jsonl
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


AXIS_SUFFIX = re.compile(r"_vs_[A-Za-z0-9_]+$")
"""A tag's x-axis suffix (``eval/episode_return_vs_env_frames``: RL runs log against environment frames)."""


def is_training_loss_tag(tag: str | None) -> bool:
    """Whether ``tag`` is a training-loss curve: ``train/loss`` or a plugin's own (pu's ``pretrain/loss``), with any
    x-axis suffix."""
    return bool(tag) and AXIS_SUFFIX.sub("", tag).rsplit("/", 1)[-1] == "loss"


# ---------------------------------------------------------------------------------------------- grouping
IQM_MIN_SEEDS = 4
"""Fewest seeds whose IQM gets a bootstrap interval: with 2–3 seeds nothing is trimmed (the IQM is the mean) and a
percentile bootstrap spans about their range (two seeds: exactly ``[min, max]``, which covered the mean only about
half the time, docs/compare.md "Statistics"); the main table's Student-t interval is the one to read there."""


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
        return [r.metrics[metric] for r in self.scored_runs(metric)]  # a diverged (NaN) seed does not count

    def scored_runs(self, metric: str | None = None) -> list[RunRecord]:
        """The completed runs with a finite final ``metric`` (default: primary): the seeds :meth:`values` counts."""
        metric = metric or self.primary
        return [r for r in self.runs if r.status == "completed" and math.isfinite(r.metrics.get(metric, math.nan))]

    def stats(self, metric: str | None = None) -> tuple[float, float, int]:
        """``(mean, sample std (n−1; 0 for one seed), n)``; ``(nan, nan, 0)`` without completed runs."""
        vals = self.values(metric)
        if not vals:
            return math.nan, math.nan, 0
        mean = sum(vals) / len(vals)
        var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1) if len(vals) > 1 else 0.0
        return mean, math.sqrt(var), len(vals)

    def interval(self, stat: str = "mean", metric: str | None = None) -> tuple[float, float, float]:
        """``(estimate, low, high)``: ``stat`` (``mean``/``iqm``) over the completed seeds with a 95 % interval:
        Student-t for the mean, percentile bootstrap (fixed seed) for the IQM (see :mod:`.stats`); the bounds are
        nan below two seeds, and for the IQM up to ``IQM_MIN_SEEDS - 1`` seeds (its estimate is then the mean)."""
        key = (stat, metric or self.primary)
        if key not in self._intervals:
            vals = self.values(metric)
            if not vals:
                est: tuple[float, float, float] = (math.nan, math.nan, math.nan)
            elif stat == "iqm" and len(vals) < IQM_MIN_SEEDS:
                est = (float(np.mean(vals)), math.nan, math.nan)
            else:
                est = st.t_interval(vals) if stat == "mean" else st.interval(np.array(vals), stat)
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
    exact: set[str] = set()  # keys shown with their exact text

    def shown(key: str, value: str) -> str:
        return value if key in exact else display_value(value)

    def labels(first: RunRecord) -> tuple[str, str]:
        ov = first.overrides
        row = _label(
            [
                first.plugin,
                f"preset={first.preset}" if presets_vary else "",
                *(f"{k}={shown(k, ov[k])}" for k in row_keys if k in ov),
            ]
        )
        return row, _label([first.loss, *(f"{k.removeprefix('loss.')}={shown(k, ov[k])}" for k in col_keys if k in ov)])

    # values that differ only past 4 significant digits (e.g. two sampled by `platform tune`) are shown exactly, in
    # every label: two configurations under one label shared a table cell, one shown under the other's verdict
    short = [labels(recs[0]) for recs in by_ident.values()]
    if len(set(short)) < len(short):
        exact.update(k for k in keys if any(display_value(rec.overrides.get(k, "")) != rec.overrides.get(k, "")
                                            for rec in records))
    groups = [Group(*labels(recs[0]), sorted(recs, key=lambda r: r.seed)) for recs in by_ident.values()]
    return sorted(groups, key=lambda g: (natural_key(g.row), natural_key(g.column)))


_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])([+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)(?![A-Za-z0-9_])")


def natural_key(label: str) -> tuple[tuple[int, Any], ...]:
    """Sort key that reads the numbers in a label as numbers: ``batch_size=64`` before ``batch_size=128``, and
    ``tau_plus=0.01`` < ``tau_plus=0.05`` < ``tau_plus=0.1`` (plain text order would put 128 before 64)."""
    parts = _NUMBER.split(label)
    return tuple((1, float(p)) if i % 2 else (0, p) for i, p in enumerate(parts))
