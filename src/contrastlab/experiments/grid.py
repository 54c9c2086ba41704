"""``platform compare``: expand a loss × hyperparameter × seed grid and run it as separate processes.

Semantics (documented in ``docs/compare.md``):

* ``--grid key=v1,v2`` axes multiply; ``--loss a,b`` and the seeds multiply with them.
* A ``loss.<hp>`` key (in ``--grid`` or ``--set``) applies only to the losses that have hyperparameter
  ``<hp>``; the others run once per seed without it (DCL Table 3: a CURL/InfoNCE baseline column next to
  DCL at several τ+). A ``loss.<hp>`` key none of the chosen losses has is an error, as is any other key
  the plugin's config does not have.
* Each grid point is run as ``platform train ... --logdir OUT/runs --run-name NAME``; NAME is deterministic
  (readable slug of the grid values, a short hash of the whole configuration, ``-s<seed>``), so repeating the
  command finds the same directories (running them: :mod:`contrastlab.experiments.runner`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.platform.config import split_assignment
from contrastlab.platform.errors import ConfigError, DeviceError, UnknownNameError
from contrastlab.platform.rundir import RunDir

_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_RESERVED = {"seed": "--seeds/--seed-list", "loss.name": "--loss", "loss": "--loss"}
MAX_RUNS = 100_000
"""The most runs one ``compare`` command plans (losses × ``--grid`` values × seeds)."""


# ---------------------------------------------------------------------------------------------- parsing
@dataclass(frozen=True)
class GridAxis:
    """One ``--grid key=v1,v2,...`` axis: a dotted config key and its values (as typed)."""

    key: str
    """Dotted config path, e.g. ``loss.tau_plus`` or ``train.batch_size``."""
    values: tuple[str, ...]
    """Values in the order given; at least one, no duplicates."""


def check_key(key: str, option: str, spec: str) -> None:
    """Refuse a key that is not a dotted path, or one the grid sets itself (seed, loss), naming ``option``."""
    if not _KEY_RE.match(key):
        raise ConfigError(f"{option} '{spec}': bad key '{key}'; expected a dotted path like loss.tau_plus")
    if key in _RESERVED:
        raise ConfigError(f"{option} '{spec}': '{key}' cannot be set here; use {_RESERVED[key]}")


def parse_set(spec: str) -> tuple[str, str]:
    """One ``--set key=value`` of a grid as ``(key, raw value)`` (the core's parser, plus the grid's reserved
    keys); the value text is passed on to ``platform train`` unchanged."""
    if "=" not in spec:
        raise ConfigError(f"--set '{spec}': expected key=value, e.g. --set train.max_steps=50")
    key, value = split_assignment(spec, "--set")
    if not value:
        raise ConfigError(f"--set '{spec}': expected key=value, e.g. --set train.max_steps=50")
    check_key(key, "--set", spec)
    return key, value


def refuse_device_set(keys: Sequence[str], given: str | None) -> None:
    """Refuse a ``--set device=…`` when the runs also get a ``--device`` from ``given`` (``--devices``, Ray's
    ``--gpus-per-run``, tune's ``--device``): each run's ``platform train`` would refuse the pair."""
    if given and "device" in keys:
        raise ConfigError(f"--set device conflicts with {given}, which sets each run's device; give one of them")


def parse_grid(spec: str) -> GridAxis:
    """Parse one ``--grid key=v1,v2,...``; a missing ``=``, an empty or duplicated value raises."""
    if "=" not in spec:
        raise ConfigError(f"--grid '{spec}': expected key=v1,v2,..., e.g. --grid loss.tau_plus=0.01,0.05,0.1")
    key, raw = split_assignment(spec, "--grid")
    check_key(key, "--grid", spec)
    values = [v.strip() for v in raw.split(",")]
    if not raw.strip() or any(not v for v in values):
        raise ConfigError(f"--grid '{spec}': empty value; give comma-separated values like {key}=0.01,0.1")
    same = [_same_value(v) for v in values]  # 0.1 and 0.10 are one configuration, run under two names
    dupes = sorted({v for v, k in zip(values, same, strict=True) if same.count(k) > 1})
    if dupes:
        raise ConfigError(f"--grid '{spec}': duplicated value(s) {', '.join(dupes)}")
    return GridAxis(key, tuple(values))


def _same_value(value: str) -> object:
    """What a grid value means, for spotting duplicates: the number for numeric text (``0.1`` = ``0.10`` =
    ``1e-1``), else the text."""
    try:
        number = float(value)
    except ValueError:
        return value
    return number if math.isfinite(number) else value


def parse_losses(spec: str) -> list[str]:
    """Parse ``--loss a,b,c`` into a non-empty list of distinct names."""
    names = [n.strip() for n in spec.split(",")]
    if not spec.strip() or any(not n for n in names):
        raise ConfigError(f"--loss '{spec}': expected comma-separated loss names, e.g. --loss infonce,dcl")
    if len(set(names)) != len(names):
        raise ConfigError(f"--loss '{spec}': a loss is listed twice")
    return names


def parse_seeds(seeds: int | None, seed_list: str | None) -> list[int]:
    """``--seeds N`` → ``[1..N]``; ``--seed-list 1,2,3`` → those; neither → ``[1]``; both is an error."""
    if seeds is not None and seed_list is not None:
        raise ConfigError("--seeds and --seed-list are exclusive; give one of them")
    if seed_list is not None:
        try:
            out = [int(s) for s in seed_list.split(",")]
        except ValueError:
            raise ConfigError(f"--seed-list '{seed_list}': expected integers like 1,2,3") from None
        if len(set(out)) != len(out):
            raise ConfigError(f"--seed-list '{seed_list}': a seed is listed twice")
        return out
    if seeds is not None and seeds < 1:
        raise ConfigError(f"--seeds {seeds}: must be ≥ 1")
    return list(range(1, (seeds or 1) + 1))


def parse_devices(spec: str, available: int | None = None) -> list[str]:
    """``--devices 0,1`` → ``["cuda:0", "cuda:1"]``; indices must be distinct and < the visible CUDA count."""
    try:
        ids = [int(s) for s in spec.split(",")]
    except ValueError:
        raise ConfigError(f"--devices '{spec}': expected CUDA indices like --devices 0,1") from None
    if len(set(ids)) != len(ids) or any(i < 0 for i in ids):
        raise ConfigError(f"--devices '{spec}': indices must be distinct and ≥ 0")
    if available is None:
        import torch

        available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    bad = [i for i in ids if i >= available]
    if bad:
        valid = f"0..{available - 1}" if available else "none (no CUDA device is visible; use --jobs N)"
        raise DeviceError(f"--devices '{spec}': {len(ids)} requested, {available} visible; valid: {valid}")
    return [f"cuda:{i}" for i in ids]


def device_slots(devices: Sequence[str], runs_per_gpu: int = 1) -> list[str]:
    """``runs_per_gpu`` concurrent-run slots per device, spread round-robin: ``(["cuda:0", "cuda:1"], 2)`` →
    ``["cuda:0", "cuda:1", "cuda:0", "cuda:1"]`` (the runner fills free slots in order, so the first runs land
    on distinct GPUs)."""
    if runs_per_gpu < 1:
        raise ConfigError(f"--runs-per-gpu {runs_per_gpu}: must be ≥ 1")
    return [d for _ in range(runs_per_gpu) for d in devices]


# ---------------------------------------------------------------------------------------------- grid
def count(n: int, noun: str) -> str:
    """``1 run``, ``3 runs``: a count with its noun in the right number (nouns with a plain ``s`` plural)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def display_value(value: str) -> str:
    """A config value as people read it: a number with more than 4 significant digits rounded to 4
    (``0.05123456789012345``, as ``platform tune`` samples them, → ``0.05123``); anything else as written
    (``0.05``, ``1e-3``, ``200``, ``cosine``). Only for display (labels, tables, run directory names): runs always
    get the exact value."""
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number) or re.fullmatch(r"[+-]?\d+", value.strip()):
        return value
    short = f"{number:.4g}"
    return value if float(short) == number else short


@dataclass(frozen=True)
class GridPoint:
    """One run of the grid: plugin, loss, seed and the ``--set`` overrides that apply to this loss."""

    plugin: str
    """Task plugin name."""
    loss: str
    """Loss name."""
    seed: int
    """Random seed."""
    preset: str | None
    """Preset name (``None``: the plugin's default)."""
    sets: tuple[str, ...] = ()
    """Fixed ``key=value`` overrides (from ``--set``) that apply to this loss."""
    grid: tuple[tuple[str, str], ...] = ()
    """Grid coordinates ``(key, value)`` that apply to this loss."""

    @property
    def overrides(self) -> list[str]:
        """Every ``key=value`` passed as ``--set`` to ``platform train`` (fixed ones, then grid ones)."""
        return [*self.sets, *(f"{k}={v}" for k, v in self.grid)]

    @property
    def config_hash(self) -> str:
        """Six hex digits identifying the configuration without the seed (shared by all seeds of it)."""
        ident = json.dumps([self.plugin, self.loss, self.preset, sorted(self.overrides)])
        return hashlib.sha1(ident.encode()).hexdigest()[:6]

    @property
    def label(self) -> str:
        """Human-readable configuration name, e.g. ``dcl tau_plus=0.05``."""
        parts = [f"{k.split('.')[-1] if k.startswith('loss.') else k}={display_value(v)}" for k, v in self.grid]
        return " ".join([self.loss, *parts])

    @property
    def run_name(self) -> str:
        """Deterministic run directory name: ``<slug>-<hash>-s<seed>`` (e.g. ``tau_plus=0.05-1a2b3c-s1``)."""
        slug = "_".join(f"{k.split('.')[-1]}={display_value(v)}" for k, v in self.grid) or "base"
        slug = re.sub(r"[^A-Za-z0-9._=+-]", "-", slug)[:60]
        return f"{slug}-{self.config_hash}-s{self.seed}"

    def run_dir(self, out: Path) -> Path:
        """``OUT/runs/<plugin>/<loss>/<run_name>`` (the layout ``platform train --run-name`` creates)."""
        return RunDir.location(Path(out) / "runs", self.plugin, self.loss, self.run_name).path

    def log_path(self, out: Path) -> Path:
        """``OUT/logs/<plugin>/<loss>/<run_name>.log``: the run's console output (local and Ray backends)."""
        return Path(out) / "logs" / self.plugin / self.loss / f"{self.run_name}.log"


def loss_hparam_names(loss: str) -> set[str]:
    """Hyperparameter names of a registered loss (unknown loss names raise with the valid ones)."""
    from contrastlab.platform.plugins import registry

    return {hp.name for hp in registry("loss").get(loss).hyperparameters}


def key_applies(key: str, hparams: set[str]) -> bool:
    """Whether ``key`` applies to a loss with hyperparameters ``hparams`` (non-``loss.`` keys always do)."""
    if not key.startswith("loss."):
        return True
    return key.split(".")[1] in hparams


def _owners_hint(hp_name: str) -> str:
    """``; losses with tau_plus: dcl, hcl (choose one with --loss)``, from the registered losses, or ``""``."""
    from contrastlab.platform.plugins import registry

    owners = registry("loss").having(hp_name)
    return f"; losses with {hp_name}: {', '.join(owners)} (choose one with --loss)" if owners else ""


def expand_grid(
    plugin: str,
    losses: Sequence[str],
    seeds: Sequence[int],
    *,
    preset: str | None = None,
    sets: Sequence[tuple[str, str]] = (),
    axes: Sequence[GridAxis] = (),
    hparams_of: Callable[[str], set[str]] = loss_hparam_names,
) -> list[GridPoint]:
    """All grid points, loss-major then grid values (first axis slowest) then seed.

    Each loss gets only the ``--set``/``--grid`` keys that apply to it (see :func:`key_applies`), so
    ``infonce`` runs once per seed while ``dcl`` runs once per τ+ and seed. A ``loss.*`` key no chosen
    loss has is an :class:`UnknownNameError`.
    """
    keys = [k for k, _ in sets] + [a.key for a in axes]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ConfigError(f"key(s) {', '.join(dupes)} given more than once across --set/--grid")
    if not losses or not seeds:
        raise ConfigError("the grid is empty: give at least one --loss and one seed")
    hp = {loss: hparams_of(loss) for loss in losses}
    for key in keys:
        if not any(key_applies(key, hp[loss]) for loss in losses):
            valid = sorted({f"loss.{h}" for loss in losses for h in hp[loss]})
            hp_name = key.split(".")[1]
            which = f"loss {losses[0]} has no" if len(losses) == 1 else f"none of the losses {', '.join(losses)} has"
            raise UnknownNameError(
                f"unknown key '{key}': {which} hyperparameter '{hp_name}'; "
                f"valid loss keys: {', '.join(valid) or '(none)'}{_owners_hint(hp_name)}"
            )
    total = sum(math.prod(len(a.values) for a in axes if key_applies(a.key, hp[loss])) for loss in losses) * len(seeds)
    if total > MAX_RUNS:  # expanding (and validating) a million points alone took minutes
        raise ConfigError(f"the grid has {total:,} runs (losses × --grid values × seeds), more than the {MAX_RUNS:,} "
                          "one command plans; split it into several commands")
    points: list[GridPoint] = []
    for loss in losses:
        fixed = tuple(f"{k}={v}" for k, v in sets if key_applies(k, hp[loss]))
        mine = [a for a in axes if key_applies(a.key, hp[loss])]
        for combo in itertools.product(*(a.values for a in mine)):
            coords = tuple(zip((a.key for a in mine), combo, strict=True))
            points.extend(GridPoint(plugin, loss, s, preset, fixed, coords) for s in seeds)
    return points


def validate_points(points: Sequence[GridPoint]) -> dict[str, Any]:
    """Resolve the config of every distinct configuration before anything runs.

    Raises the config layer's error for an unknown key or a bad value, and :class:`IncompatibleError` for a
    label-aware loss the plugin's batches cannot feed. Returns ``{config_hash: resolved config}``.
    """
    from contrastlab.platform.config import resolve_config
    from contrastlab.platform.plugins import registry
    from contrastlab.platform.preflight import preflight

    configs: dict[str, Any] = {}
    instances: dict[str, Any] = {}
    for p in points:
        if p.config_hash in configs:
            continue
        if p.plugin not in instances:
            instances[p.plugin] = registry("plugin").get(p.plugin).factory()
        plugin = instances[p.plugin]
        config = resolve_config(plugin, preset=p.preset, sets=p.overrides, loss=p.loss)
        preflight(plugin, config)  # the same checks as `platform train` and Run.create
        configs[p.config_hash] = config
    return configs


def drop_loss_free_repeats(
    points: Sequence[GridPoint], configs: dict[str, Any], plugin: Any,
    started: Callable[[GridPoint], bool] | None = None,
) -> list[GridPoint]:
    """``points`` without the repeats of a configuration that trains no loss (``plugin.uses_loss`` false, e.g.
    pu's end-to-end baseline): the same preset, non-loss overrides and seed under another ``--loss`` is the same
    run, so one is kept, in the place of the first: one that ``started`` (its run folder exists, so an output made
    with the losses in another order is resumed, not trained again), else the one whose loss name (then overrides)
    sort first (``configs``: :func:`validate_points`'s result)."""
    groups: dict[tuple[Any, ...], list[GridPoint]] = {}
    keys: list[tuple[Any, ...] | None] = []
    for p in points:
        key = None
        if not plugin.uses_loss(configs[p.config_hash]):
            key = (p.plugin, p.preset, tuple(sorted(o for o in p.overrides if not o.startswith("loss."))), p.seed)
            groups.setdefault(key, []).append(p)
        keys.append(key)
    def preference(p: GridPoint) -> tuple[bool, str, list[str]]:
        return not (started is not None and started(p)), p.loss, sorted(p.overrides)

    chosen = {key: min(group, key=preference) for key, group in groups.items()}
    kept, emitted = [], set()
    for p, key in zip(points, keys, strict=True):
        if key is None:
            kept.append(p)
        elif key not in emitted:
            emitted.add(key)
            kept.append(chosen[key])
    return kept


# ---------------------------------------------------------------------------------------------- ETA
def fmt_duration(seconds: float) -> str:
    """``45 s``, ``1 min 28 s`` (under 10 min), ``12 min``, ``3.4 h``, ``2.5 days``."""
    if seconds >= 48 * 3600:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 599.5:
        return f"{seconds / 60:.0f} min"
    if seconds >= 59.5:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    return f"{seconds:.0f} s"


RUN_START_S = 3.0
"""Seconds a run spends before training: its process starts and imports torch and the plugin (2.2 s on the idle
2-core VM for recsys smoke, which then trained 3.6 s); added to each run's estimate."""


def estimate_wall_time(
    points: Sequence[GridPoint], configs: dict[str, Any], slots: Sequence[str | None], plugin: Any,
    done: Sequence[float] | None = None,
) -> tuple[float | None, list[str]]:
    """``(seconds until the whole list has run, devices estimated for)`` from the plugin's
    :meth:`~contrastlab.platform.task.TaskPlugin.estimate_seconds`, scheduling the runs in order on ``slots`` as
    the runner does (each starts on the first free slot), each with :data:`RUN_START_S` added. ``done`` (one per
    point, 0 to 1: :meth:`RunDir.progress`) is the part a resumed run has already trained: only the rest is
    counted. The seconds are ``None`` when the plugin gives no estimate (the devices are still listed)."""
    from contrastlab.platform.run import resolve_device

    free = [0.0] * max(1, len(slots))
    kinds: dict[str, None] = {}
    known = True
    for i, p in enumerate(points):
        slot = min(range(len(free)), key=free.__getitem__)
        config = configs[p.config_hash]
        device = slots[slot] if slots and slots[slot] else str(resolve_device(config.device))
        kind = "cuda" if device.startswith("cuda") else "cpu"
        seconds = plugin.estimate_seconds(config, kind)
        kinds[kind] = None
        known = known and seconds is not None
        left = 1.0 - done[i] if done is not None else 1.0
        free[slot] += (float(seconds) * left if seconds is not None else 0.0) + RUN_START_S
    return (max(free) if known else None), list(kinds)
