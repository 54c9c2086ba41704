"""Progress bars with rate and ETA (rich on a terminal, periodic plain lines otherwise)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class _RateColumn(TextColumn):
    """Shows ``12.3 unit/s``."""

    def __init__(self, unit: str) -> None:
        super().__init__("")
        self.unit = unit

    def render(self, task: Any) -> Any:
        from rich.text import Text

        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.1f} {self.unit}/s" if speed else f"- {self.unit}/s", style="cyan")


class _EtaColumn(TimeRemainingColumn):
    """rich's time remaining, or ``? (why)`` while the bar holds its ETA (:meth:`ProgressBar.hold_eta`)."""

    def render(self, task: Any) -> Any:
        from rich.text import Text

        held = task.fields.get("eta_held")
        if held and not task.finished:
            return Text(f"? ({held})", style="progress.remaining")
        return super().render(task)


class ProgressBar:
    """``with ProgressBar(total) as bar: bar.update(1, loss=0.5)``.

    On a terminal it is a rich bar (description, bar, done/total, rate, elapsed, ETA, postfix). Without a terminal
    (CI, pipes) it prints a plain line with the same information about every 10% or 30 seconds.
    """

    def __init__(
        self, total: int, description: str = "train", unit: str = "step", initial: int = 0, enabled: bool = True
    ) -> None:
        self.total = max(int(total), 1)
        self.description = description
        self.unit = unit
        self.done = int(initial)
        self.console = Console(stderr=True)
        self.interactive = self.console.is_terminal and enabled
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task: Any = None
        self._start = time.monotonic()
        self._start_done = self.done
        self._last_print = 0.0
        self._last_fraction = -1.0
        self.postfix: dict[str, Any] = {}
        self.eta_held = ""  # why no ETA is shown yet (hold_eta), or empty

    def __enter__(self) -> ProgressBar:
        if self.interactive:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                _RateColumn(self.unit),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                _EtaColumn(),
                TextColumn("{task.fields[postfix]}"),
                console=self.console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total, completed=self.done, postfix="",
                                                eta_held=self.eta_held)
        return self

    def update(self, n: int = 1, **postfix: Any) -> None:
        """Advance by ``n`` units and show ``postfix`` values (e.g. the current loss)."""
        self.done += int(n)
        if postfix:
            self.postfix.update(postfix)
        text = "  ".join(f"{k}={_fmt(v)}" for k, v in self.postfix.items())
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, postfix=text)
            return
        if not self.enabled:
            return
        now = time.monotonic()
        fraction = self.done / self.total
        # 1e-9: exact tenths (0.3 - 0.2 < 0.1 in floating point) print too
        if fraction >= 1.0 or fraction - self._last_fraction >= 0.1 - 1e-9 or now - self._last_print >= 30:
            self._last_fraction = fraction
            self._last_print = now
            print(self.line(text), file=sys.stderr, flush=True)

    def hold_eta(self, why: str) -> None:
        """Show ``ETA ? (why)`` instead of an estimate until :meth:`restart_rate`: the work so far runs at another
        pace than the rest (CURL's random-action warm-up, without updates, ran 10× faster: "ETA 00:00:02" at 40 %
        of a smoke run with 20 s left; at the paper preset, minutes shown for hours)."""
        self.eta_held = why
        if self._progress is not None:
            self._progress.update(self._task, eta_held=why)

    def restart_rate(self) -> None:
        """Measure the rate, and so the ETA, from now on: the work before went at another pace (CURL's first
        random-action frames, without updates, run many times faster than the rest and made the ETA far too short).
        Ends a :meth:`hold_eta`."""
        self._start, self._start_done = time.monotonic(), self.done
        if self.eta_held:
            self.hold_eta("")
        if self._progress is not None:  # rich estimates its speed from a window of recent samples: forget them
            task = getattr(self._progress, "_tasks", {}).get(self._task)
            samples = getattr(task, "_progress", None)
            if samples is not None:
                samples.clear()

    @contextmanager
    def side_task(self) -> Iterator[None]:
        """Work beside the counted units, such as an evaluation. Its time counts in the rate like any other, except
        before the first unit since the bar (re)started: there it is left out. Recurring evaluations belong in the pace
        the ETA extrapolates, but one at the very start of the window divided a fixed cost into the first few units
        (CURL evaluates at frame 0 and as its updates start: its warm-up's rate rose line after line, and the first
        line after the restart read "2.3 frame/s ETA 00:05:38" with about a minute left)."""
        began, empty = time.monotonic(), self.done == self._start_done
        try:
            yield
        finally:
            if empty and self.done == self._start_done:
                self._start += time.monotonic() - began

    def rate(self) -> float:
        """Units per second since the bar started."""
        elapsed = time.monotonic() - self._start
        return (self.done - self._start_done) / elapsed if elapsed > 0 else 0.0

    def line(self, postfix: str = "") -> str:
        """A plain one-line rendering: ``train 40/100 (40%) 3.2 step/s ETA 00:00:19 loss=0.5`` (hours go on past 24)."""
        rate = self.rate()
        left = max(self.total - self.done, 0)
        eta_text = _hms(left / rate) if rate > 0 else "00:00:00" if left == 0 else "?"
        if self.eta_held and left:
            eta_text = f"? ({self.eta_held})"
        pct = 100.0 * self.done / self.total
        text = f"{self.description} {self.done}/{self.total} ({pct:.0f}%) {rate:.1f} {self.unit}/s ETA {eta_text}"
        return f"{text} {postfix}".rstrip()

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _hms(seconds: float) -> str:
    """``HH:MM:SS`` with the hours counting on past 24 (``2777:45:00``), where ``strftime`` wrapped at a day."""
    whole = round(seconds)
    return f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
