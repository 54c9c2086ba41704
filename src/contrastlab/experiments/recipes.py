"""Recipes for ``platform compare --recipe NAME|FILE``: a whole published experiment as one named grid.

A recipe fixes the plugin, the preset, the default number of seeds, the task rows (each a set of overrides,
e.g. one DeepMind Control task) and one or more *parts*: losses with their own fixed overrides and grid axes.
Each part is expanded on each task exactly as ``--loss``/``--set``/``--grid`` are (:func:`.compare.expand_grid`),
so a ``loss.<hp>`` key reaches only the losses that have ``<hp>``.

On the command line, ``--seeds``/``--seed-list`` and ``--preset`` replace the recipe's, and ``--set key=value``
wins over the recipe wherever ``key`` appears: in the fixed overrides, in the task rows, and in the grid axes
(which collapse to that one value). Identical configurations are run once.

A recipe file is YAML with the keys of :data:`FIELDS`; the built-in recipes (:data:`BUILTIN`) are written in the
same form.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrastlab.experiments.grid import GridAxis, GridPoint, expand_grid, key_applies, loss_hparam_names
from contrastlab.platform.errors import ConfigError, UnknownNameError

FIELDS = {
    "name": "recipe name (default: the file name)",
    "description": "one line shown by --dry-run",
    "source": "the paper and table it reproduces",
    "plugin": "task plugin",
    "preset": "preset of every run",
    "seeds": "default number of seeds, 1..N",
    "sets": "fixed overrides {key: value} of every run",
    "tasks": "list of task rows, each {key: value, ...}",
    "rows": "config keys that name the table rows",
    "parts": "list of {losses: [...], sets: {key: value}, grid: {key: [values]}}",
}
"""Keys of a recipe file and what they hold (``plugin``, ``preset`` and ``parts`` are required)."""

DCL_TABLE3: dict[str, Any] = {
    "name": "dcl-table3",
    "description": "CURL × debiased contrastive loss on six DeepMind Control tasks at 100k environment steps",
    "source": "Chuang et al. 2020, Debiased Contrastive Learning, Table 3 (CURL, 3 runs, mean ± std)",
    "plugin": "curl",
    "preset": "paper",
    "seeds": 3,
    # CURL's settings as the paper ran them; env.action_repeat stays empty, so each task gets CURL's value
    # (cartpole 8, finger and walker 2, cheetah, reacher and ball_in_cup 4).
    "sets": {"agent.batch_size": 512, "train.env_frames": 100_000},
    "tasks": [
        {"env.domain": "cartpole", "env.task": "swingup"},
        {"env.domain": "cheetah", "env.task": "run"},
        {"env.domain": "finger", "env.task": "spin"},
        {"env.domain": "walker", "env.task": "walk"},
        {"env.domain": "reacher", "env.task": "easy"},
        {"env.domain": "ball_in_cup", "env.task": "catch"},
    ],
    "rows": ["env.domain", "env.task"],
    "parts": [
        {"losses": ["infonce"], "sets": {"agent.num_positives": 1}},  # "Biased (CURL)"
        {"losses": ["dcl"], "grid": {"agent.num_positives": [1, 2], "loss.tau_plus": [0.01, 0.05, 0.1]}},
    ],
}
"""DCL Table 3: 6 tasks × (1 InfoNCE + 2 M × 3 τ+ DCL) = 42 configurations (the paper has no M = 2, τ+ = 0.05)."""

BUILTIN: dict[str, dict[str, Any]] = {"dcl-table3": DCL_TABLE3}
"""Recipes shipped with contrastlab, by name."""


@dataclass(frozen=True)
class RecipePart:
    """Losses run with their own fixed overrides and grid axes."""

    losses: tuple[str, ...]
    """Loss names."""
    sets: tuple[tuple[str, str], ...] = ()
    """Fixed ``(key, value)`` overrides of this part."""
    grid: tuple[GridAxis, ...] = ()
    """Grid axes of this part (they multiply)."""


@dataclass(frozen=True)
class Recipe:
    """A named grid: tasks × parts × seeds on one plugin and preset."""

    name: str
    """Recipe name."""
    plugin: str
    """Task plugin."""
    preset: str
    """Preset of every run (``--preset`` replaces it)."""
    parts: tuple[RecipePart, ...]
    """What runs on every task."""
    seeds: int = 1
    """Default number of seeds (``--seeds``/``--seed-list`` replace it)."""
    sets: tuple[tuple[str, str], ...] = ()
    """Fixed overrides of every run."""
    tasks: tuple[tuple[tuple[str, str], ...], ...] = ((),)
    """Task rows, each a tuple of ``(key, value)`` overrides."""
    rows: tuple[str, ...] | None = None
    """Keys that name the table rows (``--rows`` replaces them)."""
    description: str = ""
    """One line."""
    source: str = ""
    """The paper and table it reproduces."""
    definition: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The mapping it was read from (recorded in ``compare.json``)."""

    @property
    def digest(self) -> str:
        """Eight hex digits of the definition (names the default output directory)."""
        return hashlib.sha1(json.dumps(self.definition, sort_keys=True).encode()).hexdigest()[:8]


def _text(value: Any) -> str:
    """A YAML scalar as ``--set`` text (``true``, ``0.01``, ``100000``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)) or value is None:
        raise ConfigError(f"expected a single value, got {value!r}")
    return str(value)


def _mapping(data: Any, where: str) -> Mapping[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping of key: value, got {type(data).__name__}")
    return data


def _pairs(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    try:
        return tuple((str(k), _text(v)) for k, v in _mapping(data, where).items())
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _part(data: Any, where: str) -> RecipePart:
    data = _mapping(data, where)
    unknown = sorted(set(data) - {"losses", "sets", "grid"})
    if unknown:
        raise ConfigError(f"{where}: unknown key '{unknown[0]}'; valid: losses, sets, grid")
    losses = data.get("losses")
    if isinstance(losses, str):
        losses = [s.strip() for s in losses.split(",")]
    if not losses or not isinstance(losses, list):
        raise ConfigError(f"{where}.losses: give a non-empty list of loss names")
    axes = []
    for key, values in _mapping(data.get("grid"), f"{where}.grid").items():
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ConfigError(f"{where}.grid.{key}: give at least one value")
        axes.append(GridAxis(str(key), tuple(_text(v) for v in values)))
    return RecipePart(tuple(str(x) for x in losses), _pairs(data.get("sets"), f"{where}.sets"), tuple(axes))


def recipe_from_dict(data: Mapping[str, Any], name: str = "recipe") -> Recipe:
    """Validate and build a :class:`Recipe` from its mapping form (:data:`FIELDS`); errors are one line."""
    data = _mapping(data, f"recipe {name}")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ConfigError(f"recipe {name}: unknown key '{unknown[0]}'; valid: {', '.join(FIELDS)}")
    for key in ("plugin", "preset", "parts"):
        if not data.get(key):
            raise ConfigError(f"recipe {name}: '{key}' is required: {FIELDS[key]}")
    if not isinstance(data["parts"], list):
        raise ConfigError(f"recipe {name}: 'parts' must be a list ({FIELDS['parts']})")
    tasks = data.get("tasks") or [{}]
    if not isinstance(tasks, list):
        raise ConfigError(f"recipe {name}: 'tasks' must be a list ({FIELDS['tasks']})")
    seeds = data.get("seeds", 1)
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ConfigError(f"recipe {name}: 'seeds' must be an integer >= 1, got {seeds!r}")
    rows = data.get("rows")
    return Recipe(
        name=str(data.get("name") or name),
        plugin=str(data["plugin"]),
        preset=str(data["preset"]),
        parts=tuple(_part(p, f"recipe {name} parts[{i}]") for i, p in enumerate(data["parts"])),
        seeds=seeds,
        sets=_pairs(data.get("sets"), f"recipe {name} sets"),
        tasks=tuple(_pairs(t, f"recipe {name} tasks[{i}]") for i, t in enumerate(tasks)),
        rows=tuple(str(r) for r in rows) if rows is not None else None,
        description=str(data.get("description") or ""),
        source=str(data.get("source") or ""),
        definition=json.loads(json.dumps(dict(data))),
    )


def load_recipe(spec: str) -> Recipe:
    """A built-in recipe by name, or a recipe YAML file by path; unknown names list the valid ones."""
    if spec in BUILTIN:
        return recipe_from_dict(BUILTIN[spec], spec)
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        from contrastlab.platform.config import load_yaml_file

        if not path.is_file():
            raise ConfigError(f"recipe file not found: {path}; built-in recipes: {', '.join(BUILTIN)}")

        return recipe_from_dict(load_yaml_file(path), path.stem)
    from contrastlab.platform.registry import unknown_name_message

    raise UnknownNameError(unknown_name_message("recipe", spec, list(BUILTIN)) + " A recipe can also be a .yaml file.")


def expand_recipe(
    recipe: Recipe,
    seeds: Sequence[int],
    *,
    preset: str | None = None,
    sets: Sequence[tuple[str, str]] = (),
    hparams_of: Callable[[str], set[str]] = loss_hparam_names,
) -> list[GridPoint]:
    """Every grid point of ``recipe``: task-major, then part, then its grid, then seed (see the module docstring).

    ``sets`` (from ``--set``) win over the recipe wherever their key appears; a ``loss.<hp>`` key among them
    reaches only the parts whose losses have ``<hp>``, and is an error if no loss of the recipe has it.
    """
    override = dict(sets)
    hp = {loss: hparams_of(loss) for part in recipe.parts for loss in part.losses}
    # keys shared by every part (--set, the recipe's sets, its task rows): each must reach some loss of the recipe
    shared = [*override, *(k for k, _ in recipe.sets), *(k for task in recipe.tasks for k, _ in task)]
    for key in dict.fromkeys(shared):
        if not any(key_applies(key, hp[loss]) for loss in hp):
            valid = sorted({f"loss.{h}" for hs in hp.values() for h in hs})
            raise UnknownNameError(
                f"unknown key '{key}': no loss of recipe {recipe.name} ({', '.join(hp)}) has hyperparameter "
                f"'{key.split('.')[1]}'; valid loss keys: {', '.join(valid) or '(none)'}"
            )
    points: dict[tuple[str, str, int], GridPoint] = {}
    for task in recipe.tasks:
        task_keys = dict(task)
        for part in recipe.parts:

            def reaches(key: str, losses: Sequence[str] = part.losses) -> bool:
                return any(key_applies(key, hp[loss]) for loss in losses)

            # a shared loss.<hp> key reaches only the parts with a loss that has <hp>, as --set does
            mine = {k for k in override if reaches(k)}
            fixed = {k: v for k, v in recipe.sets if k not in task_keys and reaches(k)}
            fixed.update({k: v for k, v in part.sets if k not in task_keys})
            fixed.update({k: override[k] for k in mine})
            # one-value axes: they name the run
            axes = [GridAxis(k, (v,)) for k, v in task if k not in fixed and reaches(k)]
            axes += [a for a in part.grid if a.key not in fixed]
            expanded = expand_grid(
                recipe.plugin,
                part.losses,
                seeds,
                preset=preset or recipe.preset,
                sets=list(fixed.items()),
                axes=axes,
                hparams_of=hparams_of,
            )
            for p in expanded:
                points.setdefault((p.loss, p.config_hash, p.seed), p)
    return list(points.values())


def recipe_out_name(recipe: Recipe, preset: str, sets: Sequence[tuple[str, str]]) -> str:
    """``<recipe>-<hash>``: the default output directory name (the hash covers the definition, the preset and
    the ``--set`` overrides, not the seeds, so ``--seeds 5`` after ``--seeds 3`` reuses the finished runs)."""
    ident = json.dumps([recipe.digest, preset, sorted(sets)])
    return f"{recipe.name}-{hashlib.sha1(ident.encode()).hexdigest()[:8]}"
