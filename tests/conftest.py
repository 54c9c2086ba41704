"""Shared test setup: headless rendering, no third-party plugins unless a test asks, the example plugin on path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("CONTRASTLAB_PLUGINS", "")  # isolate from whatever third-party plugins are installed
# plain text whatever the terminal (`pytest -s`) or FORCE_COLOR: consoles made at import must not colour the
# one-line errors and progress lines the tests compare (a test that wants a terminal passes force_terminal=True)
os.environ.pop("FORCE_COLOR", None)
os.environ["TTY_COMPATIBLE"] = "0"

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_SRC = ROOT / "examples" / "plugin_template" / "src"
if str(TEMPLATE_SRC) not in sys.path:
    sys.path.insert(0, str(TEMPLATE_SRC))


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``cuda`` when no GPU is present (``benchmarks/gpu_suite.sh`` runs them on one)."""
    import pytest
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run benchmarks/gpu_suite.sh on one)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


class _PaddedCounter:
    """TensorBoard's event-file counter, zero-padded: names of files started in one second sort as they were made."""

    def __init__(self) -> None:
        import itertools
        import threading

        self._numbers = itertools.count()
        self._lock = threading.Lock()

    def get(self) -> str:
        with self._lock:
            return f"{next(self._numbers):08d}"


def _pad_event_file_counter():
    """Tests resume runs in the process that wrote them, often within the same second: TensorBoard names event
    files ``...<second>.<host>.<pid>.<counter>`` and reads them in name order, so counter 10 would sort before 9
    (a real resume is a new process, seconds later). Zero-padding the counter keeps the order of creation."""
    from tensorboard.summary.writer import event_file_writer

    event_file_writer._global_uid = _PaddedCounter()


_pad_event_file_counter()


@pytest.fixture
def held_by_another_process():
    """``with held(run_dir): ...``: the run's training lock held, as by another process with pid 4242 training it."""
    import fcntl
    from contextlib import contextmanager

    @contextmanager
    def held(run_dir, pid: str = "4242"):
        with open(run_dir / ".train.lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            handle.truncate(0)
            handle.write(pid)
            handle.flush()
            yield

    return held
