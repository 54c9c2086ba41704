"""What ``platform compare`` will run, decided before anything runs: the grid (from options or a recipe), the
preset policy, and the ETA line.

**Preset policy.** A plugin that declares GPU-sized presets (``gpu_presets``: curl, simclr, pu, recsys) has a default
preset, ``smoke``, that only checks that training runs (curl: 1,600 environment frames). A comparison on it
would look like a result and mean nothing, so ``platform compare`` refuses such a plugin without ``--preset``
(or a ``--recipe``, which names its preset), with a one-line error naming the presets and recipes. Plugins
without GPU-sized presets keep their default preset.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrastlab.experiments import grid as cmp
from contrastlab.experiments import recipes as rcp
from contrastlab.platform.errors import ConfigError
from contrastlab.platform.plugins import get_task_plugin
from contrastlab.platform.rundir import RunDir
from contrastlab.platform.task import TaskPlugin


@dataclass
class Plan:
    """The expanded grid of one ``platform compare`` call."""

    title: str
    """``curl: infonce, dcl`` or ``recipe dcl-table3 (curl)``."""
    plugin: TaskPlugin
    """The task plugin instance."""
    preset: str
    """The preset every run uses."""
    points: list[cmp.GridPoint]
    """Every run, in order."""
    default_out: Path
    """Output directory when ``--out`` is not given."""
    rows: list[str] | None = None
    """Table row keys (a recipe's; ``--rows`` wins)."""
    spec: dict[str, Any] = field(default_factory=dict)
    """What ``compare.json`` records (the runs are added by the caller)."""
    about: str = ""
    """A recipe's description and source, one line (``--dry-run`` prints it); empty without a recipe."""
    warnings: list[str] = field(default_factory=list)
    """``warning: ...`` lines ``platform compare`` prints under its header (e.g. tuning budgets that differ)."""


def require_preset(plugin: TaskPlugin, preset: str | None, command: str = "compare") -> str:
    """The preset to use without a recipe: the given one, or the plugin's default where that is allowed (see
    the module docstring); otherwise a :class:`ConfigError` that names the choices (for ``command``
    ``compare``, the plugin's recipes too; ``platform tune`` has no ``--recipe``)."""
    if preset is not None:
        return preset
    if not plugin.gpu_presets:
        return plugin.default_preset
    recipes = [name for name, r in rcp.BUILTIN.items() if r.get("plugin") == plugin.name]
    also = f", or --recipe {' / '.join(recipes)}" if recipes and command == "compare" else ""
    gpu = ", ".join(sorted(plugin.gpu_presets))
    what = f"a {plugin.name} comparison" if command == "compare" else f"platform {command} --plugin {plugin.name}"
    raise ConfigError(
        f"--preset is required for {what} (its default '{plugin.default_preset}' only checks "
        f"that training runs); choose one of: {', '.join(plugin.presets)} (GPU-sized: {gpu}){also}"
    )


def default_out(
    plugin: str,
    preset: str | None,
    losses: Sequence[str],
    sets: Sequence[tuple[str, str]],
    axes: Sequence[cmp.GridAxis],
) -> Path:
    """``compare/<plugin>-<hash>``: the same grid (seeds aside) always maps to the same directory, so a
    repeated command resumes and ``--seeds 5`` after ``--seeds 3`` reuses the three finished seeds. The order of
    the ``--loss`` names, ``--set`` options, ``--grid`` axes and their values does not matter. A folder named by an
    earlier version, whose hash depended on that order, is still found (when the new name does not exist yet)."""
    grid = sorted([a.key, sorted(a.values)] for a in axes)
    out = _compare_dir(plugin, [plugin, preset, sorted(losses), sorted(sets), grid])
    typed_grid = [[a.key, list(a.values)] for a in axes]
    as_typed = _compare_dir(plugin, [plugin, preset, list(losses), sorted(sets), typed_grid])
    return as_typed if as_typed != out and as_typed.is_dir() and not out.exists() else out


def _compare_dir(plugin: str, ident: list) -> Path:
    """``compare/<plugin>-<first 8 hex digits of the SHA-1 of ident as JSON>``."""
    return Path("compare") / f"{plugin}-{hashlib.sha1(json.dumps(ident).encode()).hexdigest()[:8]}"


def make_plan(
    plugin: str | None,
    loss: str | None,
    recipe: str | None,
    seeds: int | None,
    seed_list: str | None,
    preset: str | None,
    sets: Sequence[tuple[str, str]],
    grid: Sequence[str],
) -> Plan:
    """Expand ``--plugin/--loss/--grid`` or ``--recipe`` (with the ``--seeds``, ``--preset`` and ``--set`` that
    override it) into a :class:`Plan`; input errors are one-line :class:`ConfigError`s."""
    if recipe is None:
        if plugin is None or loss is None:
            raise ConfigError("give --plugin and --loss (e.g. --plugin simclr --loss infonce,dcl), or --recipe NAME")
        losses = cmp.parse_losses(loss)
        seed_values = cmp.parse_seeds(seeds, seed_list)
        axes = [cmp.parse_grid(g) for g in grid]
        task = get_task_plugin(plugin)
        chosen = require_preset(task, preset)
        points = cmp.expand_grid(task.name, losses, seed_values, preset=chosen, sets=sets, axes=axes)
        spec = {
            "plugin": task.name,
            "losses": losses,
            "seeds": seed_values,
            "sets": [f"{k}={v}" for k, v in sets],
            "grid": [f"{a.key}={','.join(a.values)}" for a in axes],
        }
        out = default_out(task.name, chosen, losses, sets, axes)
        return Plan(f"{task.name}: {', '.join(losses)}", task, chosen, points, out, None, spec)

    if loss is not None or grid:
        raise ConfigError("--recipe fixes the losses and the grid; drop --loss/--grid (use --set to change a value)")
    r = rcp.load_recipe(recipe)
    if plugin is not None and plugin != r.plugin:
        raise ConfigError(f"--plugin {plugin} does not match recipe {r.name}, which runs plugin '{r.plugin}'")
    task = get_task_plugin(r.plugin)
    seed_values = cmp.parse_seeds(seeds if seeds is not None or seed_list is not None else r.seeds, seed_list)
    chosen = preset or r.preset
    points = rcp.expand_recipe(r, seed_values, preset=chosen, sets=sets)
    spec = {
        "plugin": task.name,
        "recipe": r.name,
        "recipe_definition": r.definition,
        "losses": list(dict.fromkeys(p.loss for p in points)),
        "seeds": seed_values,
        "sets": [f"{k}={v}" for k, v in sets],
    }
    out = Path("compare") / rcp.recipe_out_name(r, chosen, sets)
    rows = list(r.rows) if r.rows is not None else None
    about = " ".join(part for part in (r.description, f"(source: {r.source})" if r.source else "") if part)
    return Plan(f"recipe {r.name} ({task.name})", task, chosen, points, out, rows, spec,
                f"recipe {r.name}: {about}" if about else "")


def eta_lines(
    plan: Plan, pending: Sequence[cmp.GridPoint], configs: dict[str, Any], slots: Sequence[str | None],
    out: Path | None = None,
) -> list[str]:
    """The ETA line (and a warning when a GPU-sized preset would run on a CPU) for the runs still to do; a run to
    resume counts only the part after its checkpoint (``run.json``'s ``progress``), when ``out`` is given."""
    if not pending:
        return ["ETA: nothing to run (every run is finished)"]
    done = None if out is None else [RunDir(p.run_dir(out)).progress() for p in pending]
    seconds, kinds = cmp.estimate_wall_time(pending, configs, slots, plan.plugin, done)
    n = len(pending)
    if seconds is None:
        lines = [f"ETA unknown for {cmp.count(n, 'run')} (plugin '{plan.plugin.name}' gives no time estimate)"]
    else:
        where, eta = " and ".join(kinds), cmp.fmt_duration(seconds)
        lines = [f"ETA ≈ {eta} for {cmp.count(n, 'run')} on {where}, {len(slots)} at a time (plugin's estimate)"]
    if plan.preset in plan.plugin.gpu_presets and kinds == ["cpu"]:
        lines.append(
            f"warning: preset '{plan.preset}' is sized for a GPU but runs on the CPU here; "
            f"for a quick check use --preset {plan.plugin.default_preset}"
        )
    return lines


def make_tuned_plan(
    dirs: Sequence[Path], seeds: int | None, seed_list: str | None, sets: Sequence[tuple[str, str]]
) -> Plan:
    """``platform compare --tuned DIR ...``: each DIR's ``best.json`` (written by ``platform tune``) is one loss at
    its tuned values, run on seeds the tuning never used (``--seeds N``: the N seeds after the largest tuning
    seed; ``--seed-list``: exactly those, none of them a tuning seed). A ``--set`` of a tuned key is refused (it
    would silently lose to the tuned value)."""
    records = [_read_tuned(Path(d)) for d in dirs]
    kinds = {(r["plugin"], r["preset"]) for r in records}
    if len(kinds) != 1:
        shown = "; ".join(f"{d}: {r['plugin']}, preset {r['preset']}" for d, r in zip(dirs, records, strict=True))
        raise ConfigError(f"--tuned: the studies differ in plugin or preset ({shown}); compare like with like")
    shared = {d: sorted(s for s in r.get("sets", []) if not s.startswith("loss."))
              for d, r in zip(dirs, records, strict=True)}
    if len({tuple(v) for v in shared.values()}) > 1:  # loss.* keys may differ: each loss has its own
        shown = "; ".join(f"{d}: {' '.join(v) or 'none'}" for d, v in shared.items())
        raise ConfigError(f"--tuned: the studies were tuned with different --set values ({shown}); "
                          "compare like with like")
    losses = [r["loss"] for r in records]
    for i, loss in enumerate(losses):
        if loss in losses[:i]:
            first = dirs[losses.index(loss)]
            raise ConfigError(f"--tuned: {first} and {dirs[i]} both tuned loss {loss}; compare their best.json values "
                              "by hand, or tune once more")
    plugin_name, preset = kinds.pop()
    used = {int(s) for r in records for s in r.get("seeds", [])}
    if seed_list is not None:
        seed_values = cmp.parse_seeds(None, seed_list)
        if used & set(seed_values):
            raise ConfigError(f"--seed-list {seed_list}: seeds {sorted(used & set(seed_values))} were used for tuning")
    else:
        n = cmp.parse_seeds(seeds, None)
        seed_values = [max(used, default=0) + s for s in n]
    for key, _ in sets:
        for d, r in zip(dirs, records, strict=True):
            if key in r["params"]:
                value = cmp.display_value(str(r["params"][key]))
                raise ConfigError(f"--set {key}: tuned in {d} ({value}); drop it or tune again")
    task = get_task_plugin(plugin_name)
    extra = [f"{k}={v}" for k, v in sets]
    points = [
        cmp.GridPoint(task.name, r["loss"], s, preset, (*r.get("sets", []), *extra), tuple(r["params"].items()))
        for r in records
        for s in seed_values
    ]
    ident = json.dumps([sorted(str(Path(d).resolve()) for d in dirs), extra])
    budgets = {str(d): r.get("trials") for d, r in zip(dirs, records, strict=True)}  # None: a best.json before it
    spec = {"plugin": task.name, "tuned": [str(d) for d in dirs], "losses": losses, "seeds": seed_values,
            "sets": extra, "trials": budgets}  # fmt: skip
    out = Path("compare") / f"tuned-{task.name}-{hashlib.sha1(ident.encode()).hexdigest()[:8]}"
    known = {d: n for d, n in budgets.items() if isinstance(n, int)}
    shown = [f"{loss} ({cmp.count(known[d], 'trial')})" if d in known else loss
             for loss, d in zip(losses, budgets, strict=True)]
    warnings = []
    if len(set(known.values())) > 1:
        each = ", ".join(f"{d}: {n}" for d, n in known.items())
        warnings.append(f"warning: the studies ran different numbers of trials ({each}); a loss tuned longer can "
                        "win by its budget alone: give every loss the same --trials")
    # rows=[]: one table row; each loss is a column labelled with its tuned values (they differ per loss)
    return Plan(f"tuned {task.name}: {', '.join(shown)}", task, preset, points, out, [], spec, warnings=warnings)


def _read_tuned(folder: Path) -> dict[str, Any]:
    """The ``best.json`` record of a ``platform tune`` output folder; a missing or damaged one is one line."""
    path = folder / "best.json"
    if not path.is_file():
        raise ConfigError(f"--tuned {folder}: no best.json (run `platform tune ... --out {folder}` first)")
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = None
    problem = _tuned_record_problem(record)
    if problem:
        raise ConfigError(f"--tuned {folder}: {path} is not a `platform tune` record ({problem}); run platform tune "
                          "again")
    return record


def _tuned_record_problem(record: Any) -> str:
    """What is wrong with a ``best.json`` value, or ``""``."""
    if record is None:
        return "not valid JSON"
    if not isinstance(record, dict):
        return "not a JSON object"
    missing = [key for key in ("plugin", "preset", "loss", "params") if key not in record]
    if missing:
        return f"missing {', '.join(missing)}"
    wrong = next((key for key in ("plugin", "preset", "loss") if not isinstance(record[key], str)), None)
    if wrong:
        return f"{wrong} is not a string"
    if not isinstance(record["params"], dict):
        return "params is not a mapping"
    for key, kind, label in (("sets", str, "strings"), ("seeds", int, "integers")):
        value = record.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
            return f"{key} is not a list of {label}"
    return ""

