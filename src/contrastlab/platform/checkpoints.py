"""Checkpoint files of a run: crash-safe writes, retention, and parts only the newest checkpoint keeps.

* Every file is written to a temporary file in the same folder, flushed and ``fsync``-ed, then renamed over the
  target (``os.replace``): a crash or a full disk never leaves a half-written checkpoint under a real name.
* A failed write removes its temporary file, keeps every earlier checkpoint and raises :class:`StorageError`
  with one line (torch reports a full disk as a ``RuntimeError``; the underlying ``OSError`` is recovered).
* The newest ``keep`` checkpoints are kept.
* ``latest_only`` keys (e.g. a replay buffer) go to a side file next to the newest checkpoint only; it is deleted
  when a newer checkpoint has been written. Resuming from an older checkpoint then starts without those parts.
* A checkpoint that cannot be read (cut short by a copy, emptied, overwritten) is :class:`CheckpointError`, one
  line naming the file and the previous checkpoint: nothing is deleted or skipped silently. One that pickles an
  object whose class is not installed here says so instead; running out of (GPU) memory while loading is no damage
  and goes on as itself.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import torch

from contrastlab.platform.errors import CheckpointError, StorageError
from contrastlab.platform.rundir import RunDir


class _RecordingWriter:
    """A file wrapper for ``torch.save`` that remembers the ``OSError`` a write raised (torch re-raises it as a
    ``RuntimeError`` without the cause)."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self.fh.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        try:
            self.fh.flush()
        except OSError as exc:
            self.error = exc
            raise


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable (best effort: not every platform can open a directory)."""
    with suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save(obj)`` to ``path`` through a temporary file in the same folder, ``fsync`` and ``os.replace``.

    On failure the temporary file is removed, ``path`` keeps its previous content (if any) and
    :class:`StorageError` says why in one line; an interruption (``KeyboardInterrupt``) removes it too.
    """
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp")
    writer: _RecordingWriter | None = None
    try:
        fh = open(tmp, "wb")  # noqa: SIM115 (closed below, also when the write fails)
        try:
            writer = _RecordingWriter(fh)
            torch.save(obj, writer)
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            try:
                fh.close()
            except OSError:
                if writer is not None and writer.error is None:
                    raise
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        cause = writer.error if writer is not None and writer.error is not None else exc
        with suppress(OSError):
            tmp.unlink()
        if not isinstance(cause, OSError):
            raise  # a RuntimeError that is not a failed write (e.g. an unpicklable object) is a bug, not storage
        reason = cause.strerror or str(cause)
        raise StorageError(f"cannot write {path}: {reason}") from None
    except BaseException:  # Ctrl-C/SIGTERM mid-write (tune's runs stop at once): no checkpoint-sized .tmp stays
        with suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


class CheckpointStore:
    """The checkpoints of one run directory."""

    def __init__(self, layout: RunDir, keep: int = 2) -> None:
        self.layout = layout
        self.keep = max(1, int(keep))

    def steps(self) -> list[int]:
        """Steps of the existing checkpoints, oldest first."""
        return [step for step, _ in self.layout.checkpoint_steps()]

    def latest_step(self) -> int | None:
        """Step of the newest checkpoint, or ``None``."""
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, payload: Mapping[str, Any], step: int, latest_only: Iterable[str] = ()) -> Path:
        """Write checkpoint ``step`` (the ``latest_only`` keys into its side file), then apply retention."""
        layout, step = self.layout, int(step)
        previous = self.latest_step()
        split = set(latest_only) & set(payload)
        main = {k: v for k, v in payload.items() if k not in split}
        path, part = layout.checkpoint(step), layout.checkpoint_latest_part(step)
        try:
            layout.checkpoints.mkdir(exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create {layout.checkpoints}: {exc.strerror or exc}") from None
        try:
            if split:
                atomic_torch_save({k: payload[k] for k in split}, part)
            atomic_torch_save(main, path)
        except StorageError as exc:
            if split and previous != step:
                with suppress(OSError):
                    part.unlink()
            kept = f"; the previous checkpoint (step {previous}) is kept" if previous is not None else ""
            raise StorageError(f"checkpoint at step {step} not saved: {exc}{kept}") from None
        if not split:
            with suppress(OSError):
                part.unlink()  # a stale side file of an earlier save of this step
        for _, old in layout.checkpoint_steps()[: -self.keep]:
            old.unlink(missing_ok=True)
        for old_step, old_part in layout.latest_parts():
            if old_step != step:
                old_part.unlink(missing_ok=True)
        return path

    def discard_partial(self) -> None:
        """Delete the temporary files of writes cut short (a SIGKILL during a save): on resume, no process writes
        them any more, and one of a step that is not saved again would stay, as large as a checkpoint."""
        folder = self.layout.checkpoints
        if folder.is_dir():
            for tmp in folder.glob("*.tmp"):
                tmp.unlink(missing_ok=True)

    def peek(self, *keys: str) -> dict[str, Any]:
        """The entries ``keys`` of the newest checkpoint that it has (``{}`` without checkpoints), read without
        loading its tensors (memory-mapped; a checkpoint that cannot be read this way is read whole). Its side
        file, when present, must at least open as an archive (cheap: a cut-short or overwritten one is
        :class:`CheckpointError` here, before a resume touches the run)."""
        found = self.layout.checkpoint_steps()
        if not found:
            return {}
        step, path = found[-1]
        try:
            state = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        except Exception:  # an old-format (non-zip) or damaged file cannot be memory-mapped: read it whole
            state = self._read(path, map_location="cpu")
        part = self.layout.checkpoint_latest_part(step)
        if part.is_file():
            try:
                zipfile.ZipFile(part).close()
            except (zipfile.BadZipFile, OSError, EOFError):
                self._read(part, map_location="cpu", of=path)  # an old-format file loads; a damaged one raises
        return {key: state[key] for key in keys if isinstance(state, dict) and key in state}

    def load(self, map_location: Any = None) -> dict[str, Any] | None:
        """The newest checkpoint merged with its side file (when present), or ``None`` without checkpoints."""
        found = self.layout.checkpoint_steps()
        if not found:
            return None
        step, path = found[-1]
        state = self._read(path, map_location=map_location)
        part = self.layout.checkpoint_latest_part(step)
        if part.is_file():
            state.update(self._read(part, map_location=map_location, of=path))
        return state

    def _read(self, path: Path, map_location: Any = None, of: Path | None = None) -> dict[str, Any]:
        """Load checkpoint file ``path`` (the side file of checkpoint ``of``), or raise a one-line
        :class:`CheckpointError` that names it and the previous checkpoint (or says there is none)."""
        try:
            state = torch.load(path, map_location=map_location, weights_only=False)
        except (MemoryError, torch.cuda.OutOfMemoryError):  # the machine's, not the file's: moving it aside loses work
            raise
        except (ImportError, AttributeError) as exc:  # a pickled object whose class is not importable here
            raise CheckpointError(f"checkpoint {path} needs code that is not installed here ({type(exc).__name__}: "
                                  f"{_first_sentence(exc)}): install the version of the plugin that wrote it") from None
        except Exception as exc:  # torch, zipfile, pickle and OS errors all mean: unreadable
            raise CheckpointError(f"checkpoint {path} is damaged ({type(exc).__name__}: {_first_sentence(exc)}); "
                                  f"{self._without(path, of)}") from None
        if not isinstance(state, dict):
            raise CheckpointError(f"checkpoint {path} holds a {type(state).__name__}, not a checkpoint; "
                                  f"{self._without(path, of)}")
        return state

    def _without(self, path: Path, of: Path | None) -> str:
        """What moving the damaged file ``path`` (the side file of checkpoint ``of``) out of the checkpoint folder
        would lead to."""
        folder = self.layout.checkpoints
        if of is not None:
            return f"move it out of {folder} to continue from {of.name} without the parts it holds"
        older = [step for step, p in self.layout.checkpoint_steps() if p != path]
        if older:
            return f"move it out of {folder} to continue from the previous checkpoint (step {older[-1]})"
        return f"no earlier checkpoint is kept: move it out of {folder} and --resume starts the run again from step 0"


def _first_sentence(exc: BaseException) -> str:
    """The first sentence of an exception's message, on one line (its type's name when it has none)."""
    return " ".join(str(exc).split(". ")[0].split()) or type(exc).__name__
