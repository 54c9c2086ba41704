"""The Optuna study behind ``platform tune``: what it was created with, resuming it, and interrupted trials.

* **Setup.** A new study stores the command's setup (plugin, loss, preset, fixed ``--set`` values, search space,
  seeds per trial, primary metric and the curve pruned on) as the study's user attribute ``setup``. A later
  command on the same storage and study name must have the same setup, or it is refused with one line naming the
  first difference; a study from before this attribute existed takes the setup of the command that resumes it.
* **Stale trials.** A trial left RUNNING by a dead process of this machine is marked FAIL and its parameters are
  queued again (:func:`recover_stale`), with its folder: the queued trial resumes its runs (:func:`requeue`).
* **Ctrl-C.** The trial that a KeyboardInterrupt stops is marked FAIL by Optuna; :class:`Interruptions` queues its
  parameters again so the resumed study runs them first, and keeps Optuna's warning and traceback about it off
  the terminal.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from contrastlab.experiments.runner import pid_alive
from contrastlab.platform.errors import ConfigError

SCHEMA_RACE_RETRIES = 5
"""How often :func:`open_study` tries again when another process creates the same new storage at the same time."""
SETUP_ATTR = "setup"
"""Study (and trial) user attribute holding :func:`setup_record`."""
_OPTION = {
    "plugin": "--plugin",
    "loss": "--loss",
    "preset": "--preset",
    "sets": "--set",
    "search": "--search",
    "seeds_per_trial": "--seeds-per-trial",
    "metric": "primary metric",
    "prune_on": "--prune-on",
}


def import_optuna() -> Any:
    """``optuna`` (quiet), or a one-line :class:`ConfigError` saying how to install it."""
    try:
        import optuna
    except ImportError:
        raise ConfigError("platform tune needs Optuna: pip install 'contrastlab[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def setup_record(spec: Any) -> dict[str, Any]:
    """What a trial of ``spec`` (a :class:`~contrastlab.experiments.tune.TuneSpec`) trains with, as JSON values."""
    return {
        "plugin": spec.plugin.name,
        "loss": spec.loss,
        "preset": spec.preset,
        "sets": sorted(spec.sets),
        "search": sorted(f"{p.key}={p.text}" for p in spec.params),
        "seeds_per_trial": len(spec.seeds),
        "seeds": list(spec.seeds),
        "metric": spec.plugin.primary_metric,
        "prune_on": spec.prune_on or spec.plugin.primary_metric,
    }


def _shown(key: str, value: Any) -> str:
    if key in ("sets", "search"):
        return " ".join(f"{_OPTION[key]} {v}" for v in value) if value else f"no {_OPTION[key]}"
    return f"{_OPTION[key]} {value}"


def compare_setup(study: Any, record: dict[str, Any], storage: str) -> bool:
    """Refuse (one line) a study created with another setup than ``record``; ``False`` when it has none."""
    stored = study.user_attrs.get(SETUP_ATTR)
    if not isinstance(stored, dict):
        return False
    for key in _OPTION:
        if key in stored and stored[key] != record[key]:
            raise ConfigError(
                f"--study {study.study_name} in {storage}: created with {_shown(key, stored[key])}, this command "
                f"says {_shown(key, record[key])}; use another --study or --out"
            )
    return True


def check_setup(study: Any, record: dict[str, Any], storage: str) -> None:
    """Store ``record`` in a study that has none; refuse (one line) a study created with a different setup."""
    if not compare_setup(study, record, storage):
        study.set_user_attr(SETUP_ATTR, record)


def check_existing(spec: Any, storage: str, name: str) -> None:
    """When study ``name`` already exists in ``storage``, refuse a command with another direction or setup
    before anything else is checked (a preset whose data is missing here, say), and without writing: a SQLite
    file that does not exist yet is not created."""
    optuna = import_optuna()
    from sqlalchemy.engine import make_url

    parsed = make_url(storage)
    if parsed.get_backend_name() == "sqlite" and (
        parsed.database in (None, "", ":memory:") or not Path(parsed.database).is_file()
    ):
        return
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return
    except Exception as exc:  # an unreachable database, a file that is not a study database, ...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"storage {storage}: cannot open it ({first[:200]})") from None
    check_direction(study, spec.direction, storage)
    compare_setup(study, setup_record(spec), storage)


def check_direction(study: Any, direction: str, storage: str) -> None:
    """Refuse a study created to optimise in the other direction."""
    if study.direction.name.lower() != direction:
        raise ConfigError(f"--study {study.study_name} in {storage} was created to {study.direction.name.lower()}")


def open_study(spec: Any, storage: str, name: str, pruner: str) -> Any:
    """Create or load the study; refuse one created with another direction or setup (:func:`check_setup`)."""
    optuna = import_optuna()
    chosen = optuna.pruners.MedianPruner(n_startup_trials=5) if pruner == "median" else optuna.pruners.NopPruner()
    from sqlalchemy.exc import IntegrityError, OperationalError

    for attempt in range(SCHEMA_RACE_RETRIES + 1):
        try:
            study = optuna.create_study(
                storage=storage, study_name=name, direction=spec.direction, pruner=chosen, load_if_exists=True
            )
            break
        except ValueError as exc:
            raise ConfigError(f"--study {name}: {exc}") from None
        except (IntegrityError, OperationalError):
            # another process (a second `platform tune` on the same storage) was creating the same new database
            # schema or study at the same moment; it exists now, so loading it again succeeds
            if attempt == SCHEMA_RACE_RETRIES:
                raise
            time.sleep(0.2 * (attempt + 1))
    check_direction(study, spec.direction, storage)
    check_setup(study, setup_record(spec), storage)
    return study


RESUMES_ATTR = "resumes"
"""User attribute of a queued trial: the folder of the interrupted trial whose runs it continues."""


def requeue(study: Any, trial: Any) -> None:
    """Mark ``trial`` (a FrozenTrial) FAIL if it is not yet, and queue its parameters so they run next, in its
    folder: the queued trial resumes the interrupted runs there and skips the finished ones."""
    optuna = import_optuna()
    if trial.state != optuna.trial.TrialState.FAIL:
        study._storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
    folder = trial.user_attrs.get("dir")
    attrs = {RESUMES_ATTR: folder} if isinstance(folder, str) else None
    study.enqueue_trial(trial.params, user_attrs=attrs, skip_if_exists=False)


def recover_stale(study: Any) -> int:
    """Mark trials left RUNNING by a dead process of this machine FAIL and queue their parameters again."""
    optuna = import_optuna()
    host, n = socket.gethostname(), 0
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        pid = t.user_attrs.get("pid")
        if t.user_attrs.get("host") == host and isinstance(pid, int) and pid != os.getpid() and not pid_alive(pid):
            requeue(study, t)
            n += 1
    return n


def recorded(trial: Any) -> bool:
    """Whether Optuna has recorded ``trial``'s end (after Ctrl-C the main thread re-queues it only then)."""
    return trial.study._storage.get_trial(trial._trial_id).state.name != "RUNNING"


def finished(study: Any) -> int:
    """Trials that count towards ``--trials``: COMPLETE and PRUNED."""
    optuna = import_optuna()
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return len(study.get_trials(deepcopy=False, states=states))


class Interruptions(logging.Filter):
    """Trials stopped by Ctrl-C in one ``optimize`` call (``numbers``), and trials that failed there
    (``failed``, reported in one line each by ``platform tune`` itself). As a filter on Optuna's optimisation
    logger it drops Optuna's "Trial N failed ..." warning (with its traceback) and the "Trial N failed with value
    None" line that follows, for those trials only."""

    logger_name = "optuna.study._optimize"

    def __init__(self) -> None:
        super().__init__()
        self.numbers: set[int] = set()
        self.failed: set[int] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        """``False`` for Optuna's failure lines about an interrupted trial."""
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, KeyboardInterrupt):
            return False
        message = record.getMessage()
        return not any(message.startswith(f"Trial {n} failed") for n in self.numbers | self.failed)

    def __enter__(self) -> Interruptions:
        logging.getLogger(self.logger_name).addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger(self.logger_name).removeFilter(self)

    def requeue_all(self, study: Any) -> int:
        """Queue the parameters of every interrupted trial again (marking any still RUNNING FAIL)."""
        n = 0
        for t in study.get_trials(deepcopy=False):
            if t.number in self.numbers and t.state.name in ("FAIL", "RUNNING"):
                requeue(study, t)
                n += 1
        return n
