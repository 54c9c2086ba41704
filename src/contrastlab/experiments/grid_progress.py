"""How far a ``platform compare`` grid is: one time-left estimate for both of its views (the live rich bar on a
terminal, the plain lines elsewhere).

The estimate is the typical whole-run time × how long the work left keeps the slots busy: the running runs'
parts left, then each waiting run in the first slot to free up (so the last runs of a grid with several slots,
running alone, are not counted as shared out over all of them). A whole run's time comes from
the runs that started fresh, else from resumed runs scaled by the part they had left, else (before any run
finished) from the running runs' progress so far. The work left counts every unfinished run by the part it has
left, read from its ``run.json`` ``progress`` (written with each checkpoint), so the estimate falls while runs
train, not only when one finishes.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from typing import Any

#: A running run must have done this part of itself here before its pace says how long a whole run takes.
MIN_PROGRESS_FOR_PACE = 0.02


def clock(seconds: float) -> str:
    """``H:MM:SS`` of ``seconds`` (rounded)."""
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class GridEta:
    """The time left of a grid of ``total`` runs, ``slots`` at a time."""

    def __init__(self, total: int, slots: int) -> None:
        self.total, self.slots = total, max(1, slots)
        self.durations: list[float] = []
        """Whole-run seconds of the runs finished here (a resumed run's time scaled by the part it had left)."""
        self.fresh: list[float] = []
        """Those of the runs that started from scratch (the better estimate)."""
        self.parts_left: Callable[[], tuple[Sequence[float], Sequence[float]]] | None = None
        """``() -> (running, waiting)``: the part each running run and each waiting run has left, in start order,
        which the estimate places on the slots; ``None``: every unfinished run waits, whole."""
        self.paces: Callable[[], Sequence[float]] | None = None
        """``() -> whole-run seconds`` extrapolated from the running runs' progress; used until a run finished."""

    def finished(self, seconds: float, part: float = 0.0) -> None:
        """Record a run that finished in ``seconds``, of which ``part`` had been done before (by a resumed run)."""
        self.durations.append(seconds / max(1.0 - part, 0.25))
        if part == 0:
            self.fresh.append(seconds)

    def seconds_left(self, done: int) -> float | None:
        """Seconds until the grid is done, with ``done`` runs finished; ``None`` while nothing says how long a run
        takes."""
        remaining = self.total - done
        if remaining <= 0:
            return 0.0
        typical = list(self.fresh or self.durations or (self.paces() if self.paces is not None else []))
        if not typical:
            return None
        running, waiting = self.parts_left() if self.parts_left is not None else ([], [1.0] * remaining)
        return sum(typical) / len(typical) * busy_span(running, waiting, self.slots)

    def text(self, done: int) -> str:
        """``0:12:30``; ``?`` when unknown; ``finishing`` when runs are left but none has steps left (their final
        evaluations and summaries: a ``0:00:00`` there sat for minutes while the last run evaluated)."""
        seconds = self.seconds_left(done)
        if seconds is None:
            return "?"
        return "finishing" if done < self.total and round(seconds) == 0 else clock(seconds)


def busy_span(running: Sequence[float], waiting: Sequence[float], slots: int) -> float:
    """How long ``slots`` stay busy, in whole runs: each slot first finishes its ``running`` run's part left, then
    each ``waiting`` run (in order) goes to the slot that frees up first."""
    free_at = [*running, *[0.0] * (slots - len(running))]  # never more running runs than slots
    heapq.heapify(free_at)
    for part in waiting:
        heapq.heappush(free_at, heapq.heappop(free_at) + part)
    return max(free_at, default=0.0)


class LiveProgress:
    """The running runs' progress as the grid's estimate reads it: ``part_at_start`` by grid index (what a resumed
    run had done), refreshed from ``run.json`` for the running ones."""

    def __init__(self, part_at_start: dict[int, float], read_part: Callable[[int], float]) -> None:
        self.part_at_start, self.read_part = dict(part_at_start), read_part
        self.now = dict(part_at_start)
        self.started: dict[int, float] = {}

    def start(self, index: int) -> None:
        """Run ``index`` started (now)."""
        self.started[index] = time.monotonic()

    def refresh(self, running: Sequence[int]) -> None:
        """Read the progress of the ``running`` runs again."""
        for index in running:
            self.now[index] = max(self.now.get(index, 0.0), self.read_part(index))

    def stop(self, index: int) -> None:
        """Run ``index`` ended (finished or failed): it has no work left in this grid."""
        self.started.pop(index, None)
        self.now.pop(index, None)

    def parts_left(self) -> tuple[list[float], list[float]]:
        """The part left of each running run, and of each waiting one (in the order they will start)."""
        running = [1.0 - part for index, part in self.now.items() if index in self.started]
        waiting = [1.0 - part for index, part in sorted(self.now.items()) if index not in self.started]
        return running, waiting

    def paces(self) -> list[float]:
        """Whole-run seconds at the pace of each running run that got far enough to tell."""
        now, paces = time.monotonic(), []
        for index, t0 in self.started.items():
            gained = self.now.get(index, 0.0) - self.part_at_start.get(index, 0.0)
            if gained >= MIN_PROGRESS_FOR_PACE:
                paces.append((now - t0) / gained)
        return paces


class PlainProgress:
    """Progress lines for a console that is not a terminal (rich shows no live view there)."""

    def __init__(self, console: Any, total: int, skipped: int, slots: int, every: float = 30.0,
                 eta: GridEta | None = None) -> None:
        self.console, self.total, self.skipped, self.every = console, total, skipped, every
        self.eta = eta or GridEta(total, slots)
        self.started = time.monotonic()
        self.last = self.started - every  # the first call prints: the grid has started

    def line(self, done: int, running: int, failed: int) -> str:
        """``grid: 3/12 done (1 skipped), 2 running, 1 failed, elapsed 0:04:10, ETA 0:12:30``."""
        eta = self.eta.text(done)
        if eta == "?":
            eta = "? (no run completed yet)"
        skipped = f" ({self.skipped} skipped)" if self.skipped else ""
        return (
            f"grid: {done}/{self.total} done{skipped}, {running} running, {failed} failed, "
            f"elapsed {clock(time.monotonic() - self.started)}, ETA {eta}"
        )

    def report(self, done: int, running: int, failed: int, *, ended: bool = False) -> None:
        """Print a line when a run ended (``ended``; record a finished run's time in :attr:`eta` first) or
        ``every`` seconds have passed since the last line."""
        now = time.monotonic()
        if not ended and now - self.last < self.every:
            return
        self.last = now
        self.console.print(self.line(done, running, failed), markup=False, highlight=False, soft_wrap=True)
