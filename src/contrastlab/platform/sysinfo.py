"""Hardware and package versions recorded in every ``summary.json``."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform as stdlib_platform
from typing import Any

import torch

TRACKED_PACKAGES = (
    "contrastlab",
    "torch",
    "numpy",
    "stable-baselines3",
    "gymnasium",
    "dm-control",
    "mujoco",
    "kornia",
    "pluggy",
    "pydantic",
    "tensorboard",
)


TIMING_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "MALLOC_MMAP_MAX_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_ARENA_MAX",
    "CUDA_VISIBLE_DEVICES",
)
"""Environment variables that change a run's speed (threads, their waiting, glibc's allocator, visible GPUs)."""


def timing_environment() -> dict[str, str]:
    """The :data:`TIMING_VARIABLES` set in this process's environment, by name."""
    return {name: os.environ[name] for name in TIMING_VARIABLES if name in os.environ}


def describe_timing_environment() -> str:
    """One line for a benchmark's header: ``env OMP_NUM_THREADS=2, ...`` or ``env: no thread/allocator
    variables set``."""
    env = timing_environment()
    if not env:
        return "env: no thread/allocator variables set"
    return "env " + ", ".join(f"{name}={value}" for name, value in env.items())


def hardware_info(device: torch.device | None = None) -> dict[str, Any]:
    """CPU model, core count, memory, the CUDA device name when one is used, and the speed-relevant environment
    variables that were set (``environment``, see :data:`TIMING_VARIABLES`)."""
    info: dict[str, Any] = {
        "machine": stdlib_platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "os": f"{stdlib_platform.system()} {stdlib_platform.release()}",
        "torch_threads": torch.get_num_threads(),
        "environment": timing_environment(),
    }
    if torch.cuda.is_available():
        index = device.index if device is not None and device.type == "cuda" and device.index is not None else 0
        info["cuda_device"] = torch.cuda.get_device_name(index)
        info["cuda_count"] = torch.cuda.device_count()
    return info


def package_versions() -> dict[str, str]:
    """Versions of Python and the packages a run depends on."""
    versions = {"python": stdlib_platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return versions


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return stdlib_platform.processor() or "unknown"


def _memory_gb() -> float | None:
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
        return round(pages * size / 1e9, 1)
    except (ValueError, OSError, AttributeError):
        return None
