"""Process-level speed settings of the ``curl`` plugin (issue 10, "Fast CURL").

glibc's ``malloc`` serves every block above its mmap threshold (128 KiB, raised dynamically up to 32 MiB) with a
fresh ``mmap`` and returns it with ``munmap`` on ``free``. At batch 512 the conv activations of one CURL update
are 40-110 MiB each, so every update maps, page-faults (≈3 M faults) and unmaps its activations again: more
kernel time than compute. :func:`tune_malloc` keeps freed memory in the heap instead (``M_MMAP_MAX = 0``: no
mmap-served blocks; ``M_TRIM_THRESHOLD``: do not give the top of the heap back to the kernel after every
update), so the next update reuses the pages it already touched. The environment variables ``MALLOC_MMAP_MAX_``
and ``MALLOC_TRIM_THRESHOLD_`` do the same but only at process start; ``mallopt`` works at any time.

The cost: the process keeps its high-water heap (about one update's activations, < 2 GiB at batch 512) instead
of returning it between updates. It is a no-op on a C library other than glibc (macOS, musl, Windows).

:func:`speed_flags` switches the GPU-oriented options of the conv encoders (online and key): channels-last
memory format, bf16 autocast of the conv trunk (float32 features, weights, optimiser state and losses) and
``torch.compile`` of the trunk. Each gives the update the same numbers as without it, to a tolerance
(tests/plugins/curl/test_curl_fast.py; the compiled path on a GPU in the ``cuda``-marked tests).

:func:`adam` builds every optimiser of the agent with Adam's fused kernel; :func:`use_fused_kernel` switches an
optimiser restored from an older checkpoint (saved with the for-loop kernel) back to it, and lays its moment
estimates out in memory as their parameters are (the fused kernel pairs them by memory position).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

import torch

M_TRIM_THRESHOLD = -1
"""``mallopt`` parameter number of the trim threshold (glibc ``malloc.h``)."""
M_MMAP_MAX = -4
"""``mallopt`` parameter number of the maximum count of mmap-served blocks (glibc ``malloc.h``)."""
TRIM_THRESHOLD_BYTES = 1 << 30
"""Free heap top kept before trimming (1 GiB); larger than any per-update activation total at batch ≤ 512."""

_applied: bool | None = None


def glibc() -> ctypes.CDLL | None:
    """The running glibc (``None`` on any other C library)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
    except (OSError, AttributeError):
        return None
    return libc


def tune_malloc() -> bool:
    """Make glibc reuse freed heap memory across updates (module docstring); ``True`` when applied.

    Idempotent and process-wide (it also speeds up any other code in the process, e.g. a reference agent
    benchmarked side by side).
    """
    global _applied
    if _applied is None:
        libc = glibc()
        _applied = bool(libc is not None and libc.mallopt(M_MMAP_MAX, 0) == 1
                        and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1)
    return _applied


def speed_flags(policy: Any, channels_last: bool = False, bf16: bool = False, compile: bool = False) -> None:
    """Apply the encoder speed options to ``policy.encoder`` and ``policy.key_encoder`` (a ``CurlSACPolicy``).

    ``compile`` wraps each trunk's ``forward_conv`` in ``torch.compile`` (the modules, their parameter names and
    checkpoints are unchanged); the first updates pay the compilation.
    """
    for features in (policy.encoder, policy.key_encoder):
        features.channels_last = channels_last
        if channels_last:
            features.net.to(memory_format=torch.channels_last)
        features.autocast_dtype = torch.bfloat16 if bf16 else None
        if compile and "forward_conv" not in features.net.__dict__:
            features.net.forward_conv = torch.compile(features.net.forward_conv, dynamic=False)


def adam(params: Any, **kwargs: Any) -> torch.optim.Adam:
    """``torch.optim.Adam(params, **kwargs)`` with the fused kernel: one pass over all parameters per step instead of
    about ten small ops per parameter tensor (the four optimiser steps of a batch-128 CURL update: ≈ 3-4 ms instead
    of ≈ 10-12 ms on the 2-core CPU). The same Adam maths; the values agree to float rounding
    (tests/plugins/curl/test_curl_fast.py)."""
    return torch.optim.Adam(params, fused=True, **kwargs)


def use_fused_kernel(optimizer: torch.optim.Adam) -> None:
    """Switch an :func:`adam` optimiser back to the fused kernel after ``load_state_dict``.

    ``load_state_dict`` restores every parameter group's settings as saved, so a checkpoint written with the
    for-loop kernel (``fused=None``) would otherwise turn it off for the rest of the run. The fused kernel keeps
    Adam's step counters as float32 on the parameters' device; the saved ones are moved there.

    The moment estimates are laid out in memory as their parameter is: the fused kernel walks a parameter and its
    moments element by element in memory order, so a moment saved channels-last (``agent.channels_last=true``)
    and restored next to an NCHW parameter (or the reverse: a checkpoint from before channels-last, another
    ``channels_last`` setting) would pair each weight with another weight's moments, silently (one step from
    such a state moved the encoder 15 % away from the right step). ``load_state_dict`` keeps the saved layout.
    """
    for group in optimizer.param_groups:
        group["fused"], group["foreach"] = True, None
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            if "step" in state:
                state["step"] = state["step"].to(device=param.device, dtype=torch.float32)
            for key, value in state.items():
                if torch.is_tensor(value) and value.shape == param.shape and value.stride() != param.stride():
                    state[key] = torch.empty_like(param, dtype=value.dtype).copy_(value)  # param's layout
