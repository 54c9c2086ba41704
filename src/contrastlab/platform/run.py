"""A run: its directory, seeding, device, TensorBoard writer, metrics, checkpoints, resume and progress.

The directory layout (``<logdir>/<plugin>/<loss>/<time>-s<seed>/`` with ``run.json``, ``config.yaml``,
``metrics.jsonl``, ``summary.json``, ``checkpoints/`` and TensorBoard events) is defined in
:mod:`contrastlab.platform.rundir` only; checkpoint files in :mod:`contrastlab.platform.checkpoints`.
A directory that cannot be written (read-only, a path through a file, a full disk) is a :class:`StorageError`:
one line, and a new run leaves nothing behind.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
import yaml

from contrastlab.platform.checkpoints import CheckpointStore
from contrastlab.platform.config import config_from_dict, config_to_dict, load_yaml_file
from contrastlab.platform.devices import is_main_process, resolve_device
from contrastlab.platform.errors import ConfigError, DataMissingError, PluginError, StorageError
from contrastlab.platform.hparams import hparam_columns, write_session
from contrastlab.platform.plugins import get_recorded_plugin
from contrastlab.platform.preflight import preflight
from contrastlab.platform.progress import ProgressBar
from contrastlab.platform.resume import check_same_config, rewind_logs
from contrastlab.platform.rng import rng_state, seed_everything, set_rng_state
from contrastlab.platform.rundir import RunDir, check_writable_dir, first_missing, remove_created, write_json_atomic
from contrastlab.platform.runlock import lock_run, locked_unless_failed, release_run
from contrastlab.platform.stopping import GracefulStop
from contrastlab.platform.sysinfo import hardware_info, package_versions
from contrastlab.platform.task import TaskConfig, TaskPlugin

CHECKPOINT_DIR = RunDir.CHECKPOINTS
LOG_POSITION = "_log_position"
"""Checkpoint key of :meth:`RunDir.log_position` at save time: what a resume cuts the logs back to."""
CONFIG_RECORD = "_config"
"""Checkpoint key of the run's ``config.yaml`` when the checkpoint was saved: a resume refuses a changed one."""
CLAMP_TAG = "train/clamped_frac"
"""Prefix of the debiased losses' floor statistic; ``summary.json`` records the mean of what was logged."""


class _NullWriter:
    """Stands in for the TensorBoard writer on non-zero ranks."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` looks like a run directory (same as :meth:`RunDir.is_run`)."""
    return RunDir.is_run(path)


def read_run_info(run_dir: Path) -> dict[str, Any]:
    """The ``run.json`` of ``run_dir``; missing or not-a-run directories raise :class:`RunDirError`."""
    return RunDir(run_dir).read_info()


class Run:
    """Everything a plugin's ``train``/``evaluate`` needs: logging, progress, checkpoints, device, config."""

    def __init__(self, plugin: TaskPlugin, config: TaskConfig, run_dir: Path, *, resumed: bool = False) -> None:
        self.plugin = plugin
        self.config = config
        self.dir = Path(run_dir)
        self.rundir = RunDir(self.dir)
        """The paths inside the run directory (:class:`~contrastlab.platform.rundir.RunDir`)."""
        self.resumed = resumed
        self.device = resolve_device(config.device)
        if self.device.type == "cuda" and self.device.index is not None:
            torch.cuda.set_device(self.device)  # so that code using "the current device" follows --device cuda:K
        self.labels_used = False
        """Set to True by the plugin when observed labels reached the loss (label-aware losses only)."""
        self.keep_checkpoints = int(getattr(config, "keep_checkpoints", 2))
        """How many checkpoints to keep (``config.keep_checkpoints``)."""
        self._extra: dict[str, Any] = {}
        self._writer: Any = None
        self._purge_step: int | None = None
        self._started = time.monotonic()
        self._info = self.rundir.info()
        self._metrics_file: Any = None
        self._clamp_log: list[float] = []
        self._bar: ProgressBar | None = None  # the latest progress bar: run.json's "progress" at each checkpoint
        self._bar_part = (0.0, 1.0)  # the part of the whole run that bar covers
        self._config_record: dict[str, Any] | None = None
        self.is_main = is_main_process()
        """Whether this process writes logs, checkpoints and summaries (rank 0 under ``torchrun``)."""
        self.graceful_stop: GracefulStop | None = None
        """Set by ``platform train``: the first Ctrl-C/SIGTERM saves a checkpoint at the next checkpoint point."""

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        plugin: TaskPlugin,
        config: TaskConfig,
        logdir: Path | str = "runs",
        *,
        preset: str | None = None,
        overrides: list[str] | None = None,
        run_name: str | None = None,
    ) -> Run:
        """Make a new run directory ``<logdir>/<plugin>/<loss>/<time>-s<seed>`` (or ``.../<run_name>``) after the
        pre-flight check (:func:`~contrastlab.platform.preflight.preflight`); nothing is written if it fails."""
        preflight(plugin, config)
        layout = RunDir.new_run_path(logdir, plugin.name, config.loss.name, config.seed, run_name,
                                     existing_ok=not is_main_process())  # rank 0 may have made it already
        run_dir = layout.path
        if not is_main_process():
            seed_everything(config.seed)
            return cls(plugin, config, run_dir)
        info = {
            "plugin": plugin.name,
            "loss": config.loss.name,
            "seed": config.seed,
            "preset": preset,
            "overrides": list(overrides or []),
            "status": "running",
            "error": None,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "wall_time_s": 0.0,
        }
        check_writable_dir(logdir, "--logdir")
        made_parents, made_dir = first_missing(run_dir.parent), False
        try:
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            # atomic: another `platform train` may take the same name meanwhile (<time>-s<seed>: the next is taken)
            layout, made_dir = (layout.claim(), True) if run_name is None else (layout, layout.make_named())
            run_dir = layout.path
            layout.write_start(yaml.safe_dump(config_to_dict(config), sort_keys=False), json.dumps(info, indent=2))
        except OSError as exc:
            remove_created(run_dir, made_dir, made_parents)  # leave nothing behind
            where = exc.filename or run_dir
            raise StorageError(f"--logdir {logdir}: cannot create {where}: {exc.strerror or exc}") from None
        seed_everything(config.seed)
        run = cls(plugin, config, run_dir)
        lock_run(run_dir, run)  # a --resume of it from another process meanwhile is refused (platform.runlock)
        return run

    @classmethod
    def open(cls, run_dir: Path | str, *, device: str | None = None, resume: bool = True) -> Run:
        """Reopen an existing run (``--resume`` or ``platform eval``); not-a-run directories raise, and the run's
        config must pass the pre-flight check again (data still present, plugin still compatible)."""
        layout = RunDir(run_dir)
        info = layout.read_info()
        plugin = get_recorded_plugin(info["plugin"], run_dir)
        data = load_yaml_file(layout.config_yaml)  # a damaged file: one line, not a YAML traceback
        if device is not None:
            data["device"] = device
        try:
            config = config_from_dict(plugin, data)
        except ConfigError as exc:  # e.g. a config.yaml of another plugin
            raise ConfigError(f"{layout.config_yaml} does not fit plugin '{plugin.name}' (named in "
                              f"{layout.run_json}): {exc}") from None
        try:
            preflight(plugin, config)
        except DataMissingError as exc:  # its hint is for a new run: a reopened one has no --set
            raise DataMissingError(f"{exc} (a reopened run reads the data named in {layout.config_yaml}: put it "
                                   f"back there, or edit that file)") from None
        # the same seeding as Run.create: a run killed before its first checkpoint (no saved RNG state to restore)
        # resumes to the metrics of an uninterrupted run; a checkpoint's RNG state, when loaded, replaces this
        seed_everything(config.seed)
        run = cls(plugin, config, run_dir, resumed=resume)
        if resume:
            run._prepare_resume()
        return run

    def _write_info(self, **fields: Any) -> None:
        self._info.update(fields)
        if not self.is_main:
            return
        try:
            write_json_atomic(self.rundir.run_json, self._info)
        except OSError as exc:
            raise StorageError(f"cannot write {self.rundir.run_json}: {exc.strerror or exc}") from None

    @property
    def info(self) -> dict[str, Any]:
        """The contents of ``run.json``."""
        return dict(self._info)

    def _prepare_resume(self) -> None:
        """Refuse a changed ``config.yaml``, then drop everything logged after the latest checkpoint so nothing is
        repeated or lost (:func:`~contrastlab.platform.resume.rewind_logs`)."""
        if not self.is_main:
            return
        with locked_unless_failed(self.dir, self):  # first: another process training it is refused before any change
            step = self.latest_checkpoint_step()
            saved = self.checkpoints.peek(LOG_POSITION, CONFIG_RECORD)
            check_same_config(self.rundir, step, saved.get(CONFIG_RECORD), self._recorded_config())
            self.checkpoints.discard_partial()
            rows, self._purge_step = rewind_logs(self.rundir, step, saved.get(LOG_POSITION))
            self._clamp_log += [v for row in rows for tag, v in row.items()  # summary.json's mean: the whole run
                                if tag.startswith(CLAMP_TAG) and isinstance(v, (int, float))]
            self._write_info(status="running", error=None)

    # ------------------------------------------------------------------ logging
    @property
    def writer(self) -> Any:
        """The TensorBoard ``SummaryWriter`` of this run (created on first use)."""
        if self._writer is None and not self.is_main:
            self._writer = _NullWriter()
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(self.dir), purge_step=self._purge_step)
        return self._writer

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        """Log scalars at ``step`` to TensorBoard and append them to ``metrics.jsonl`` (rank 0 only)."""
        if not self.is_main:
            return
        row: dict[str, Any] = {"step": int(step), "wall_time": round(self.elapsed(), 3)}
        for tag, value in metrics.items():
            value = float(value)
            row[tag] = value if math.isfinite(value) else None
            if tag.startswith(CLAMP_TAG) and math.isfinite(value):
                self._clamp_log.append(value)
            self.writer.add_scalar(tag, value, int(step))
        try:
            if self._metrics_file is None:
                self._metrics_file = open(self.rundir.metrics_jsonl, "a", buffering=1)  # noqa: SIM115
            self._metrics_file.write(json.dumps(row) + "\n")
        except OSError as exc:
            raise StorageError(f"cannot write {self.rundir.metrics_jsonl}: {exc.strerror or exc}") from None

    def elapsed(self) -> float:
        """Wall seconds spent in this run, summed over resumes (a run.json ``wall_time_s`` that is no number ≥ 0: 0)."""
        before = self._info.get("wall_time_s")
        before = float(before) if type(before) in (int, float) and 0 <= before < math.inf else 0.0
        return before + (time.monotonic() - self._started)

    @contextmanager
    def progress(
        self, total: int, description: str = "train", unit: str = "step", initial: int = 0,
        part: tuple[float, float] = (0.0, 1.0),
    ) -> Iterator[ProgressBar]:
        """A progress bar with rate and ETA: ``with run.progress(n) as bar: bar.update(1, loss=0.3)``. ``part``: the
        share of the whole run it covers (from, to), for a run with several bars (``run.json``'s ``progress``)."""
        bar = ProgressBar(total=total, description=description, unit=unit, initial=initial, enabled=self.is_main)
        self._bar, self._bar_part = bar, part
        with bar:
            yield bar

    def record(self, **fields: Any) -> None:
        """Extra fields for ``summary.json`` (e.g. the estimated prior, the τ+ actually used)."""
        self._extra.update(fields)

    # ------------------------------------------------------------------ checkpoints
    @property
    def stop_requested(self) -> bool:
        """Whether Ctrl-C/SIGTERM asked this run to stop (see :mod:`contrastlab.platform.stopping`)."""
        return self.graceful_stop is not None and self.graceful_stop.requested

    def checkpoint_due(self, step: int) -> bool:
        """Whether ``step`` is a multiple of ``config.checkpoint_every``, or a stop was requested (the checkpoint
        saved then ends the run as interrupted, and ``--resume`` continues from it)."""
        return self.stop_requested or (step > 0 and step % self.config.checkpoint_every == 0)

    @property
    def checkpoints(self) -> CheckpointStore:
        """The checkpoint files of this run (retention: ``keep_checkpoints``)."""
        return CheckpointStore(self.rundir, keep=self.keep_checkpoints)

    def latest_checkpoint_step(self) -> int | None:
        """Step of the newest checkpoint, or ``None``."""
        return self.checkpoints.latest_step()

    def save_checkpoint(self, state: Mapping[str, Any], step: int, *, latest_only: Iterable[str] = (),
                        final: bool = False) -> Path:
        """Save ``state`` (plus ``step`` and RNG states) crash-safely; ``step`` is on the logging axis.

        Keys in ``latest_only`` (e.g. ``"replay_buffer"``) are kept with the newest checkpoint only: older retained
        checkpoints resume without them. Only the newest ``keep_checkpoints`` checkpoints are kept. A failed write
        (disk full) keeps the previous checkpoint and raises :class:`StorageError` with one line. After a stop
        request (:attr:`stop_requested`) it raises ``KeyboardInterrupt`` once the checkpoint is written, unless
        ``final`` (the checkpoint after the last step: the run then finishes, its summary moments away).
        """
        stop = self.graceful_stop if self.stop_requested else None
        if stop is not None:
            stop.hold()  # the stop's grace period must not cut this write short
        path = self.rundir.checkpoint(step)
        if not self.is_main:
            return path
        payload = dict(state)
        payload["step"] = int(step)
        payload["_rng"] = rng_state()
        payload[LOG_POSITION] = self._flushed_log_position()
        payload[CONFIG_RECORD] = self._recorded_config()
        self.checkpoints.save(payload, int(step), latest_only=latest_only)
        (lo, hi), bar = self._bar_part, self._bar  # the part of the whole run done
        done = {} if bar is None else {"progress": round(lo + (hi - lo) * min(bar.done / bar.total, 1.0), 4)}
        self._write_info(wall_time_s=self.elapsed(), last_checkpoint_step=int(step), **done)  # compare's ETA
        self._started = time.monotonic()
        if stop is not None and not final:
            stop.saved_step = int(step)
            raise KeyboardInterrupt
        return path

    def _recorded_config(self) -> dict[str, Any] | None:
        """``config.yaml`` as written when the run was created (read once), saved with every checkpoint."""
        if self._config_record is None:
            with suppress(OSError, yaml.YAMLError):
                self._config_record = yaml.safe_load(self.rundir.config_yaml.read_text()) or {}
        return self._config_record

    def _flushed_log_position(self) -> dict[str, Any] | None:
        """Flush the metrics file and the writer, then :meth:`RunDir.log_position` (``None`` if that fails)."""
        with suppress(OSError):
            if self._metrics_file is not None:
                self._metrics_file.flush()
            if self._writer is not None:
                self._writer.flush()
            return self.rundir.log_position()
        return None

    def load_checkpoint(self, map_location: Any = None, restore_rng: bool = True) -> dict[str, Any] | None:
        """The newest checkpoint's state (with ``"step"``), restoring RNG states; ``None`` if there is none."""
        state = self.checkpoints.load(map_location=map_location or self.device)
        if state is None:
            return None
        for key in (LOG_POSITION, CONFIG_RECORD):
            state.pop(key, None)
        rng = state.pop("_rng", None)
        if restore_rng and rng is not None:
            set_rng_state(rng)
        return state

    # ------------------------------------------------------------------ end of run
    def finish(self, metrics: Mapping[str, float]) -> dict[str, Any]:
        """Write ``summary.json`` and hparams, mark the run completed, and return the summary.

        When the run logged ``train/clamped_frac…`` (the debiased losses' floor statistic), the metrics get
        ``train/clamped_frac``: the mean of every value logged by the run (a resumed run counts the rows it kept).
        """
        metrics = metric_numbers(self.plugin.name, metrics)
        if self._clamp_log and CLAMP_TAG not in metrics:
            metrics[CLAMP_TAG] = sum(self._clamp_log) / len(self._clamp_log)
        wall = self.elapsed()
        summary: dict[str, Any] = {
            "plugin": self.plugin.name,
            "loss": self.config.loss.name,
            "loss_hparams": self.config.loss.hparams(),
            "sampler": self.config.sampler.name,
            "encoder": self.config.encoder.name,
            "seed": self.config.seed,
            "preset": self._info.get("preset"),
            "overrides": self._info.get("overrides", []),
            "metrics": metrics,
            "primary_metric": self.plugin.primary_metric,
            "higher_is_better": self.plugin.higher_is_better,
            "wall_time_s": round(wall, 2),
            "device": str(self.device),
            "hardware": hardware_info(self.device),
            "versions": package_versions(),
            "labels_used": bool(self.labels_used),
            "loss_used": self.plugin.uses_loss(self.config),  # False: report lists the run under loss "none"
            **self._extra,
        }
        if not self.is_main:
            return summary
        try:
            write_json_atomic(self.rundir.summary_json, summary)
        except OSError as exc:
            error = f"cannot write {self.rundir.summary_json}: {exc.strerror or exc}"
            self.mark("failed", error=f"StorageError: {error}")  # not left "running": --resume finishes it
            raise StorageError(error) from None
        with suppress(ValueError, TypeError):
            write_session(self.writer, hparam_columns(self.plugin.name, self.config, self._info.get("preset")))
        self._write_info(status="completed", wall_time_s=wall, error=None)
        self.close()
        return summary

    def mark(self, status: str, error: str | None = None) -> None:
        """Record ``interrupted``/``failed`` in ``run.json`` (the latest checkpoint stays resumable).

        Best effort: when the disk is full or the directory went away, the status stays as it was.
        """
        with suppress(OSError):
            self._write_info(status=status, error=error, wall_time_s=self.elapsed())
        self._started = time.monotonic()
        with suppress(OSError):
            self.close()

    def close(self) -> None:
        """Flush and close the writer and the metrics file; give back the training lock this Run took (runlock)."""
        release_run(self.dir, self)
        if self._metrics_file is not None:
            self._metrics_file.close()
            self._metrics_file = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def metric_numbers(plugin: str, metrics: Mapping[str, Any] | None, hook: str = "train") -> dict[str, float]:
    """A plugin's ``train``/``evaluate`` metrics as floats; one that is not a number is the plugin's bug, said in one
    line (:class:`PluginError`)."""
    out: dict[str, float] = {}
    for key, value in (metrics or {}).items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            raise PluginError(f"plugin '{plugin}' returned metric {key}={value!r} from {hook}(); metrics must be "
                              "numbers") from None
    return out
