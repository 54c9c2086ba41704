"""Resuming a run: refuse a changed config, and cut the logs back to what preceded the checkpoint.

Every checkpoint records the run's ``config.yaml`` and how far ``metrics.jsonl`` and the TensorBoard event files
reached when it was saved (:meth:`RunDir.log_position <contrastlab.platform.rundir.RunDir.log_position>`). A
resume continues from the newest checkpoint, so the logs are cut back to that point: rows logged after it, even at
the checkpoint's own step (a final evaluation logged after the final checkpoint), are logged once, by the resumed
run, in ``metrics.jsonl`` and in the event files themselves (not only in TensorBoard's purged view). A checkpoint
written before positions were recorded gets the older cut: ``metrics.jsonl`` rows up to its step, and TensorBoard's
``purge_step`` for the event files (right in TensorBoard's view; a raw per-file reader still sees the rows logged
after that checkpoint in the file written before the resume).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contrastlab.platform.config import flatten_items
from contrastlab.platform.errors import RunDirError, StorageError
from contrastlab.platform.rundir import RunDir

RESUMABLE_CHANGES = ("device", "keep_checkpoints")
"""Config keys a resumed run may change (so may any ``...root`` or ``...download``: where the data are)."""


def check_same_config(layout: RunDir, step: int | None, saved: Mapping[str, Any] | None,
                      current: Mapping[str, Any] | None) -> None:
    """Refuse (:class:`RunDirError`, one line) to resume checkpoint ``step`` of ``layout`` when its ``config.yaml``
    (``current``) differs from the one the checkpoint was saved with (``saved``; ``None``: not recorded, no check)
    in anything but :data:`RESUMABLE_CHANGES` and data locations."""
    if saved is None or current is None:
        return
    before, after = flatten_items(saved), flatten_items(current)
    changed = [key for key in sorted(set(before) | set(after))
               if before.get(key, "<unset>") != after.get(key, "<unset>") and key not in RESUMABLE_CHANGES
               and key.rsplit(".", 1)[-1] not in ("root", "download")]
    if changed:
        shown = ", ".join(f"{key}: {before.get(key, '<unset>')!r} -> {after.get(key, '<unset>')!r}"
                          for key in changed[:3]) + (f" (+{len(changed) - 3} more)" if len(changed) > 3 else "")
        raise RunDirError(f"cannot resume {layout.path}: its {RunDir.CONFIG_YAML} changed since the checkpoint at "
                          f"step {step} was saved ({shown}); put it back, or start a new run with the new config")


def rewind_logs(layout: RunDir, step: int | None, position: Mapping[str, Any] | None) -> tuple[list[dict], int | None]:
    """Cut the logs of ``layout`` back to checkpoint ``step`` and return the rows of ``metrics.jsonl`` left, plus
    the ``purge_step`` the TensorBoard writer needs (``None`` when the event files were cut).

    ``position``: the checkpoint's recorded :meth:`RunDir.log_position`. Without a checkpoint (``step`` is
    ``None``) everything goes; a checkpoint saved before positions were recorded keeps the rows up to its step and
    lets TensorBoard hide the later events. A line cut by a crash is dropped. Write errors are a one-line
    :class:`StorageError`.
    """
    if step is None:
        position = {"metrics_bytes": 0, "events": {}}
    metrics = layout.metrics_jsonl
    purge_step = None
    try:
        if isinstance(position, Mapping):
            layout.rewind_logs(position)
        else:
            purge_step = int(step or 0) + 1
        rows, lines = [], []
        text = metrics.read_text() if metrics.is_file() else ""
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash
            if purge_step is None or row.get("step", 0) < purge_step:
                rows.append(row)
                lines.append(line)
        kept = "".join(f"{line}\n" for line in lines)
        if kept != text:  # rewritten only when a row goes (a truncated file usually keeps every line)
            metrics.write_text(kept)
    except OSError as exc:
        raise StorageError(f"cannot rewind the logs of {layout.path}: {exc.strerror or exc}") from None
    return rows, purge_step
