"""A run: its directory, seeding, device, TensorBoard writer, metrics, checkpoints, resume and progress.

Layout (DESIGN.md "Runs")::

    <logdir>/<plugin>/<loss>/<YYYYmmdd-HHMMSS>-s<seed>/
        config.yaml       resolved config
        run.json          plugin, loss, seed, preset, overrides, status, error, accumulated wall time
        events.out.tfevents.*   TensorBoard scalars (+ hparams at the end)
        metrics.jsonl     one JSON object per logged step
        checkpoints/      step_000001000.pt ... (atomic writes, last ``keep_checkpoints`` kept)
        summary.json      final metrics, hardware, wall time, package versions, labels_used
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from contrastlab.platform.config import config_from_dict, config_to_dict
from contrastlab.platform.errors import DeviceError, RunDirError
from contrastlab.platform.plugins import registry
from contrastlab.platform.preflight import preflight
from contrastlab.platform.progress import ProgressBar
from contrastlab.platform.sysinfo import hardware_info, package_versions
from contrastlab.platform.task import TaskConfig, TaskPlugin

CHECKPOINT_DIR = "checkpoints"
CLAMP_TAG = "train/clamped_frac"
"""Prefix of the debiased losses' floor statistic; ``summary.json`` records the mean of what was logged."""


def resolve_device(spec: str) -> torch.device:
    """``auto`` → CUDA when available else CPU; ``cpu``; ``cuda``; ``cuda:K``. Unavailable CUDA raises."""
    spec = (spec or "auto").strip().lower()
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "cuda" or spec.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise DeviceError(f"device '{spec}' requested but CUDA is not available here; use --device cpu or auto")
        index = int(spec.split(":", 1)[1]) if ":" in spec else 0
        if index >= torch.cuda.device_count():
            raise DeviceError(
                f"device '{spec}' does not exist; this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
        return torch.device(spec)
    raise DeviceError(f"unknown device '{spec}'; valid: auto, cpu, cuda, cuda:K")


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def is_main_process() -> bool:
    """False on the non-zero ranks of a ``torchrun`` job: only rank 0 writes the run directory."""
    return int(os.environ.get("RANK", "0")) == 0


class _NullWriter:
    """Stands in for the TensorBoard writer on non-zero ranks."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` looks like a run directory."""
    return (path / "config.yaml").is_file() and (path / "run.json").is_file()


def read_run_info(run_dir: Path) -> dict[str, Any]:
    """The ``run.json`` of ``run_dir``; missing or not-a-run directories raise :class:`RunDirError`."""
    if not run_dir.is_dir():
        raise RunDirError(f"run directory not found: {run_dir}")
    if not is_run_dir(run_dir):
        raise RunDirError(f"{run_dir} is not a run directory (no config.yaml and run.json)")
    return json.loads((run_dir / "run.json").read_text())


class Run:
    """Everything a plugin's ``train``/``evaluate`` needs: logging, progress, checkpoints, device, config."""

    def __init__(self, plugin: TaskPlugin, config: TaskConfig, run_dir: Path, *, resumed: bool = False) -> None:
        self.plugin = plugin
        self.config = config
        self.dir = Path(run_dir)
        self.resumed = resumed
        self.device = resolve_device(config.device)
        self.labels_used = False
        """Set to True by the plugin when observed labels reached the loss (label-aware losses only)."""
        self.keep_checkpoints = 2
        self._extra: dict[str, Any] = {}
        self._writer: Any = None
        self._purge_step: int | None = None
        self._started = time.monotonic()
        self._info = self._read_info()
        self._metrics_file: Any = None
        self._clamp_log: list[float] = []
        self.is_main = is_main_process()
        """Whether this process writes logs, checkpoints and summaries (rank 0 under ``torchrun``)."""

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
        if run_name is not None and (not run_name or "/" in run_name or "\\" in run_name or run_name in {".", ".."}):
            from contrastlab.platform.errors import ConfigError

            raise ConfigError(f"--run-name must be a plain directory name (no '/'), got '{run_name}'")
        preflight(plugin, config)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        base = Path(logdir) / plugin.name / config.loss.name
        run_dir = base / (run_name or f"{stamp}-s{config.seed}")
        if run_name is None:
            suffix = 1
            while run_dir.exists():
                suffix += 1
                run_dir = base / f"{stamp}-s{config.seed}-{suffix}"
        elif run_dir.exists() and any(run_dir.iterdir()):
            raise RunDirError(f"run directory {run_dir} already exists; continue it with --resume {run_dir}")
        if not is_main_process():
            seed_everything(config.seed)
            return cls(plugin, config, run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False))
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
        (run_dir / "run.json").write_text(json.dumps(info, indent=2))
        seed_everything(config.seed)
        return cls(plugin, config, run_dir)

    @classmethod
    def open(cls, run_dir: Path | str, *, device: str | None = None, resume: bool = True) -> Run:
        """Reopen an existing run (``--resume`` or ``platform eval``); not-a-run directories raise, and the run's
        config must pass the pre-flight check again (data still present, plugin still compatible)."""
        run_dir = Path(run_dir)
        info = read_run_info(run_dir)
        plugin = registry("plugin").get(info["plugin"]).factory()
        data = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
        if device is not None:
            data["device"] = device
        config = config_from_dict(plugin, data)
        preflight(plugin, config)
        run = cls(plugin, config, run_dir, resumed=resume)
        if resume:
            run._prepare_resume()
        return run

    def _read_info(self) -> dict[str, Any]:
        path = self.dir / "run.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    def _write_info(self, **fields: Any) -> None:
        self._info.update(fields)
        if not self.is_main:
            return
        tmp = self.dir / "run.json.tmp"
        tmp.write_text(json.dumps(self._info, indent=2))
        os.replace(tmp, self.dir / "run.json")

    @property
    def info(self) -> dict[str, Any]:
        """The contents of ``run.json``."""
        return dict(self._info)

    def _prepare_resume(self) -> None:
        """Drop everything logged after the latest checkpoint so nothing is repeated or lost."""
        step = self.latest_checkpoint_step()
        keep = -1 if step is None else step
        metrics = self.dir / "metrics.jsonl"
        if metrics.is_file() and self.is_main:
            kept = []
            for line in metrics.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crash
                if row.get("step", 0) <= keep:
                    kept.append(line)
            metrics.write_text("".join(f"{line}\n" for line in kept))
        self._purge_step = keep + 1
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
        if self._metrics_file is None:
            self._metrics_file = open(self.dir / "metrics.jsonl", "a", buffering=1)  # noqa: SIM115
        self._metrics_file.write(json.dumps(row) + "\n")

    def elapsed(self) -> float:
        """Wall seconds spent in this run, summed over resumes."""
        return float(self._info.get("wall_time_s", 0.0)) + (time.monotonic() - self._started)

    @contextmanager
    def progress(
        self, total: int, description: str = "train", unit: str = "step", initial: int = 0
    ) -> Iterator[ProgressBar]:
        """A progress bar with rate and ETA: ``with run.progress(n) as bar: bar.update(1, loss=0.3)``."""
        bar = ProgressBar(total=total, description=description, unit=unit, initial=initial, enabled=self.is_main)
        with bar:
            yield bar

    def record(self, **fields: Any) -> None:
        """Extra fields for ``summary.json`` (e.g. the estimated prior, the τ+ actually used)."""
        self._extra.update(fields)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_due(self, step: int) -> bool:
        """Whether ``step`` is a multiple of ``config.checkpoint_every``."""
        return step > 0 and step % self.config.checkpoint_every == 0

    def _checkpoints(self) -> list[tuple[int, Path]]:
        folder = self.dir / CHECKPOINT_DIR
        found = []
        for path in folder.glob("step_*.pt") if folder.is_dir() else []:
            try:
                found.append((int(path.stem.split("_", 1)[1]), path))
            except ValueError:
                continue
        return sorted(found)

    def latest_checkpoint_step(self) -> int | None:
        """Step of the newest checkpoint, or ``None``."""
        found = self._checkpoints()
        return found[-1][0] if found else None

    def save_checkpoint(self, state: Mapping[str, Any], step: int) -> Path:
        """Atomically save ``state`` (plus ``step`` and RNG states); ``step`` is on the logging axis."""
        folder = self.dir / CHECKPOINT_DIR
        path = folder / f"step_{int(step):012d}.pt"
        if not self.is_main:
            return path
        folder.mkdir(exist_ok=True)
        payload = dict(state)
        payload["step"] = int(step)
        payload["_rng"] = _rng_state()
        tmp = path.with_suffix(".pt.tmp")
        torch.save(payload, tmp)
        os.replace(tmp, path)
        for _, old in self._checkpoints()[: -self.keep_checkpoints]:
            old.unlink(missing_ok=True)
        if self._metrics_file is not None:
            self._metrics_file.flush()
        if self._writer is not None:
            self._writer.flush()
        self._write_info(wall_time_s=self.elapsed(), last_checkpoint_step=int(step))
        self._started = time.monotonic()
        return path

    def load_checkpoint(self, map_location: Any = None, restore_rng: bool = True) -> dict[str, Any] | None:
        """The newest checkpoint's state (with ``"step"``), restoring RNG states; ``None`` if there is none."""
        found = self._checkpoints()
        if not found:
            return None
        state = torch.load(found[-1][1], map_location=map_location or self.device, weights_only=False)
        rng = state.pop("_rng", None)
        if restore_rng and rng is not None:
            _set_rng_state(rng)
        return state

    # ------------------------------------------------------------------ end of run
    def finish(self, metrics: Mapping[str, float]) -> dict[str, Any]:
        """Write ``summary.json`` and hparams, mark the run completed, and return the summary.

        When the run logged ``train/clamped_frac…`` (the debiased losses' floor statistic), the metrics get
        ``train/clamped_frac``: the mean of the values logged in this process (after a resume: since the resume).
        """
        metrics = {k: float(v) for k, v in (metrics or {}).items()}
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
            **self._extra,
        }
        if not self.is_main:
            return summary
        (self.dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        hparams = {"loss": self.config.loss.name, "seed": self.config.seed}
        hparams.update(
            {f"loss.{k}": v for k, v in self.config.loss.hparams().items() if isinstance(v, (int, float, str, bool))}
        )
        with suppress(ValueError, TypeError):
            self.writer.add_hparams(hparams, {f"hparam/{k}": v for k, v in metrics.items()}, run_name=".")
        self._write_info(status="completed", wall_time_s=wall, error=None)
        self.close()
        return summary

    def mark(self, status: str, error: str | None = None) -> None:
        """Record ``interrupted``/``failed`` in ``run.json`` (the latest checkpoint stays resumable)."""
        self._write_info(status=status, error=error, wall_time_s=self.elapsed())
        self._started = time.monotonic()
        self.close()

    def close(self) -> None:
        """Flush and close the writer and the metrics file."""
        if self._metrics_file is not None:
            self._metrics_file.close()
            self._metrics_file = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
