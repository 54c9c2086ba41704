"""The layout of a run directory, in one place: no other module names its files.

::

    <logdir>/<plugin>/<loss>/<YYYYmmdd-HHMMSS>-s<seed>/     (or <logdir>/<plugin>/<loss>/<run name>/)
        run.json                plugin, loss, seed, preset, overrides, status, error, accumulated wall time
        config.yaml             the resolved config
        metrics.jsonl           one JSON object per logged step
        summary.json            final metrics, hardware, wall time, package versions, labels_used
        events.out.tfevents.*   TensorBoard scalars and the hparams session
        checkpoints/            step_000000001000.pt ... (the last ``keep_checkpoints``), plus
                                step_000000001000.latest.pt: the parts only the newest checkpoint keeps
        eval.json               written by ``platform eval``
        error.log               the traceback of a crashed run
        compare_error.txt       the one-line error of a failed ``platform compare`` run
        .train.lock             locked by the process training the run (its pid and host; see ``platform.runlock``)

Use :class:`RunDir` for every path inside a run directory, :meth:`RunDir.new_run_path` to place a new run, and
:func:`find_run_dirs` to collect runs under folders.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from contrastlab.platform.errors import ConfigError, RunDirError, StorageError

_CHECKPOINT = re.compile(r"^step_(\d+)\.pt$")


class RunDir:
    """Paths inside one run directory: ``RunDir(path).summary_json`` and so on."""

    RUN_JSON = "run.json"
    CONFIG_YAML = "config.yaml"
    METRICS_JSONL = "metrics.jsonl"
    SUMMARY_JSON = "summary.json"
    EVAL_JSON = "eval.json"
    ERROR_LOG = "error.log"
    COMPARE_ERROR = "compare_error.txt"
    CHECKPOINTS = "checkpoints"
    EVENTS_GLOB = "events.out.tfevents.*"
    TRAIN_LOCK = ".train.lock"

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    # ------------------------------------------------------------------ files
    @property
    def run_json(self) -> Path:
        """``run.json``: identity, status and accumulated wall time."""
        return self.path / self.RUN_JSON

    @property
    def config_yaml(self) -> Path:
        """``config.yaml``: the resolved config."""
        return self.path / self.CONFIG_YAML

    @property
    def metrics_jsonl(self) -> Path:
        """``metrics.jsonl``: one JSON object per logged step."""
        return self.path / self.METRICS_JSONL

    @property
    def summary_json(self) -> Path:
        """``summary.json``: the final metrics of a completed run."""
        return self.path / self.SUMMARY_JSON

    @property
    def eval_json(self) -> Path:
        """``eval.json``: the metrics of the last ``platform eval``."""
        return self.path / self.EVAL_JSON

    @property
    def error_log(self) -> Path:
        """``error.log``: the traceback of a crashed run."""
        return self.path / self.ERROR_LOG

    @property
    def compare_error(self) -> Path:
        """``compare_error.txt``: the one-line error ``platform compare`` recorded for a failed run."""
        return self.path / self.COMPARE_ERROR

    @property
    def train_lock(self) -> Path:
        """``.train.lock``: held by the process training the run, which wrote its pid and host there."""
        return self.path / self.TRAIN_LOCK

    @property
    def checkpoints(self) -> Path:
        """The checkpoint folder."""
        return self.path / self.CHECKPOINTS

    def checkpoint(self, step: int) -> Path:
        """The checkpoint file of ``step``."""
        return self.checkpoints / f"step_{int(step):012d}.pt"

    def checkpoint_latest_part(self, step: int) -> Path:
        """The file with the parts of checkpoint ``step`` that only the newest checkpoint keeps (a replay buffer)."""
        return self.checkpoints / f"step_{int(step):012d}.latest.pt"

    def checkpoint_steps(self) -> list[tuple[int, Path]]:
        """``[(step, checkpoint file), ...]``, oldest first (temporary and partial files excluded)."""
        folder = self.checkpoints
        if not folder.is_dir():
            return []
        found = []
        for path in folder.iterdir():
            match = _CHECKPOINT.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def latest_parts(self) -> list[tuple[int, Path]]:
        """``[(step, latest-only part file), ...]``, oldest first."""
        folder = self.checkpoints
        if not folder.is_dir():
            return []
        found = []
        for path in folder.glob("step_*.latest.pt"):
            try:
                found.append((int(path.name.split("_", 1)[1].split(".", 1)[0]), path))
            except ValueError:
                continue
        return sorted(found)

    def events(self) -> list[Path]:
        """The TensorBoard event files written directly in the run directory."""
        return sorted(self.path.glob(self.EVENTS_GLOB))

    # ------------------------------------------------------------------ resuming
    def log_position(self) -> dict[str, Any]:
        """How far ``metrics.jsonl`` and each event file reach now, in bytes (flush their writers first).

        Saved with every checkpoint: :meth:`rewind_logs` then cuts the logs back to exactly what was logged before
        that checkpoint, rows logged afterwards at the checkpoint's own step (a final evaluation) included.
        """
        metrics = self.metrics_jsonl
        return {"metrics_bytes": metrics.stat().st_size if metrics.is_file() else 0,
                "events": {path.name: path.stat().st_size for path in self.events()}}

    def rewind_logs(self, position: Mapping[str, Any]) -> None:
        """Cut ``metrics.jsonl`` and the event files back to ``position`` (:meth:`log_position`); event files that
        it does not name were started after it and are deleted. A file already shorter is left as it is."""
        metrics = self.metrics_jsonl
        size = int(position.get("metrics_bytes", 0))
        if metrics.is_file() and metrics.stat().st_size > size:
            os.truncate(metrics, size)
        sizes = dict(position.get("events", {}))
        for path in self.events():
            if path.name not in sizes:
                path.unlink()
            elif path.stat().st_size > int(sizes[path.name]):
                os.truncate(path, int(sizes[path.name]))

    # ------------------------------------------------------------------ reading
    @classmethod
    def is_run(cls, path: Path | str) -> bool:
        """Whether ``path`` is a run directory written by ``platform train`` (``config.yaml`` and ``run.json``)."""
        layout = cls(path)
        return layout.config_yaml.is_file() and layout.run_json.is_file()

    @classmethod
    def run_holding(cls, path: Path | str) -> Path | None:
        """The run directory that is ``path`` or holds it (the nearest), or ``None``."""
        return next((p for p in (Path(path), *Path(path).parents) if cls.is_run(p)), None)

    @classmethod
    def has_record(cls, path: Path | str) -> bool:
        """Whether ``path`` has a ``run.json`` (a run, or the placeholder of a run that failed to start)."""
        return cls(path).run_json.is_file()

    def read_info(self) -> dict[str, Any]:
        """The ``run.json``; a missing or not-a-run directory, or a ``run.json`` that names no plugin, raises
        :class:`RunDirError` (one line)."""
        if self.path.is_file():  # e.g. checkpoints/step_….pt: name the run directory that holds it, if any
            home = self.run_holding(self.path)
            hint = f"give its run directory, {home}" if home is not None else "give a run directory of platform train"
            raise RunDirError(f"{self.path} is a file; {hint}")
        if not self.path.is_dir():
            raise RunDirError(f"run directory not found: {self.path}")
        if not self.is_run(self.path):
            raise RunDirError(f"{self.path} is not a run directory (no {self.CONFIG_YAML} and {self.RUN_JSON})")
        info = read_json(self.run_json)
        if info is None:
            raise RunDirError(f"{self.run_json} is unreadable or not a JSON object")
        if not isinstance(info.get("plugin"), str) or not info["plugin"]:
            raise RunDirError(f"{self.run_json} names no plugin (its 'plugin' entry)")
        return info

    def info(self) -> dict[str, Any]:
        """The ``run.json`` as a dict, ``{}`` if it is missing or unreadable (never raises)."""
        return read_json(self.run_json) or {}

    def progress(self) -> float:
        """The part of the run done at its latest checkpoint (``run.json``'s ``progress``, 0 to 1; 0 when unknown)."""
        value = self.info().get("progress")
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if is_number and 0 <= value <= 1 else 0.0

    def summary(self) -> dict[str, Any]:
        """The ``summary.json`` as a dict, ``{}`` if it is missing or unreadable (never raises)."""
        return read_json(self.summary_json) or {}

    # ------------------------------------------------------------------ placing runs
    @staticmethod
    def location(logdir: Path | str, plugin: str, loss: str, name: str) -> RunDir:
        """``<logdir>/<plugin>/<loss>/<name>`` (no check, nothing created)."""
        return RunDir(Path(logdir) / plugin / loss / name)

    @classmethod
    def new_run_path(
        cls, logdir: Path | str, plugin: str, loss: str, seed: int, name: str | None = None, *,
        existing_ok: bool = False,
    ) -> RunDir:
        """Where a new run goes: ``<logdir>/<plugin>/<loss>/<time>-s<seed>`` (``-2``, ``-3``... if taken), or
        ``.../<name>``. A bad ``name`` or a non-empty existing ``name`` directory raise (nothing is created), unless
        ``existing_ok`` (a non-zero ``torchrun`` rank: rank 0 may have started the run there already)."""
        if name is not None:
            if not name or "/" in name or "\\" in name or name in {".", ".."}:
                raise ConfigError(f"--run-name must be a plain directory name (no '/'), got '{name}'")
            layout = cls.location(logdir, plugin, loss, name)
            if not existing_ok and layout.path.is_dir() and any(layout.path.iterdir()):
                if layout.info().get("status") == "completed":
                    raise RunDirError(f"run directory {layout.path} already holds a completed run (its results: "
                                      f"{layout.summary_json}); choose another --run-name")
                raise RunDirError(
                    f"run directory {layout.path} already exists; continue it with: "
                    f"platform train --resume {shlex.quote(str(layout.path))}"
                )
            return layout
        stamp = f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-s{seed}"
        layout, suffix = cls.location(logdir, plugin, loss, stamp), 1
        while layout.path.exists():
            suffix += 1
            layout = cls.location(logdir, plugin, loss, f"{stamp}-{suffix}")
        return layout

    def claim(self) -> RunDir:
        """Create this new run directory (its parent must exist), or, when another process made it since
        :meth:`new_run_path` chose it, the next free ``-2``, ``-3``...: two runs started in the same second with the
        same seed never share a directory (``mkdir`` is atomic). A chosen ``<time>-s<seed>-2`` goes on to ``-3``."""
        numbered = re.fullmatch(r"(.+-s\d+)-(\d+)", self.path.name)  # not -2-2 (its suffix counted again)
        base, suffix = (numbered[1], int(numbered[2])) if numbered else (self.path.name, 1)
        layout = self
        while True:
            try:
                layout.path.mkdir()
                return layout
            except FileExistsError:
                suffix += 1
                layout = RunDir(self.path.with_name(f"{base}-{suffix}"))

    def make_named(self) -> bool:
        """Create this ``--run-name`` directory (its parent must exist); ``False``: it was there already (an empty
        folder: :meth:`new_run_path` refused a non-empty one), so it is not this start's to remove."""
        try:
            self.path.mkdir()
        except FileExistsError:
            return False
        return True

    def write_start(self, config_text: str, info_text: str) -> None:
        """Write a new run's ``config.yaml``, then its ``run.json``. ``config.yaml`` is created exclusively: one
        made by another start meanwhile (the same ``--run-name`` started twice) raises :class:`ConfigError` and
        is left alone. An ``OSError`` (a full disk...) removes the files this call created before it propagates,
        so an empty ``--run-name`` folder the user made stays empty (a ``config.yaml`` left alone in it made the
        next start refuse the folder and suggest a ``--resume`` that could not work)."""
        created: list[Path] = []
        try:
            try:
                self.config_yaml.touch(exist_ok=False)  # atomic: the start that makes it owns the directory
            except FileExistsError:
                raise ConfigError(f"run directory {self.path} was just started by another platform train; choose "
                                  "another --run-name") from None
            created.append(self.config_yaml)
            self.config_yaml.write_text(config_text)
            if not self.run_json.exists():
                created.append(self.run_json)  # before writing: a write that fails may leave a part of the file
            self.run_json.write_text(info_text)
        except OSError:
            for path in created:
                with suppress(OSError):
                    path.unlink()
            raise


def read_json(path: Path | str) -> dict[str, Any] | None:
    """The JSON object in ``path``, or ``None`` if it is missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def strict_json(data: Any) -> str:
    """``data`` as indented, standard JSON: ``nan``/``inf`` become ``null`` (as in ``metrics.jsonl``; Python's bare
    ``NaN`` is refused by jq, JavaScript and most other readers) and unknown objects their ``str``."""
    def finite(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, Mapping):
            return {key: finite(item) for key, item in value.items()}
        return [finite(item) for item in value] if isinstance(value, (list, tuple)) else value

    return json.dumps(finite(data), indent=2, default=str, allow_nan=False)


def first_missing(path: Path | str) -> Path | None:
    """The outermost ancestor of ``path`` (or ``path`` itself) that does not exist yet, or ``None``."""
    missing = None
    for candidate in [Path(path), *Path(path).parents]:
        if candidate.exists() or candidate.is_symlink():
            break
        missing = candidate
    return missing


def remove_created(run_dir: Path, made_dir: bool, made_parents: Path | None) -> None:
    """Undo a run directory's creation: remove ``run_dir`` with its files if this process made it (``made_dir``),
    then the empty folders above it up to ``made_parents`` (the outermost one this process made, ``None``: none);
    a folder another process has put a run into meanwhile stays."""
    if made_dir:
        shutil.rmtree(run_dir, ignore_errors=True)
    if made_parents is None:
        return
    for folder in Path(run_dir).parents:
        if folder != made_parents and made_parents not in folder.parents:
            break
        try:
            folder.rmdir()
        except OSError:  # not empty (another run is in it), or gone
            break


def check_writable_dir(path: Path | str, option: str, *, shown: Path | str | None = None, hint: str = "") -> None:
    """Raise :class:`StorageError` (one line, nothing created) unless directory ``path`` exists and is writable or
    could be created: its nearest existing ancestor must be a writable directory.

    The message reads ``{option} {shown or path}: <what is wrong>{hint}``, e.g.
    ``--logdir /data/runs: /data is a file, not a directory``.
    """
    path = Path(path)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    prefix = f"{option} {shown if shown is not None else path}"
    if not existing.is_dir():
        raise StorageError(f"{prefix}: {existing} is a file, not a directory{hint}")
    if not os.access(existing, os.W_OK | os.X_OK):
        reason = "read-only" if existing == path else "read-only, so nothing can be created in it"
        raise StorageError(f"{prefix}: {existing} is not writable ({reason}){hint}")
    try:  # os.access says yes to root everywhere, /proc and read-only mounts included: try it
        before = existing.stat()
        os.rmdir(tempfile.mkdtemp(prefix=".contrastlab-probe-", dir=existing))
    except OSError as e:
        raise StorageError(f"{prefix}: cannot create anything in {existing} ({e.strerror or e}){hint}") from None
    with suppress(OSError):  # leave no trace, not even a new modification time
        os.utime(existing, ns=(before.st_atime_ns, before.st_mtime_ns))


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path`` (no torn files, and no
    temporary file left however the write stops)."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            tmp.unlink()
        raise


def write_json_atomic(path: Path | str, data: Any) -> None:
    """:func:`write_text_atomic` of :func:`strict_json` ``(data)``."""
    write_text_atomic(path, strict_json(data))


def find_run_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """Directories under ``paths`` with a ``run.json`` (checkpoint folders and symlinks are not entered)."""
    found: dict[Path, None] = {}
    for root in map(Path, paths):
        if not root.is_dir():
            raise RunDirError(f"not a directory: {root}")
        if RunDir.has_record(root):
            found[root] = None
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != RunDir.CHECKPOINTS)
            if RunDir.RUN_JSON in filenames:
                found[Path(dirpath)] = None
                dirnames[:] = []
    return list(found)
