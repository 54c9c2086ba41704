"""The Ray backend of ``platform compare`` (and ``platform tune --backend ray``): one Ray task per grid point.

Each task runs exactly the ``platform train`` process the local runner runs (:func:`runner.train_command`), so
run names, skip-finished, ``--resume`` of unfinished runs and failure records are the same as with
``--backend local``. What Ray adds:

* **Resources.** Every task declares ``num_cpus=--cpus-per-run`` and ``num_gpus=--gpus-per-run``; Ray packs as
  many runs on a node as its resources allow (``--gpus-per-run 0.25``: four runs per GPU). A run that got a GPU
  is started with ``--device cuda`` (Ray sets ``CUDA_VISIBLE_DEVICES`` for the task).
* **Retries.** A run whose process fails, or whose Ray worker dies (node lost, process killed), is retried up to
  ``--max-retries`` times; a retry continues the run directory with ``--resume`` when it has one. After the last
  retry the run is recorded as failed (``compare_error.txt``) and the other runs go on.
* **Where results land.** The driver writes a marker file ``OUT/.ray-driver`` holding a random token. A task
  that can read the same token at the same path sees the driver's ``OUT`` (shared file system) and trains into
  it directly. Otherwise the task trains into a scratch directory on its node (an unfinished run directory is
  shipped to it first, as a tar archive), and ships the finished run directory and its log back as tar bytes;
  the driver unpacks them into ``OUT``. ``shared_fs=False`` forces the shipping path. The scratch directory is
  deleted when the task ends, and by a small helper process (:func:`remove_when_orphaned`) when its worker is
  killed instead (Ctrl-C's ``ray.cancel(force=True)``, a lost worker), so no run directory stays in the node's
  temp dir.
* **Ctrl-C.** Ray workers are not in the terminal's process group, so Ctrl-C reaches only the driver: it
  cancels every outstanding task (``ray.cancel(force=True)`` kills the worker, and the worker's death kills its
  ``platform train`` child) and re-raises :class:`KeyboardInterrupt`. Connecting on the main thread also hooks
  SIGINT so that grids run from other threads (``platform tune --parallel N``) stop the same way
  (:mod:`.ray_cluster`, which also checks ``--address`` and the cluster's size before anything is written).
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import signal
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape

from contrastlab.experiments import runner
from contrastlab.experiments.grid import GridPoint, count
from contrastlab.experiments.interrupts import interruptible
from contrastlab.experiments.ray_cluster import (  # noqa: F401 - connection helpers, also used from here
    INSTALL_HINT,
    check_address,
    check_resources,
    connect,
    connect_checked,
    import_ray,
)

MARKER = ".ray-driver"
"""File in ``OUT`` whose token tells a Ray task that it sees the driver's ``OUT``."""


def remove_when_orphaned(folder: Path) -> Any:
    """Start a detached helper process that deletes ``folder`` once this process ends, however it ends; returns
    the write end of its stdin, to close when ``folder`` is gone. The helper waits for the end of that pipe, whose
    only writer is this process, so a SIGKILL (``ray.cancel(force=True)`` kills a worker without running its
    ``finally``) triggers it too. It is started through a short-lived intermediate, in its own session: Ray kills
    the children and the process group of a worker that exits, and would take the helper with it."""
    import subprocess
    import sys

    clean = ("import os, shutil, sys, time\nsys.stdin.buffer.read()\n"
             "for _ in range(20):  # the killed worker's platform train child may still be writing in it\n"
             "    shutil.rmtree(sys.argv[1], ignore_errors=True)\n"
             "    time.sleep(0.5)\n"
             "    if not os.path.exists(sys.argv[1]): break")
    spawn = ("import subprocess, sys\nsubprocess.Popen([sys.executable, '-I', '-S', '-c', sys.argv[1], sys.argv[2]], "
             "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
    middle = subprocess.Popen([sys.executable, "-I", "-S", "-c", spawn, clean, str(folder)], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    middle.wait()
    return middle.stdin


def pack(path: Path, arcname: str) -> bytes:
    """``path`` (a file or directory) as gzip'd tar bytes under ``arcname``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(str(path), arcname=arcname)
    return buf.getvalue()


def unpack(data: bytes, dest: Path) -> None:
    """Unpack :func:`pack` bytes into ``dest`` (members must stay inside ``dest``)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
            return
        root = dest.resolve()  # pragma: no cover - Pythons without extraction filters (< 3.10.12 / 3.11.4)
        for member in tar.getmembers():
            target = (root / member.name).resolve()
            if not (member.isfile() or member.isdir()) or (target != root and root not in target.parents):
                raise ValueError(f"refusing to unpack {member.name!r} outside {dest}")
        tar.extractall(dest)


def train_point(
    point: GridPoint,
    out: str,
    token: str,
    shipped: bytes | None,
    use_gpu: bool,
    shared_fs: bool | None,
    env_extra: dict[str, str],
) -> dict[str, Any]:
    """Body of one Ray task: run ``platform train`` for ``point``; raise on failure so that Ray retries.

    Returns ``{"seconds", "shipped": tar bytes of the run directory and log or None, "host", "pid"}``.
    """
    import shutil
    import subprocess
    import tempfile

    driver_out = Path(out)
    marker = driver_out / MARKER
    sees_out = shared_fs is not False and marker.is_file() and marker.read_text().strip() == token
    scratch = None if sees_out else Path(tempfile.mkdtemp(prefix="contrastlab-ray-"))
    janitor = None if scratch is None else remove_when_orphaned(scratch)
    work_out = driver_out if scratch is None else scratch
    rel = point.run_dir(driver_out).relative_to(driver_out)
    if scratch is not None and shipped is not None:
        unpack(shipped, scratch / rel.parent)
    log = point.log_path(work_out)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = runner.train_env(1, **env_extra)
    try:
        run_dir = point.run_dir(work_out)
        runner.clear_failure(run_dir)
        runner.discard_unstarted(run_dir)  # a retry after a kill inside Run.create starts clean
        cmd = runner.train_command(point, work_out, "cuda" if use_gpu else None, runner.platform_base_command())
        # SIGKILL when the Ray worker dies, so a retry never races an orphan
        kill_with_worker = runner.die_with_parent(signal.SIGKILL)
        t0 = time.monotonic()
        with open(log, "a") as fh:
            fh.write(f"# ray task on {socket.gethostname()} pid {os.getpid()}\n")
            if runner.run_state(run_dir) == "completed":  # a retry after the worker died between the run's end
                fh.write("# the run completed before this attempt: nothing to train\n")  # and the task's return
                rc = 0
            else:
                fh.write(f"$ {' '.join(cmd)}\n")
                fh.flush()
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                        preexec_fn=kill_with_worker)
                rc = proc.wait()
        seconds = time.monotonic() - t0
        ok = rc == 0 and runner.run_state(run_dir) == "completed"
        shipped_back = None
        if scratch is not None:
            buf = {"run": pack(run_dir, rel.name) if run_dir.is_dir() else None, "log": log.read_bytes()}
            shipped_back = buf
        if not ok:
            err = runner.RunDir(run_dir).info().get("error") or runner.last_error_line(log)
            raise RunFailedError(err if rc != 0 else f"exited 0 without a completed summary.json ({err})", shipped_back)
        return {"seconds": seconds, "shipped": shipped_back, "host": socket.gethostname(), "pid": os.getpid()}
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        if janitor is not None:
            janitor.close()  # the helper finds nothing left to delete and exits


class RunFailedError(RuntimeError):
    """A training process failed (Ray retries the task); carries the run directory when it was shipped."""

    def __init__(self, error: str, shipped: dict[str, Any] | None = None) -> None:
        super().__init__(error)
        self.error, self.shipped = error, shipped

    def __reduce__(self) -> Any:
        return (RunFailedError, (self.error, self.shipped))


def land(point: GridPoint, out: Path, shipped: dict[str, Any] | None) -> None:
    """Put a shipped run directory and its log where the local backend would have written them."""
    if not shipped:
        return
    run_dir = point.run_dir(out)
    if shipped.get("run") is not None:
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)
        unpack(shipped["run"], run_dir.parent)
    log = point.log_path(out)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        fh.write(shipped.get("log") or b"")


def _failure_text(exc: BaseException) -> tuple[str, dict[str, Any] | None]:
    cause = exc if isinstance(exc, RunFailedError) else getattr(exc, "cause", None)
    if isinstance(cause, RunFailedError):
        return cause.error, cause.shipped
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {(lines[-1] if lines else '').strip()[:300]}", None


def run_grid_ray(
    points: Sequence[GridPoint],
    out: Path,
    *,
    address: str | None = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
    max_retries: int = 2,
    shared_fs: bool | None = None,
    console: Any = None,
    env: dict[str, str] | None = None,
    announce: bool = True,
    settled: Callable[[], bool] | None = None,
) -> list[runner.JobResult]:
    """Run ``points`` on a Ray cluster; same results (and run directories) as :func:`runner.run_grid`.

    ``announce``: print the "ray: N runs submitted" line and a line per finished run (``platform tune`` runs one
    grid per trial and prints its own line per trial instead).
    ``settled``: see :func:`.interrupts.interruptible`.
    Ctrl-C (:class:`KeyboardInterrupt` here, or the SIGINT hook's signal when this runs outside the main thread)
    cancels every outstanding task, prints nothing more, and raises :class:`KeyboardInterrupt`."""
    from rich.console import Console

    ray = connect_checked(address, cpus_per_run, gpus_per_run)
    out, console = Path(out).resolve(), console or Console(stderr=True)
    out.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(8)
    (out / MARKER).write_text(token)
    task = ray.remote(train_point).options(
        num_cpus=cpus_per_run, num_gpus=gpus_per_run, max_retries=max_retries, retry_exceptions=True
    )
    results: dict[int, runner.JobResult] = {}
    refs: dict[Any, tuple[int, float]] = {}
    try:
        with interruptible(settled) as stop:
            try:
                for i, p in enumerate(points):
                    if stop is not None and stop.is_set():
                        raise KeyboardInterrupt
                    run_dir = p.run_dir(out)
                    state = runner.run_state(run_dir)
                    if state == "completed":
                        results[i] = runner.JobResult(p, run_dir, "skipped")
                        continue
                    runner.clear_failure(run_dir)
                    shipped = pack(run_dir, run_dir.name) if state == "resume" else None
                    ref = task.remote(p, str(out), token, shipped, gpus_per_run > 0, shared_fs, dict(env or {}))
                    refs[ref] = (i, time.monotonic())
                if announce:
                    console.print(
                        f"ray: {count(len(refs), 'run')} submitted ({len(results)} finished, skipped), "
                        f"{cpus_per_run:g} CPU / {gpus_per_run:g} GPU each, up to {max_retries} retries",
                        highlight=False,
                        soft_wrap=True,
                    )
                _collect(ray, refs, results, points, out, console if announce else None, stop)
            except KeyboardInterrupt:
                for ref in refs:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)  # kills the worker; its `platform train` child dies with it
                raise
    finally:
        (out / MARKER).unlink(missing_ok=True)
    return [results[i] for i in sorted(results)]


def _collect(
    ray: Any,
    refs: dict[Any, tuple[int, float]],
    results: dict[int, runner.JobResult],
    points: Sequence[GridPoint],
    out: Path,
    console: Any,
    stop: threading.Event | None,
) -> None:
    """Wait for the tasks in ``refs`` (removing each as it ends), recording each result and printing it when a
    ``console`` is given; raise :class:`KeyboardInterrupt` as soon as ``stop`` is set."""
    total = len(points)
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
        for ref in ready:
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            i, t0 = refs.pop(ref)
            p, run_dir = points[i], points[i].run_dir(out)
            try:
                value = ray.get(ref)
            except Exception as exc:  # the task failed after its retries (process failure or lost worker)
                err, shipped = _failure_text(exc)
                land(p, out, shipped)
                runner.record_failure(p, out, err)
                results[i] = runner.JobResult(p, run_dir, "failed", err, time.monotonic() - t0)
                if console is not None:
                    console.print(escape(f"failed {p.label} s{p.seed}: {err}"), highlight=False, soft_wrap=True)
                continue
            land(p, out, value["shipped"])
            results[i] = runner.JobResult(p, run_dir, "completed", None, float(value["seconds"]))
            if console is not None:
                console.print(
                    escape(f"done {p.label} s{p.seed} ({value['seconds']:.0f} s on {value['host']}); "
                           f"{len(results)}/{total}"),
                    highlight=False,
                    soft_wrap=True,
                )
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt
