"""Where a run computes and which process writes: ``--device`` specs and ``torchrun`` ranks."""

from __future__ import annotations

import os
import re
from typing import Any

import torch

from contrastlab.platform.errors import DeviceError

DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")
"""The device strings :func:`resolve_device` understands (case and surrounding spaces aside)."""
UNKNOWN_DEVICE = "unknown device '{spec}'; valid: auto, cpu, cuda, cuda:K"
"""The one-line error for any other string."""


def check_device(spec: Any) -> None:
    """Refuse a device string that is none of auto, cpu, cuda, cuda:K (K >= 0) as a one-line :class:`DeviceError`,
    whether or not CUDA is present (on a CUDA machine ``cuda:x`` or ``cuda:-1`` reached ``int()`` or torch: a
    traceback). An empty spec (or ``None``) means auto."""
    if isinstance(spec, str) and spec and not DEVICE_PATTERN.fullmatch(spec.strip().lower()):
        raise DeviceError(UNKNOWN_DEVICE.format(spec=spec))


def resolve_device(spec: str) -> torch.device:
    """``auto`` → CUDA when available else CPU; ``cpu``; ``cuda``; ``cuda:K``. Unavailable CUDA raises.

    ``cuda:K`` is read as the number ``K``: ``cuda:01`` is device 1 (torch's own parser refuses a leading zero, a
    traceback on a CUDA machine)."""
    check_device(spec)
    spec = (spec or "auto").strip().lower()
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():  # cuda or cuda:K
        raise DeviceError(f"device '{spec}' requested but CUDA is not available here; use --device cpu or auto")
    index = int(spec.split(":", 1)[1]) if ":" in spec else 0
    if index >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise DeviceError(f"device '{spec}' does not exist; this machine has {count} CUDA device(s)")
    return torch.device("cuda", index) if ":" in spec else torch.device("cuda")


def is_main_process() -> bool:
    """False on the non-zero ranks of a ``torchrun`` job: only rank 0 writes the run directory."""
    return int(os.environ.get("RANK", "0")) == 0
