"""``platform tune``: an Optuna search over config keys, each trial one or more ``platform train`` processes.

* **Search space.** ``--search KEY=DIST`` (repeatable). DIST is ``uniform(a,b)``, ``log-uniform(a,b)``,
  ``int(a,b)``, ``log-int(a,b)`` or ``choice(v1,v2,...)``. KEY is any config key the plugin's config has;
  a ``loss.*`` key must be a hyperparameter of the chosen loss.
* **Objective.** The plugin's primary metric in ``summary.json``, averaged over ``--seeds-per-trial`` seeds
  (seeds 1..N, the same for every trial); maximised when the plugin says higher is better, else minimised.
* **Pruning.** While a trial's *first* seed trains, the driver reads the primary metric's curve (or
  ``--prune-on TAG``'s) from the run's
  ``metrics.jsonl`` (what the plugin logs through ``Run.log`` at each evaluation) every ``poll`` seconds and
  reports each new point to Optuna with ``trial.report(value, step)``; when the pruner (``median``: Optuna's
  ``MedianPruner`` with 5 start-up trials) says so, the process is stopped and the trial is ``PRUNED``. The
  other seeds run only for trials that survived. On the Ray backend trials are not pruned (the runs may be on
  other machines).
* **Storage and resume.** The study lives in ``--storage`` (default ``sqlite:///OUT/study.db``; any SQLAlchemy
  URL Optuna accepts), named ``--study`` (default: ``<plugin>-<loss>``). A repeated command (or a worker on
  another machine with the same storage) continues it: trials that are ``COMPLETE`` or ``PRUNED`` count towards
  ``--trials``; a trial left ``RUNNING`` by a dead process of this machine is marked ``FAIL`` and its parameters
  are queued again.
"""

from __future__ import annotations

import math
import os
import re
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.experiments import grid as cmp
from contrastlab.experiments import runner
from contrastlab.experiments.results import load_curves
from contrastlab.platform.errors import ConfigError

INSTALL_HINT = "platform tune needs Optuna: pip install 'contrastlab[tune]'"
_DIST_RE = re.compile(r"^(?P<kind>[a-z-]+)\((?P<args>[^()]*)\)$")
_NUMERIC = {"uniform": float, "log-uniform": float, "int": int, "log-int": int}


@dataclass(frozen=True)
class SearchParam:
    """One ``--search KEY=DIST``."""

    key: str
    """Dotted config key, e.g. ``loss.tau_plus``."""
    kind: str
    """``uniform``, ``log-uniform``, ``int``, ``log-int`` or ``choice``."""
    args: tuple[Any, ...]
    """``(low, high)`` for the numeric kinds, the values (strings) for ``choice``."""

    def suggest(self, trial: Any) -> str:
        """Sample a value with ``trial`` and return it as ``--set`` text."""
        if self.kind == "choice":
            return str(trial.suggest_categorical(self.key, list(self.args)))
        low, high = self.args
        log = self.kind.startswith("log-")
        if self.kind.endswith("int"):
            return str(trial.suggest_int(self.key, low, high, log=log))
        return repr(float(trial.suggest_float(self.key, low, high, log=log)))

    def example(self) -> str:
        """A value inside the range (to validate the key before anything runs)."""
        return str(self.args[0])


def parse_search(spec: str) -> SearchParam:
    """Parse ``KEY=DIST``; a one-line :class:`ConfigError` for anything malformed."""
    hint = "e.g. --search 'loss.tau_plus=log-uniform(0.001,0.3)'"
    if "=" not in spec:
        raise ConfigError(f"--search '{spec}': expected KEY=DIST, {hint}")
    key, dist = (part.strip() for part in spec.split("=", 1))
    cmp.parse_set(f"{key}=x")  # the grid's key checks (dotted path, reserved keys)
    m = _DIST_RE.match(dist.replace(" ", ""))
    kinds = "uniform(a,b), log-uniform(a,b), int(a,b), log-int(a,b), choice(v1,v2,...)"
    if not m or (m["kind"] not in _NUMERIC and m["kind"] != "choice"):
        raise ConfigError(f"--search '{spec}': bad distribution '{dist}'; use one of {kinds}")
    args = [a for a in m["args"].split(",")]
    if any(not a for a in args):
        raise ConfigError(f"--search '{spec}': empty argument in '{dist}'")
    if m["kind"] == "choice":
        if len(set(args)) != len(args):
            raise ConfigError(f"--search '{spec}': duplicated choice in '{dist}'")
        return SearchParam(key, "choice", tuple(args))
    cast = _NUMERIC[m["kind"]]
    try:
        low, high = (cast(a) for a in args) if len(args) == 2 else (None, None)
    except ValueError:
        raise ConfigError(f"--search '{spec}': {m['kind']} needs two {cast.__name__} bounds, got '{dist}'") from None
    if low is None or not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise ConfigError(f"--search '{spec}': {m['kind']}(low,high) needs two finite bounds with low < high")
    if m["kind"].startswith("log-") and low <= 0:
        raise ConfigError(f"--search '{spec}': {m['kind']} needs low > 0")
    return SearchParam(key, m["kind"], (low, high))


def import_optuna() -> Any:
    """``optuna`` (quiet), or a one-line :class:`ConfigError` saying how to install it."""
    try:
        import optuna
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def check_storage(url: str) -> None:
    """Refuse a storage URL SQLAlchemy cannot use (syntax, driver, missing SQLite folder) before writing."""
    try:
        from sqlalchemy import create_engine
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        create_engine(parsed)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"--storage {url}: not a usable database URL ({first[:200]})") from None
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        folder = Path(parsed.database).parent
        if not folder.is_dir():
            raise ConfigError(f"--storage {url}: folder {folder} does not exist")


@dataclass
class TuneSpec:
    """Everything one ``platform tune`` worker needs."""

    plugin: Any
    """The task plugin instance."""
    loss: str
    """The loss every trial trains with."""
    preset: str
    """Preset of every run."""
    sets: list[str]
    """Fixed ``key=value`` overrides."""
    params: list[SearchParam]
    """The search space."""
    seeds: list[int]
    """Seeds of every trial."""
    out: Path
    """Output directory."""
    device: str | None = None
    """``--device`` of every run (``None``: the config's)."""
    ray: dict[str, Any] | None = None
    """Ray options (``address``, ``cpus_per_run``, ...) or ``None`` for local processes."""
    poll: float = 0.5
    """Seconds between reads of ``metrics.jsonl`` for pruning."""
    prune_on: str | None = None
    """Metric tag whose curve is reported for pruning (default: the primary metric; simclr: ``eval/knn_top1``,
    since its primary ``eval/linear_top1`` is only measured at the end). Same direction as the objective."""

    @property
    def direction(self) -> str:
        return "maximize" if self.plugin.higher_is_better else "minimize"

    def points(self, values: dict[str, str]) -> list[cmp.GridPoint]:
        """The runs of a trial with ``values`` (``key -> --set text``): one per seed."""
        grid = tuple((p.key, values[p.key]) for p in self.params)
        return [cmp.GridPoint(self.plugin.name, self.loss, s, self.preset, tuple(self.sets), grid) for s in self.seeds]

    def validate(self) -> None:
        """Check every key (and a sample value) against the plugin's config, as ``compare`` does."""
        axes = [cmp.parse_grid(f"{p.key}={p.example()}") for p in self.params]
        sets = [cmp.parse_set(s) for s in self.sets]
        points = cmp.expand_grid(
            self.plugin.name, [self.loss], self.seeds[:1], preset=self.preset, sets=sets, axes=axes
        )
        if any(len(p.grid) != len(self.params) for p in points):  # pragma: no cover - expand_grid raises first
            raise ConfigError(f"a --search key is not a hyperparameter of loss '{self.loss}'")
        cmp.validate_points(points)


class TrialFailedError(RuntimeError):
    """A run of a trial failed (the trial is marked FAIL; the study goes on)."""


def _metric(run_dir: Path, primary: str) -> float:
    summary = runner.read_json(runner.RunDir(run_dir).summary_json) or {}
    value = (summary.get("metrics") or {}).get(primary)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TrialFailedError(f"{run_dir}: no finite '{primary}' in summary.json")
    return float(value)


def train_locally(spec: TuneSpec, point: cmp.GridPoint, trial_out: Path, trial: Any, prune: bool) -> float:
    """Run one seed as a ``platform train`` process; with ``prune``, report its curve to ``trial`` while it runs."""
    optuna = import_optuna()
    run_dir, primary = point.run_dir(trial_out), spec.plugin.primary_metric
    curve = spec.prune_on or primary
    log = trial_out / "logs" / f"{point.run_name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = runner.train_command(point, trial_out, spec.device, runner.platform_base_command())
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    reported: set[int] = set()

    def report() -> bool:
        for step, value in load_curves(run_dir).get(curve, []):
            if step not in reported:
                reported.add(step)
                trial.report(value, step)
        return bool(reported) and trial.should_prune()

    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        try:
            while proc.poll() is None:
                if prune and report():
                    proc.terminate()
                    proc.wait(timeout=60)
                    raise optuna.TrialPruned(f"pruned at step {max(reported)}")
                time.sleep(spec.poll)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if proc.returncode != 0 or runner.run_state(run_dir) != "completed":
        raise TrialFailedError(runner.last_error_line(log))
    if prune and report():
        raise optuna.TrialPruned(f"pruned at step {max(reported)}")
    return _metric(run_dir, primary)


def objective(spec: TuneSpec, trial: Any) -> float:
    """Sample the search space, train every seed, and return the mean primary metric."""
    values = {p.key: p.suggest(trial) for p in spec.params}
    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("pid", os.getpid())
    trial_out = spec.out / "trials" / f"{trial.number:04d}"
    trial.set_user_attr("dir", str(trial_out))
    trial.set_user_attr("values", values)
    points = spec.points(values)
    if spec.ray is not None:
        from contrastlab.experiments.ray_runner import run_grid_ray

        results = run_grid_ray(points, trial_out, **spec.ray)
        failed = [r for r in results if r.status == "failed"]
        if failed:
            raise TrialFailedError(failed[0].error or "run failed")
        scores = [_metric(p.run_dir(trial_out), spec.plugin.primary_metric) for p in points]
    else:
        scores = [train_locally(spec, p, trial_out, trial, prune=i == 0) for i, p in enumerate(points)]
    trial.set_user_attr("run_dirs", [str(p.run_dir(trial_out)) for p in points])
    trial.set_user_attr("seed_values", scores)
    return sum(scores) / len(scores)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def recover_stale(study: Any) -> int:
    """Mark trials left RUNNING by a dead process of this machine FAIL and queue their parameters again."""
    optuna = import_optuna()
    host, n = socket.gethostname(), 0
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        pid = t.user_attrs.get("pid")
        if t.user_attrs.get("host") == host and isinstance(pid, int) and pid != os.getpid() and not _pid_alive(pid):
            study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
            study.enqueue_trial(t.params, skip_if_exists=False)
            n += 1
    return n


def finished(study: Any) -> int:
    """Trials that count towards ``--trials``: COMPLETE and PRUNED."""
    optuna = import_optuna()
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return len(study.get_trials(deepcopy=False, states=states))


def open_study(spec: TuneSpec, storage: str, name: str, pruner: str) -> Any:
    """Create or load the study (``direction`` must match an existing one)."""
    optuna = import_optuna()
    chosen = optuna.pruners.MedianPruner(n_startup_trials=5) if pruner == "median" else optuna.pruners.NopPruner()
    try:
        study = optuna.create_study(
            storage=storage, study_name=name, direction=spec.direction, pruner=chosen, load_if_exists=True
        )
    except ValueError as exc:
        raise ConfigError(f"--study {name}: {exc}") from None
    if study.direction.name.lower() != spec.direction:
        raise ConfigError(f"--study {name} in {storage} was created to {study.direction.name.lower()}")
    return study


def optimize(study: Any, spec: TuneSpec, trials: int, parallel: int = 1) -> int:
    """Run trials until ``trials`` of the study are COMPLETE or PRUNED; returns how many this call ran."""
    optuna = import_optuna()
    recover_stale(study)
    todo = trials - finished(study)
    if todo <= 0:
        return 0
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    stop = optuna.study.MaxTrialsCallback(trials, states=states)
    before = len(study.trials)
    study.optimize(
        lambda t: objective(spec, t), n_trials=todo, n_jobs=parallel, catch=(TrialFailedError,), callbacks=[stop]
    )
    return len(study.trials) - before


def best_trial(study: Any) -> Any | None:
    """The best COMPLETE trial, or ``None``."""
    try:
        return study.best_trial
    except ValueError:
        return None


def write_best(study: Any, spec: TuneSpec) -> Path | None:
    """``OUT/best.yaml``: the resolved ``config.yaml`` of the best trial's first run (accepted by
    ``platform train --config``), with a comment naming the trial and its value; and ``OUT/best.json`` (what
    ``platform compare --tuned`` reads)."""
    import json

    out = spec.out
    best = best_trial(study)
    if best is None:
        return None
    dirs: Sequence[str] = best.user_attrs.get("run_dirs") or []
    source = runner.RunDir(Path(dirs[0])).config_yaml if dirs else None
    if source is None or not source.is_file():
        return None
    head = f"# best trial {best.number}: value {best.value:.6g}; params {best.params}\n"
    path = out / "best.yaml"
    path.write_text(head + source.read_text())
    record = {
        "plugin": spec.plugin.name,
        "loss": spec.loss,
        "preset": spec.preset,
        "sets": spec.sets,
        "params": best.user_attrs.get("values") or {k: str(v) for k, v in best.params.items()},
        "seeds": spec.seeds,
        "trial": best.number,
        "value": best.value,
        "metric": spec.plugin.primary_metric,
    }
    (out / "best.json").write_text(json.dumps(record, indent=2))
    return path
