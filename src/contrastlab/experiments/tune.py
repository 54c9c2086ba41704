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
  other seeds run only for trials that survived (a one-seed trial whose run has finished is not pruned: its value
  is known). On the Ray backend trials are not pruned (the runs may be on
  other machines).
* **Storage and resume.** The study lives in ``--storage`` (default ``sqlite:///OUT/study.db``; any SQLAlchemy
  URL Optuna accepts), named ``--study`` (default: ``<plugin>-<loss>``). A repeated command (or a worker on
  another machine with the same storage) continues it: trials that are ``COMPLETE`` or ``PRUNED`` count towards
  ``--trials``; a trial left ``RUNNING`` by a dead process of this machine, or stopped by Ctrl-C, is marked
  ``FAIL`` and its parameters are queued again. A command whose setup differs from the study's is refused
  (:mod:`contrastlab.experiments.tune_study`).
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.experiments import grid as cmp
from contrastlab.experiments import runner
from contrastlab.experiments.grid import display_value
from contrastlab.experiments.interrupts import hook_interrupts, interruptible
from contrastlab.experiments.results import load_curves
from contrastlab.experiments.tune_search import SearchParam, check_integer_key, check_storage, parse_search
from contrastlab.experiments.tune_study import (
    RESUMES_ATTR,
    SETUP_ATTR,
    Interruptions,
    finished,
    import_optuna,
    open_study,
    recorded,
    recover_stale,
    setup_record,
)
from contrastlab.experiments.tune_trials import TrialFailedError, TrialLines, say, shown_values, start_line
from contrastlab.platform.config import config_to_dict, flatten_items
from contrastlab.platform.errors import ConfigError, ContrastlabError, DataMissingError
from contrastlab.platform.stopping import OPT_OUT_VARIABLE

TRIAL_ENV = {OPT_OUT_VARIABLE: "0"}
"""Added to a trial's ``platform train`` environment: a signal stops a trial's run at once instead of saving a
checkpoint first (a resumed study continues it from its last periodic checkpoint)."""

__all__ = [  # re-exported for the CLI and the tests
    "SearchParam",
    "TrialFailedError",
    "check_storage",
    "finished",
    "import_optuna",
    "open_study",
    "parse_search",
    "recover_stale",
    "setup_record",
]


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
    parallel: int = 1
    """Trials at a time in this worker (each local run then gets ``OMP_NUM_THREADS = cores / parallel``)."""
    prune_on: str | None = None
    """Metric tag whose curve is reported for pruning (default: the primary metric; simclr: ``eval/knn_top1``,
    since its primary ``eval/linear_top1`` is only measured at the end). Same direction as the objective."""
    pruner: str = "median"
    """``median`` or ``none``."""
    warned: bool = False
    """Whether the "curve never logged" warning was printed (once per driver)."""

    @property
    def direction(self) -> str:
        return "maximize" if self.plugin.higher_is_better else "minimize"

    def blame_set(self, exc: ContrastlabError) -> ContrastlabError:
        """``exc`` (from validating the preset with every ``--set``) prefixed with the ``--set`` that alone causes
        it, when one does; missing data is blamed on ``--preset``; else ``exc`` as it is."""
        from contrastlab.platform.config import resolve_config

        for one in self.sets:
            try:
                resolve_config(self.plugin, preset=self.preset, sets=[one], loss=self.loss)
            except ContrastlabError as alone:
                if str(alone) == str(exc):
                    return type(exc)(f"--set {one}: {exc}")
            except Exception:  # a plugin's own failure: keep the original error
                continue
        if isinstance(exc, DataMissingError):  # the preset chose the data
            return type(exc)(f"--preset {self.preset}: {exc}")
        return exc

    def check_device(self, config: Any) -> None:
        """Refuse a CUDA device this machine lacks (one line, like ``platform train``) when the runs train here:
        the local backend, or Ray's private local instance."""
        if self.ray is not None and self.ray.get("address") is not None:
            return  # the runs train on the cluster's machines
        from contrastlab.platform.run import resolve_device

        try:
            resolve_device(self.device or str(config.device))
        except ContrastlabError as exc:
            where = f"--device {self.device}" if self.device else f"the config's device ({config.device})"
            raise type(exc)(f"{where}: {exc}") from None

    def points(self, values: dict[str, str]) -> list[cmp.GridPoint]:
        """The runs of a trial with ``values`` (``key -> --set text``): one per seed."""
        grid = tuple((p.key, values[p.key]) for p in self.params)
        return [cmp.GridPoint(self.plugin.name, self.loss, s, self.preset, tuple(self.sets), grid) for s in self.seeds]

    def validate(self) -> None:
        """Check the preset and ``--set`` values on their own (errors as ``compare`` words them), then every
        searched key against the plugin's config with every value a trial can get at its edges (each choice, both
        bounds; one key at a time, the other searched keys at their defaults; errors name ``--search``), the
        device where the runs train on this machine, and ``--prune-on`` against the tags the plugin declares
        (``TaskPlugin.logged_metrics``)."""
        sets = [cmp.parse_set(s) for s in self.sets]
        base = cmp.expand_grid(self.plugin.name, [self.loss], self.seeds[:1], preset=self.preset, sets=sets)
        try:
            config = next(iter(cmp.validate_points(base).values()))
        except ContrastlabError as exc:
            raise self.blame_set(exc) from None
        self.check_device(config)
        for param in self.params:
            for value in param.check_values():
                axes = [cmp.parse_grid(f"{param.key}={value}")]  # the other searched keys keep their defaults
                points = cmp.expand_grid(
                    self.plugin.name, [self.loss], self.seeds[:1], preset=self.preset, sets=sets, axes=axes
                )
                try:
                    config = next(iter(cmp.validate_points(points).values()))
                except ContrastlabError as exc:
                    where = f"--search '{param.key}={param.text}'"
                    raise ConfigError(f"{where}: {param.key}={value} is refused: {exc}") from None
            check_integer_key(param, flatten_items(config_to_dict(config)).get(param.key))
        tags = tuple(self.plugin.logged_metrics(config)) if config is not None else ()
        if self.prune_on and tags and self.prune_on not in tags:
            raise ConfigError(
                f"--prune-on {self.prune_on}: plugin {self.plugin.name} never logs it; its curves: {', '.join(tags)}"
            )
        if self.prune_on and self.plugin.higher_is_better and is_loss_curve(self.prune_on):
            # evaluation scores only: train/lr, train/epoch or a throughput "rise" too, but say nothing of quality
            scores = [t for t in tags if t.split("/", 1)[0] in ("eval", "test") and not is_loss_curve(t)
                      and "_std" not in t]
            raise ConfigError(
                f"--prune-on {self.prune_on}: a loss curve falls as training improves, but the pruner reads it like "
                f"the objective (higher is better), so it would stop the trials that learn fastest; watch an "
                f"evaluation curve where higher is better{': ' + ', '.join(scores) if scores else ''}"
            )


def is_loss_curve(tag: str) -> bool:
    """Whether ``tag`` names a loss, lower is better: ``train/loss``, ``train/critic_loss_vs_env_frames``, or a
    risk (pu's ``classifier/risk``, the PU classifier's loss)."""
    last = tag.rsplit("/", 1)[-1].lower()
    return "loss" in last or "risk" in last


def ray_pruning_note(spec: TuneSpec) -> str | None:
    """The line printed at the start when ``--pruner median`` meets the Ray backend, which does not prune."""
    if spec.ray is not None and spec.pruner != "none":
        return "trials are not pruned on the Ray backend (--pruner is ignored; see docs/tune.md)"
    return None


def _metric(run_dir: Path, primary: str) -> float:
    summary = runner.read_json(runner.RunDir(run_dir).summary_json) or {}
    value = (summary.get("metrics") or {}).get(primary)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TrialFailedError(f"{run_dir}: no finite '{primary}' in summary.json")
    return float(value)


def train_locally(spec: TuneSpec, point: cmp.GridPoint, trial_out: Path, trial: Any, prune: bool,
                  settled: Any = None) -> float:
    """Run one seed as a ``platform train`` process; with ``prune``, report its curve to ``trial`` while it runs.

    With ``--parallel N`` this runs in one of Optuna's worker threads, which never receive Ctrl-C: the SIGINT hook
    (:func:`~contrastlab.experiments.interrupts.interruptible`) tells it to stop its process and raise
    :class:`KeyboardInterrupt`, and waits until ``settled()`` (Optuna has recorded the trial)."""
    optuna = import_optuna()
    run_dir, primary = point.run_dir(trial_out), spec.plugin.primary_metric
    curve = spec.prune_on or primary
    log = trial_out / "logs" / f"{point.run_name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    reported: set[int] = set()

    def report() -> bool:
        for step, value in load_curves(run_dir).get(curve, []):
            if step not in reported:
                reported.add(step)
                trial.report(value, step)
        return bool(reported) and trial.should_prune()

    runner.discard_unstarted(run_dir)  # a start killed inside Run.create left nothing to resume
    if runner.run_state(run_dir) == "completed":  # finished before the trial was interrupted (re-queued trial)
        if prune:
            report()
        return _metric(run_dir, primary)
    cmd = runner.train_command(point, trial_out, spec.device, runner.platform_base_command())
    env = runner.train_env((os.cpu_count() or 1) // spec.parallel, **TRIAL_ENV)  # threads as compare --jobs
    say(start_line(trial.number, dict(point.grid), point.seed, spec.seeds))
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, preexec_fn=runner.die_with_parent())
        with interruptible(settled) as interrupted:
            try:
                while proc.poll() is None:
                    if interrupted is not None and interrupted.is_set():
                        raise KeyboardInterrupt  # Ctrl-C reached the main thread (the hook waits for us)
                    if prune and report():
                        proc.terminate()
                        proc.wait(timeout=60)
                        raise optuna.TrialPruned(f"pruned at step {max(reported)}")
                    time.sleep(spec.poll)
            finally:
                runner.stop_train(proc)
    if proc.returncode in (-signal.SIGINT, 130) or runner.RunDir(run_dir).info().get("status") == "interrupted":
        raise KeyboardInterrupt  # Ctrl-C reached the run (the terminal signals the whole process group)
    if proc.returncode != 0 or runner.run_state(run_dir) != "completed":
        raise TrialFailedError(runner.last_error_line(log), log)
    # the points logged since the last read still count for later trials' medians; but a finished run is pruned
    # only when the trial has more seeds to run (pruning saves them): a one-seed trial has its objective already,
    # and pruning it then threw that away (with --prune-on, even the trial with the best objective)
    if prune and report() and len(spec.seeds) > 1:
        raise optuna.TrialPruned(f"pruned at step {max(reported)}")
    if prune and spec.pruner != "none" and not reported and not spec.warned:
        spec.warned = True
        logged = sorted(load_curves(run_dir))
        print(
            f"warning: the run {run_dir.name} never logged '{curve}', so trials are not pruned; "
            f"its curves: {', '.join(logged) or 'none'} (see --prune-on)",
            file=sys.stderr,
        )
    return _metric(run_dir, primary)


def objective(spec: TuneSpec, trial: Any) -> float:
    """Sample the search space, train every seed, and return the mean primary metric."""
    trial.set_user_attr("host", socket.gethostname())  # first: a driver killed from here on leaves a trial
    trial.set_user_attr("pid", os.getpid())  # that recover_stale can tell is orphaned
    values = {p.key: p.suggest(trial) for p in spec.params}
    resumes = trial.user_attrs.get(RESUMES_ATTR)  # re-queued after an interruption: continue its runs in place
    trial_out = Path(resumes) if isinstance(resumes, str) else spec.out / "trials" / f"{trial.number:04d}"
    trial.set_user_attr("dir", str(trial_out))
    trial.set_user_attr("values", values)
    trial.set_user_attr(SETUP_ATTR, setup_record(spec))
    points = spec.points(values)
    if spec.ray is not None:
        say(f"trial {trial.number}: {shown_values(values)}, {len(points)} seed(s) on Ray")  # local: per seed
        from contrastlab.experiments.ray_runner import run_grid_ray

        results = run_grid_ray(points, trial_out, announce=False, settled=lambda: recorded(trial),
                               env=dict(TRIAL_ENV), **spec.ray)
        failed = [r for r in results if r.status == "failed"]
        if failed:
            raise TrialFailedError(failed[0].error or "run failed", failed[0].point.log_path(trial_out))
        scores = [_metric(p.run_dir(trial_out), spec.plugin.primary_metric) for p in points]
    else:
        scores = [train_locally(spec, p, trial_out, trial, prune=i == 0, settled=lambda: recorded(trial))
                  for i, p in enumerate(points)]
    trial.set_user_attr("run_dirs", [str(p.run_dir(trial_out)) for p in points])
    trial.set_user_attr("seed_values", scores)
    return sum(scores) / len(scores)


def optimize(study: Any, spec: TuneSpec, trials: int, parallel: int = 1) -> int:
    """Run trials until ``trials`` of the study are COMPLETE or PRUNED; returns how many this call ran. Each round
    runs the missing number of trials (so ``parallel`` workers never start more than needed); failed trials do
    not count, so the next round replaces them. One line per run start and trial end on stderr
    (:mod:`~contrastlab.experiments.tune_trials`); after 3 failed trials in a row the study stops and
    :class:`~contrastlab.experiments.tune_trials.TooManyFailuresError` is raised.

    On KeyboardInterrupt the interrupted trials' parameters are queued again (they run first when the study is
    resumed), without Optuna's warning and traceback about them, and the KeyboardInterrupt is re-raised."""
    optuna = import_optuna()
    recover_stale(study)
    if trials - finished(study) <= 0:
        return 0
    spec.parallel = parallel
    hook_interrupts()  # Ctrl-C also stops the trials running in Optuna's worker threads (--parallel N)
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    enough = optuna.study.MaxTrialsCallback(trials, states=states)
    lines = TrialLines(spec.plugin.primary_metric)
    before = len(study.trials)
    with Interruptions() as interrupted:

        def run(trial: Any) -> float:
            try:
                return objective(spec, trial)
            except KeyboardInterrupt:
                interrupted.numbers.add(trial.number)
                raise
            except TrialFailedError as exc:
                interrupted.failed.add(trial.number)  # our line replaces Optuna's warning and traceback
                lines.failed(trial.number, exc)
                raise
            except Exception:  # not caught by Optuna: the CLI reports it (one line for a ContrastlabError/OSError)
                interrupted.failed.add(trial.number)
                raise

        try:  # rounds of the missing trials: a failed trial does not count, so the next round replaces it
            while not lines.gave_up and (todo := trials - finished(study)) > 0:
                started = len(study.trials)
                callbacks = [enough, lines]
                study.optimize(run, n_trials=todo, n_jobs=parallel, catch=(TrialFailedError,), callbacks=callbacks)
                if len(study.trials) == started:
                    break  # nothing ran (another worker finished the study)
        except KeyboardInterrupt:
            interrupted.requeue_all(study)
            raise
    lines.check()
    return len(study.trials) - before


def best_trial(study: Any) -> Any | None:
    """The best COMPLETE trial, or ``None``."""
    try:
        return study.best_trial
    except ValueError:
        return None


def write_best(study: Any, spec: TuneSpec) -> Path | None:
    """``OUT/best.json`` (what ``platform compare --tuned`` reads) and ``OUT/best.yaml``: the resolved
    ``config.yaml`` of the best trial's first run (accepted by ``platform train --config``), with a comment naming
    the trial and its value. Both describe what that trial trained with: its own recorded setup, else the study's,
    else (a trial from before setups were recorded) this command's. Returns ``best.yaml``, or ``None`` without a
    COMPLETE trial, or when the best trial's runs are not on this machine (a worker of a shared ``--storage`` on
    another one): ``best.json`` is written then too, and an older ``best.yaml`` is removed."""
    import json

    out = spec.out
    best = best_trial(study)
    if best is None:
        return None
    dirs: Sequence[str] = best.user_attrs.get("run_dirs") or []
    source = runner.RunDir(Path(dirs[0])).config_yaml if dirs else None
    path: Path | None = None
    if source is None or not source.is_file():
        (out / "best.yaml").unlink(missing_ok=True)  # it describes an earlier best trial
    else:
        shown = ", ".join(f"{k}={display_value(str(v))}" for k, v in best.params.items())
        head = f"# best trial {best.number}: value {best.value:.6g}; params {shown}\n"
        path = out / "best.yaml"
        path.write_text(head + source.read_text())
    setup = best.user_attrs.get(SETUP_ATTR) or study.user_attrs.get(SETUP_ATTR) or setup_record(spec)
    record = {
        "plugin": setup["plugin"],
        "loss": setup["loss"],
        "preset": setup["preset"],
        "sets": list(setup["sets"]),
        "params": best.user_attrs.get("values") or {k: str(v) for k, v in best.params.items()},
        "seeds": list(setup.get("seeds") or range(1, int(setup["seeds_per_trial"]) + 1)),
        "trial": best.number,
        "value": best.value,
        "metric": setup["metric"],
        # the tuning budget: compare --tuned shows it and warns when the losses' budgets differ
        "trials": sum(t.state.name in ("COMPLETE", "PRUNED") for t in study.trials),
    }
    (out / "best.json").write_text(json.dumps(record, indent=2))
    return path
