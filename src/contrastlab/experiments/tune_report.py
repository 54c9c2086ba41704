"""Outputs of ``platform tune``: the trials table (CSV and Markdown) and two PNG plots drawn with matplotlib
(optimisation history with the best-so-far line; parameter importance from Optuna's default evaluator, or a
figure saying why there is none). Sampled floats are shown with 4 significant digits."""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path
from typing import Any


def trial_params(trial: Any) -> dict[str, Any]:
    """A trial's parameters; for a queued (WAITING) trial, the ones it will run with (Optuna's ``fixed_params``)."""
    return dict(trial.params) or dict(trial.system_attrs.get("fixed_params") or {})


def trial_rows(study: Any) -> tuple[list[str], list[list[str]]]:
    """Header and one row per trial: number, state, value, each parameter, seconds, run directory."""
    keys = sorted({k for t in study.trials for k in trial_params(t)})
    header = ["trial", "state", "value", *keys, "seconds", "dir"]
    rows = []
    for t in study.trials:
        params = trial_params(t)
        secs = (
            (t.datetime_complete - t.datetime_start).total_seconds()
            if t.datetime_complete and t.datetime_start
            else None
        )
        rows.append(
            [
                str(t.number),
                t.state.name,
                "" if t.value is None else f"{t.value:#.6g}",
                *(
                    f"{params[k]:.4g}" if isinstance(params.get(k), float) else str(params.get(k, ""))
                    for k in keys
                ),
                "" if secs is None else f"{secs:.1f}",
                str(t.user_attrs.get("dir", "")),
            ]
        )
    return header, rows


def write_tables(study: Any, out: Path, metric: str) -> list[Path]:
    """``trials.csv`` and ``trials.md`` (best trial in bold; its directory column relative to ``out``)."""
    header, rows = trial_rows(study)
    with open(out / "trials.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    try:
        best = study.best_trial.number
    except ValueError:
        best = None
    lines = [
        f"# Trials of study {study.study_name}",
        "",
        f"Objective: {metric} ({study.direction.name.lower()}), mean over the seeds of each trial.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in rows:
        cells = [*row[:-1], short_dir(row[-1], out)]
        if best is not None and row[0] == str(best):
            cells = [f"**{c}**" if c else c for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    (out / "trials.md").write_text("\n".join(lines) + "\n")
    return [out / "trials.csv", out / "trials.md"]


def short_dir(path: str, out: Path) -> str:
    """``trials/0003`` for a trial directory under ``out``; any other path as is."""
    try:
        return str(Path(path).relative_to(out)) if path else ""
    except ValueError:
        return path


def no_importance_reason(study: Any) -> str | None:
    """Why ``importance.png`` shows no importance (``None`` when it does): fewer than 2 COMPLETE trials, or a
    single searched parameter, whose importance is 1.0 by definition."""
    done = [t for t in study.trials if t.state.name == "COMPLETE" and t.value is not None]
    keys = {k for t in study.trials for k in t.params}
    if len(done) < 2:
        return f"needs ≥ 2 complete trials ({len(done)} so far)"
    if len(keys) == 1:
        return f"one parameter ({next(iter(keys))}): importance is 1.0 by definition"
    return None


def write_plots(study: Any, out: Path, metric: str) -> list[Path]:
    """``history.png`` and ``importance.png`` (the latter says why when importance is undefined)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [t for t in study.trials if t.state.name == "COMPLETE" and t.value is not None]
    maximize = study.direction.name.lower() == "maximize"
    fig, ax = plt.subplots(figsize=(6, 4))
    if done:
        xs, ys = [t.number for t in done], [t.value for t in done]
        best, run = [], None
        for y in ys:
            run = y if run is None else (max(run, y) if maximize else min(run, y))
            best.append(run)
        ax.plot(xs, ys, "o", label="trial")
        ax.step(xs, best, where="post", label="best so far")
        ax.legend()
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trial numbers: no 0.5 ticks with a few trials
    ax.set_xlabel("trial")
    ax.set_ylabel(metric)
    ax.set_title(f"optimisation history ({len(done)} complete)")
    fig.tight_layout()
    fig.savefig(out / "history.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3))
    reason = no_importance_reason(study)
    if reason is None:
        try:
            import optuna

            importances = optuna.importance.get_param_importances(study)
            names = list(importances)[::-1]
            ax.barh(names, [importances[n] for n in names])
            ax.set_xlabel("importance (Optuna's default evaluator, sums to 1)")
        except (ValueError, RuntimeError) as exc:
            reason = f"importance undefined: {str(exc)[:80]}"
    if reason is None:
        ax.set_title("parameter importance", fontsize=9)
    else:  # the reason once, in the body
        text = textwrap.fill(f"no parameter importance: {reason}", width=48)  # matplotlib's wrap= overflows
        ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9)
        ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(out / "importance.png", dpi=100)
    plt.close(fig)
    return [out / "history.png", out / "importance.png"]
