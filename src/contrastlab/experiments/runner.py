"""Running a ``platform compare`` grid: one ``platform train`` process per grid point, N at a time.

* Completed runs (``run.json`` status ``completed`` and a ``summary.json``) are skipped; a run directory with a
  ``config.yaml`` is continued with ``platform train --resume``; anything else starts fresh.
* A failed run never stops the others: its one-line error goes to ``compare_error.txt`` in its run directory
  (with a placeholder ``run.json`` if the process died before creating one), its output to
  ``OUT/logs/<plugin>/<loss>/<run name>.log``.
* One rich progress view shows the whole grid plus a line per running process (its latest logged step). When
  the console is not a terminal (CI logs, pipes), a plain line with done/total, running, failed, elapsed time and
  ETA is printed when a run finishes, and at least every ``report_every`` seconds otherwise. Both show the ETA of
  :mod:`.grid_progress`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.experiments.grid import GridPoint, count
from contrastlab.experiments.grid_progress import GridEta, LiveProgress, PlainProgress
from contrastlab.experiments.interrupts import Terminated
from contrastlab.platform.rundir import RunDir, read_json

__all__ = [
    "ERROR_FILE", "JobResult", "die_with_parent", "pid_alive", "read_json", "run_grid", "run_state",
    "train_command", "train_env",
]  # fmt: skip


def run_state(run_dir: Path) -> str:
    """``completed`` (skip), ``resume`` (has ``config.yaml``: continue it), or ``fresh`` (start it)."""
    layout = RunDir(run_dir)
    if layout.info().get("status") == "completed" and layout.summary_json.is_file():
        return "completed"
    if layout.config_yaml.is_file():
        return "resume"
    return "fresh"


def discard_unstarted(run_dir: Path) -> None:
    """Remove a run directory that holds no ``config.yaml`` (a start killed inside ``Run.create``): nothing in it
    can be resumed, and ``platform train`` refuses to start a fresh run in a non-empty directory."""
    if run_dir.is_dir() and run_state(run_dir) == "fresh":
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)


def stop_train(proc: subprocess.Popen) -> None:
    """Stop a ``platform train`` process that is still running: SIGTERM (it marks its run interrupted), then
    SIGKILL after 10 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def train_command(point: GridPoint, out: Path, device: str | None, base: Sequence[str]) -> list[str]:
    """The ``platform train`` argument list for ``point``: a fresh run, or ``--resume`` of its directory."""
    run_dir = point.run_dir(out)
    if run_state(run_dir) == "resume":
        cmd = [*base, "train", "--resume", str(run_dir)]
    else:
        cmd = [*base, "train", "--plugin", point.plugin, "--loss", point.loss, "--seed", str(point.seed)]
        if point.preset:
            cmd += ["--preset", point.preset]
        for ov in point.overrides:
            cmd += ["--set", ov]
        cmd += ["--logdir", str(Path(out) / "runs"), "--run-name", point.run_name]
    if device:
        cmd += ["--device", device]
    return cmd


@dataclass
class JobResult:
    """Outcome of one grid point after :func:`run_grid`."""

    point: GridPoint
    """The grid point."""
    run_dir: Path
    """Its run directory."""
    status: str
    """``skipped`` (already completed), ``completed``, ``failed`` or ``interrupted``."""
    error: str | None = None
    """One-line error of a failed run."""
    seconds: float = 0.0
    """Wall time of the process (0 for skipped runs)."""


ERROR_FILE = RunDir.COMPARE_ERROR
"""File a failed grid run's one-line error is written to (read back by the report)."""


def record_failure(point: GridPoint, out: Path, error: str) -> Path:
    """Record a failed run: ``compare_error.txt``, plus a placeholder ``run.json`` if none was written."""
    from datetime import datetime, timezone

    run_dir = point.run_dir(out)
    layout = RunDir(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not layout.run_json.exists():
        info = {
            "plugin": point.plugin,
            "loss": point.loss,
            "seed": point.seed,
            "preset": point.preset,
            "overrides": point.overrides,
            "status": "failed",
            "error": error,
            "created": datetime.now(timezone.utc).isoformat(),
            "placeholder": True,
        }
        layout.run_json.write_text(json.dumps(info, indent=2))
    layout.compare_error.write_text(error + "\n")
    return run_dir


def clear_failure(run_dir: Path) -> None:
    """Before a retry: drop ``compare_error.txt`` and a placeholder directory (only what this wrote)."""
    layout = RunDir(run_dir)
    layout.compare_error.unlink(missing_ok=True)
    if layout.info().get("placeholder") and not layout.config_yaml.exists():
        layout.run_json.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            run_dir.rmdir()


def last_error_line(log: Path) -> str:
    """The last non-empty line of a log (a traceback's final line names the exception)."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "process failed (no log)"
    return lines[-1][:500] if lines else "process failed (empty log)"


def latest_step(run_dir: Path) -> str:
    """``step N`` from the last line of ``metrics.jsonl`` (read from the end), or an empty string."""
    try:
        with open(RunDir(run_dir).metrics_jsonl, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 4096))
            line = fh.read().decode(errors="replace").strip().splitlines()[-1]
        return f"step {int(json.loads(line)['step'])}"
    except (OSError, IndexError, ValueError, KeyError, TypeError):
        return ""


def die_with_parent(sig: int | None = None) -> Any:
    """A ``preexec_fn`` for ``subprocess.Popen`` that makes the child get ``sig`` (default SIGTERM) when the
    process that started it dies, even by SIGKILL (Linux ``prctl(PR_SET_PDEATHSIG)``), so no training process
    outlives its driver. ``None`` (no ``preexec_fn``) on other systems or when ``prctl`` cannot be found.

    The signal fires when the *thread* that started the child ends; every caller waits for its child in that
    thread. ``prctl`` is looked up here, before the fork: the child only calls it.
    """
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - a Linux without a usable libc
        return None
    signum, parent = int(signal.SIGTERM if sig is None else sig), os.getpid()

    def preexec() -> None:  # pragma: no cover - runs in the child between fork and exec
        prctl(1, signum)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signum)

    return preexec


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one owned by another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists
        return True
    return True


def train_env(threads: int, **extra: str) -> dict[str, str]:
    """The environment of a ``platform train`` child: this process's, unbuffered output, ``extra``, and
    ``OMP_NUM_THREADS=threads`` (at least 1) unless the user set it, so concurrent runs split the cores."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env.setdefault("OMP_NUM_THREADS", str(max(1, threads)))
    return env


def platform_base_command() -> list[str]:
    """How to call the CLI in a subprocess: the ``platform`` script beside ``sys.executable`` if present."""
    import sys

    script = Path(sys.executable).parent / ("platform.exe" if os.name == "nt" else "platform")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from _contrastlab_cli import main; main()"]


def run_grid(
    points: Sequence[GridPoint],
    out: Path,
    *,
    slots: Sequence[str | None] = (None,),
    base: Sequence[str] | None = None,
    console: Any = None,
    poll: float = 0.5,
    report_every: float = 30.0,
) -> list[JobResult]:
    """Run every grid point as its own ``platform train`` process, ``len(slots)`` at a time.

    ``slots`` holds one entry per concurrent process: ``None`` (device from the config) or a device string
    passed as ``--device`` (``cuda:K``). Completed runs are skipped; runs with a directory are resumed. One
    rich progress view shows the whole grid (plain progress lines when ``console`` is not a terminal, at least
    every ``report_every`` seconds). Ctrl-C interrupts the running processes (they resume next time).
    """
    import shlex
    import signal
    import time

    from rich import progress as rp
    from rich.console import Console
    from rich.markup import escape

    out, console = Path(out), console or Console(stderr=True)
    base = list(base or platform_base_command())
    results: dict[int, JobResult] = {}
    pending: list[int] = []
    for i, p in enumerate(points):
        if run_state(p.run_dir(out)) == "completed":
            results[i] = JobResult(p, p.run_dir(out), "skipped")
        else:
            pending.append(i)
    env = train_env((os.cpu_count() or 1) // len(slots))
    free = list(range(len(slots)))
    running: dict[int, tuple[Any, int, float, Any, Any]] = {}  # slot -> (proc, index, t0, task, log file)
    columns = (
        rp.TextColumn("{task.description}"),
        rp.BarColumn(),
        rp.MofNCompleteColumn(),
        rp.TimeElapsedColumn(),
        rp.TextColumn("{task.fields[eta]}"),
        rp.TextColumn("{task.fields[info]}"),
    )
    part_done = {i: RunDir(points[i].run_dir(out)).progress() for i in pending}  # by the runs resumed here
    live = LiveProgress(part_done, lambda i: RunDir(points[i].run_dir(out)).progress())
    eta = GridEta(len(points), len(slots))
    eta.parts_left, eta.paces = live.parts_left, live.paces
    plain = None if console.is_terminal else PlainProgress(console, len(points), len(results), len(slots),
                                                           report_every, eta)

    def n_failed() -> int:
        return sum(r.status == "failed" for r in results.values())

    # not a terminal: the plain lines only (rich would still print its final bar when it stops)
    with rp.Progress(*columns, console=console, transient=False, disable=plain is not None) as progress:
        overall = progress.add_task(
            f"grid ({count(len(points), 'run')})",
            total=len(points),
            completed=len(results),
            info=f"{len(results)} already done",
            eta=f"ETA {eta.text(len(results))}",  # 0:00:00 when every run was done before: the loop never runs
        )
        try:
            while pending or running:
                while pending and free:
                    slot, i = free.pop(0), pending.pop(0)
                    p, run_dir = points[i], points[i].run_dir(out)
                    clear_failure(run_dir)
                    log = p.log_path(out)
                    log.parent.mkdir(parents=True, exist_ok=True)
                    fh = open(log, "a")  # noqa: SIM115 (closed when the process ends)
                    discard_unstarted(p.run_dir(out))
                    cmd = train_command(p, out, slots[slot], base)
                    fh.write(f"$ {shlex.join(cmd)}\n")
                    fh.flush()
                    proc = subprocess.Popen(
                        cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent()
                    )
                    task = progress.add_task(f"  {p.loss}/{p.run_name}", total=None, info=slots[slot] or "", eta="")
                    running[slot] = (proc, i, time.monotonic(), task, fh)
                    live.start(i)
                live.refresh([i for _proc, i, *_ in running.values()])
                progress.update(overall, eta=f"ETA {eta.text(len(results))}")
                if plain is not None:
                    plain.report(len(results), len(running), n_failed())
                for slot, (proc, i, t0, task, fh) in list(running.items()):
                    rc = proc.poll()
                    p, run_dir = points[i], points[i].run_dir(out)
                    if rc is None:
                        progress.update(task, info=f"{slots[slot] or ''} {latest_step(run_dir)}".strip())
                        continue
                    fh.close()
                    secs = time.monotonic() - t0
                    if rc == 0 and run_state(run_dir) == "completed":
                        results[i] = JobResult(p, run_dir, "completed", None, secs)
                        progress.console.print(
                            f"[green]done[/] {escape(p.label)} s{p.seed} ({secs:.0f} s)", soft_wrap=True
                        )
                    else:
                        info = RunDir(run_dir).info()
                        err = info.get("error") or last_error_line(Path(fh.name))
                        if rc == 0:
                            err = f"exited 0 without a completed summary.json ({err})"
                        record_failure(p, out, err)
                        results[i] = JobResult(p, run_dir, "failed", err, secs)
                        progress.console.print(
                            f"[red]failed[/] {escape(p.label)} s{p.seed}: {escape(err)}  (log: {escape(fh.name)})",
                            soft_wrap=True,
                            markup=True,
                        )
                    progress.remove_task(task)
                    live.stop(i)
                    del running[slot]
                    free.append(slot)
                    n_fail = n_failed()
                    if results[i].status == "completed":
                        eta.finished(secs, part_done[i])
                    progress.update(overall, completed=len(results), info=f"{n_fail} failed" * bool(n_fail),
                                    eta=f"ETA {eta.text(len(results))}")
                    if plain is not None:
                        plain.report(len(results), len(running), n_fail, ended=True)
                if running:
                    time.sleep(poll)
        except KeyboardInterrupt as exc:
            # SIGINT (SIGTERM after a `kill`: a run started from a script with `&` ignores SIGINT) lets
            # `platform train` save and mark the run interrupted
            stop = signal.SIGTERM if isinstance(exc, Terminated) or not hasattr(signal, "SIGINT") else signal.SIGINT
            for proc, *_ in running.values():  # every run first: each stops (saving a checkpoint) in parallel
                if proc.poll() is None:
                    proc.send_signal(stop)
            deadline = time.monotonic() + 30
            for proc, i, t0, _task, fh in running.values():
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                fh.close()
                results[i] = JobResult(points[i], points[i].run_dir(out), "interrupted", None, time.monotonic() - t0)
            raise
    return [results[i] for i in sorted(results)]
