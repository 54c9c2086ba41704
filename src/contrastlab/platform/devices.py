"""Where a run computes and which process writes: ``--device`` specs and ``torchrun`` ranks."""

from __future__ import annotations

import os

import torch

from contrastlab.platform.errors import DeviceError


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


def is_main_process() -> bool:
    """False on the non-zero ranks of a ``torchrun`` job: only rank 0 writes the run directory."""
    return int(os.environ.get("RANK", "0")) == 0
