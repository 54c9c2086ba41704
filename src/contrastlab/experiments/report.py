"""``platform report``: aggregate run directories into tables, plots and a side-by-side TensorBoard logdir.

Outputs (written to ``OUT``; runs loaded by :mod:`.results`, tables in :mod:`.tables`, plots in :mod:`.plots`):

* ``results.csv``: one row per run (status, error, every final metric);
* ``summary.csv``: one row per configuration: mean, std, 95 % Student-t interval, IQM and its interval, verdict,
  and the paired comparison against the baseline;
* ``results.md``: per task, mean ± std [95 % Student-t CI] over seeds of the primary metric in the shape of DCL
  Table 3 (tasks as rows, losses/τ+ as columns), the best in bold only where its interval excludes the others'
  (else "tie"); then each configuration against the task's baseline (``infonce`` or ``--baseline``), paired by
  seed with Holm's correction (:mod:`.paired`); then per-task IQM, the aggregate over tasks (IQM with a
  stratified bootstrap, as rliable), all final metrics and the failures;
* ``curves.png``: learning curve of the primary metric, mean ± std band per configuration;
* ``aggregate.png``: IQM over tasks × seeds of the primary metric's curve, with its 95 % stratified bootstrap band;
* ``final.png``: final primary metric per configuration (bar = mean, whisker = 95 % CI, dots = seeds);
* ``tensorboard/<task>/<configuration>/s<seed>``: links to the run directories (``tensorboard --logdir``).

A configuration is (plugin, preset, loss, ``--set`` overrides except the seed). Override keys whose value
differs between configurations name them: ``loss.*`` keys go to the column, the others (and the plugin)
name the task row.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from contrastlab.experiments.paired import check_baseline, compare_to_baseline, paired_lines
from contrastlab.experiments.plots import curve_tags, plot_aggregate, plot_curves, plot_final
from contrastlab.experiments.results import Group, RunRecord, find_run_dirs, group_runs, load_curves, load_run
from contrastlab.experiments.tables import markdown, write_csv, write_summary_csv
from contrastlab.platform.errors import ConfigError, RunDirError
from contrastlab.platform.rundir import RunDir


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
            events = RunDir(r.run_dir).events()
            if not events:
                continue
            link = logdir / _slug(g.row) / _slug(g.column) / f"s{r.seed}"
            link.parent.mkdir(parents=True, exist_ok=True)
            try:
                link.symlink_to(os.path.relpath(r.run_dir.resolve(), link.parent.resolve()), target_is_directory=True)
            except OSError:
                link.mkdir(exist_ok=True)
                for ev in events:
                    shutil.copy2(ev, link / ev.name)
    logdir.mkdir(parents=True, exist_ok=True)
    return logdir


# ---------------------------------------------------------------------------------------------- entry point
def add_row_keys(records: Sequence[RunRecord], keys: Sequence[str]) -> None:
    """Give each run every ``--rows`` key (e.g. ``env.domain``): its override, else the value in its
    ``config.yaml``, both written one way (``true``, ``0.001``, ``null``, ``[10, 20]``) so that ``--set
    eval.linear=true`` and a default ``True`` name the same row."""
    from contrastlab.platform.config import parse_set

    missing = object()
    for rec in records:
        config: Any = None
        for key in keys:
            if key in rec.overrides:
                value = parse_set(f"{key}={rec.overrides[key]}")[1]
                if isinstance(value, str):  # YAML reads 1e-3 as text; the config holds the number
                    with contextlib.suppress(ValueError):
                        value = float(value)
            else:
                if config is None:
                    config = _run_config(rec.run_dir)
                value = config
                for part in key.split("."):
                    value = value.get(part, missing) if isinstance(value, dict) else missing
                if value is missing:
                    continue
            text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
            rec.overrides[key] = text.removesuffix("...").strip()


def _run_config(run_dir: Path) -> dict[str, Any]:
    """A run's ``config.yaml`` as a dict; ``{}`` when it is missing, unreadable or not a mapping (never raises)."""
    try:
        data = yaml.safe_load(RunDir(run_dir).config_yaml.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _unknown_row_key(key: str, records: Sequence[RunRecord]) -> str:
    """The error for a ``--rows`` key no run has: any key of the runs' ``config.yaml`` may name rows, so name
    their sections and the closest key (it listed only the overridden keys, ``(none)`` for plain runs)."""
    import difflib

    from contrastlab.platform.config import flatten_keys

    known: set[str] = set()
    for run_dir in {rec.plugin: rec.run_dir for rec in records}.values():  # one config.yaml per plugin
        known |= flatten_keys(_run_config(run_dir))
    known |= {k for rec in records for k in rec.overrides}
    sections = sorted({k.split(".")[0] + "." for k in known if "." in k})
    close = difflib.get_close_matches(key, sorted(known), n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return (f"--rows {key} is not a config key of any run; their keys start with {', '.join(sections) or '(none)'} "
            f"(see platform config).{hint}")


def _check_keys_exist(
    records: Sequence[RunRecord], dirs: Sequence[Path], rows: Sequence[str] | None, curve: str | None
) -> None:
    """``--rows`` keys must be config keys of some run and ``--curve`` a tag some run logged (one-line errors)."""
    if rows:
        keys = {k for rec in records for k in rec.overrides}
        unknown = [k for k in rows if k not in keys]
        if unknown:
            raise ConfigError(_unknown_row_key(unknown[0], records))
    if curve:
        tags = {t for d in dirs for t in load_curves(d)}
        if curve not in tags:
            raise ConfigError(f"--curve {curve} was not logged by any run; logged tags: {', '.join(sorted(tags))}")


def collect_runs(paths: Iterable[Path | str], note: Callable[[str], None] = lambda _: None) -> list[RunRecord]:
    """The runs under ``paths``, each (configuration, seed) once: a directory whose ``run.json`` or
    ``summary.json`` is not a run record (no plugin, a seed that is no integer, ...) is skipped, and a repeat of a
    (configuration, seed) already found (e.g. the same run in two compare outputs) is not counted again (a completed
    one is preferred); ``note`` is told about both."""
    paths = list(paths)
    records, unreadable, repeats = [], [], []
    for d in find_run_dirs(paths):
        plugin = RunDir(d).info().get("plugin")
        try:  # a plugin that is no name is no run record, as for RunDir.read_info (train --resume, eval)
            record = load_run(d) if isinstance(plugin, str) and plugin else None
        except (TypeError, ValueError, AttributeError):  # e.g. a seed that is no integer, metrics that are no mapping
            record = None
        if record is None:
            unreadable.append(str(d))
            continue
        records.append(record)
    if unreadable:
        note(f"skipped {len(unreadable)} folder(s) whose run.json or summary.json is not a run record: "
             f"{', '.join(unreadable[:3])}")
    if not records:
        raise RunDirError(f"no run directories (with run.json) under {', '.join(map(str, paths))}")
    by_key: dict[tuple[Any, ...], RunRecord] = {}
    for rec in records:
        key = (*rec.ident, rec.seed)
        kept = by_key.get(key)
        if kept is None:
            by_key[key] = rec
            continue
        if kept.status != "completed" and rec.status == "completed":
            by_key[key], rec = rec, kept
        repeats.append(str(rec.run_dir))  # the one left out
    if repeats:
        note(f"{len(repeats)} run(s) repeat the configuration and seed of another run and were counted once: "
             f"{', '.join(repeats[:3])}{' …' if len(repeats) > 3 else ''}")
    return list(by_key.values())


def build_report(
    paths: Iterable[Path | str], out: Path | str, *, rows: Sequence[str] | None = None, curve: str | None = None,
    note: Callable[[str], None] = lambda _: None, baseline: str | None = None,
) -> dict[str, Path]:
    """Collect the runs under ``paths`` (:func:`collect_runs`) and write every output to ``out``; returns
    ``{name: path}``. ``rows`` keys that are not overrides are read from each run's ``config.yaml``; ``baseline``:
    the configuration label the paired comparison differences against (default: each task's ``infonce``)."""
    records = collect_runs(paths, note)
    dirs = [r.run_dir for r in records]
    add_row_keys(records, rows or ())
    _check_keys_exist(records, dirs, rows, curve)
    groups = group_runs(records, rows=rows)
    check_baseline(groups, baseline)
    tags = curve_tags(groups, tag=curve)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pairs = compare_to_baseline(groups, baseline)
    (out / "results.md").write_text(markdown(groups, curve_tags=tags, after_main=paired_lines(groups, pairs, baseline)))
    return {
        "results.csv": write_csv(groups, out / "results.csv"),
        "summary.csv": write_summary_csv(groups, out / "summary.csv", pairs),
        "results.md": out / "results.md",
        "curves.png": plot_curves(groups, out / "curves.png", tags=tags),
        "aggregate.png": plot_aggregate(groups, out / "aggregate.png", tags=tags),
        "final.png": plot_final(groups, out / "final.png"),
        "tensorboard": link_tensorboard(groups, out / "tensorboard"),
    }
