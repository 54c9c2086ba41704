"""What ``platform tune`` says about each trial while the study runs, and when it gives up.

* One line on stderr when a trial's run starts (``trial 3: tau_plus=0.1234, seed 1/2``) and one when the trial
  ends: ``trial 3: complete, eval/ndcg@20 0.2801 (41 s)``, ``trial 3: pruned at step 4 (12 s)`` or
  ``trial 3 failed: <the run's last error line>; log: <path>``. Optuna's own warning and traceback about a failed
  trial are kept off the terminal (:class:`~contrastlab.experiments.tune_study.Interruptions` filters them).
* A study whose trials keep failing (a broken setup) stops after :data:`MAX_CONSECUTIVE_FAILURES` failed trials in
  a row in this invocation (:class:`TooManyFailuresError`); failed trials never count towards ``--trials``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contrastlab.experiments.grid import display_value
from contrastlab.platform.errors import ContrastlabError

MAX_CONSECUTIVE_FAILURES = 3
"""Failed trials in a row after which ``platform tune`` stops (exit code 1)."""


class TrialFailedError(RuntimeError):
    """A run of a trial failed (the trial is marked FAIL; the study goes on)."""

    def __init__(self, message: str, log: Path | None = None) -> None:
        super().__init__(message)
        self.log = log
        """The failed run's log file, when known."""


class TooManyFailuresError(ContrastlabError):
    """:data:`MAX_CONSECUTIVE_FAILURES` trials in a row failed; the study was stopped."""

    exit_code = 1


def say(line: str) -> None:
    """Print one progress line on stderr (unbuffered, like ``platform compare``'s done lines)."""
    print(line, file=sys.stderr, flush=True)


def shown_values(values: Mapping[str, str]) -> str:
    """``tau_plus=0.1234 beta=0.5``: sampled values with 4 significant digits, ``loss.`` dropped from the keys."""
    return " ".join(
        f"{k.split('.', 1)[1] if k.startswith('loss.') else k}={display_value(str(v))}" for k, v in values.items()
    ) or "(no parameters)"


def start_line(number: int, values: Mapping[str, str], seed: int, seeds: Sequence[int]) -> str:
    """``trial 3: tau_plus=0.1234, seed 1/2`` (the ``seed``'s position among the trial's ``seeds``)."""
    where = f"seed {list(seeds).index(seed) + 1}/{len(seeds)}" if seed in seeds else f"seed {seed}"
    return f"trial {number}: {shown_values(values)}, {where}"


class TrialLines:
    """An Optuna callback: prints each finished trial's line and stops the study after too many failures in a
    row. :meth:`failed` records a failure's error (called where the trial raised) before Optuna marks it FAIL."""

    def __init__(self, metric: str, limit: int = MAX_CONSECUTIVE_FAILURES) -> None:
        self.metric, self.limit = metric, limit
        self.errors: dict[int, tuple[str, Path | None]] = {}
        self.in_a_row = 0
        self.gave_up = False

    def failed(self, number: int, exc: TrialFailedError) -> None:
        """Remember why trial ``number`` failed (its last error line and log)."""
        self.errors[number] = (str(exc), exc.log)

    def line(self, trial: Any) -> str:
        """The line for a finished (frozen) trial."""
        secs = trial.duration.total_seconds() if trial.duration is not None else 0.0
        state = trial.state.name
        if state == "COMPLETE":
            return f"trial {trial.number}: complete, {self.metric} {trial.value:.4g} ({secs:.0f} s)"
        if state == "PRUNED":
            steps = list(trial.intermediate_values)
            at = f" at step {max(steps)}" if steps else ""
            return f"trial {trial.number}: pruned{at} ({secs:.0f} s)"
        error, log = self.errors.get(trial.number, ("error not recorded", None))
        where = log or Path(trial.user_attrs.get("dir", "trials")) / "logs"
        return f"trial {trial.number} failed: {error}; log: {where}"

    def __call__(self, study: Any, trial: Any) -> None:
        if trial.state.name not in ("COMPLETE", "PRUNED", "FAIL"):
            return
        say(self.line(trial))
        self.in_a_row = self.in_a_row + 1 if trial.state.name == "FAIL" else 0
        if self.in_a_row >= self.limit and not self.gave_up:
            self.gave_up = True
            study.stop()

    def check(self) -> None:
        """Raise :class:`TooManyFailuresError` if the study was stopped for failures."""
        if self.gave_up:
            raise TooManyFailuresError(
                f"{self.limit} trials in a row failed; see trials.md and the logs under trials/"
            )
