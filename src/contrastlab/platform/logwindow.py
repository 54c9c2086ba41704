"""Means of per-step training scalars between two logging points, saved with checkpoints.

A plugin that logs every ``N`` steps averages what its steps produced since the last log. :class:`LogWindow` keeps
those sums as tensors on the training device (adding a step's value reads nothing on the host, so a GPU step does
not wait for its loss) and reads them once per log. Its :meth:`~LogWindow.state_dict` goes into every checkpoint:
a run stopped between two logs (a graceful stop saves a checkpoint at any step) and resumed logs the same means as
a run that was never stopped.

Example::

    window = LogWindow()
    for step in range(start + 1, total + 1):
        loss = train_step(...)
        window.add("train/loss", loss)                  # a 0-d tensor; no host sync
        window.add("train/clamped_frac", stats.get("clamped_frac"))  # None: nothing this step
        if step % log_every == 0:
            run.log(window.pop(), step)                 # {"train/loss": mean, ...}
        if run.checkpoint_due(step):
            run.save_checkpoint({..., "log_window": window.state_dict()}, step)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor


class LogWindow:
    """Running sums and counts of named per-step scalars since the last :meth:`pop`."""

    def __init__(self) -> None:
        """An empty window."""
        self.sums: dict[str, Tensor | float] = {}
        """Sum of each name's values since the last pop (a float32 tensor for tensor values, else a float)."""
        self.counts: dict[str, int] = {}
        """How many values of each name were added since the last pop."""

    def add(self, name: str, value: Tensor | float | None) -> None:
        """Add one step's ``value`` of ``name`` (a 0-d tensor, kept on its device, or a number); ``None`` adds
        nothing (a statistic the loss does not report)."""
        if value is None:
            return
        if isinstance(value, Tensor):
            value = value.detach().float()
        total = self.sums.get(name)
        if total is None:
            self.sums[name] = value.clone() if isinstance(value, Tensor) else float(value)
        else:
            self.sums[name] = total + value
        self.counts[name] = self.counts.get(name, 0) + 1

    def add_all(self, values: Mapping[str, Tensor | float | None], prefix: str = "") -> None:
        """:meth:`add` every entry of ``values`` (e.g. a loss's ``last_stats``) under ``prefix + name``."""
        for name, value in values.items():
            self.add(prefix + name, value)

    def count(self, name: str) -> int:
        """How many values of ``name`` the window holds."""
        return self.counts.get(name, 0)

    def pop(self) -> dict[str, float]:
        """``{name: mean}`` of everything added since the last pop (one host read per name), then empty."""
        means = {name: float(total) / self.counts[name] for name, total in self.sums.items()}
        self.sums, self.counts = {}, {}
        return means

    def state_dict(self) -> dict[str, Any]:
        """The sums (tensors as they are) and counts, for a checkpoint."""
        return {"sums": dict(self.sums), "counts": dict(self.counts)}

    def load_state_dict(self, state: Mapping[str, Any] | None, device: torch.device | str | None = None) -> None:
        """Restore :meth:`state_dict` (``None``: a checkpoint written before windows were saved, so empty), moving
        tensor sums to ``device`` when given."""
        state = state or {}
        sums = dict(state.get("sums", {}))
        if device is not None:
            sums = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in sums.items()}
        self.sums, self.counts = sums, dict(state.get("counts", {}))
