"""``benchmarks/losses.py``: every printed timing label states the rounds its figures come from."""

from __future__ import annotations

import re

import torch


def test_naive_bcl_rounds_are_stated_where_its_times_are_printed(capsys, load_benchmark) -> None:
    losses = load_benchmark("losses")
    threads = torch.get_num_threads()
    try:
        losses.bench_device(torch.device("cpu"), 16, 8, 5, [1])
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    # the round-robin tables: 5 rounds; the paper-style BCL (seconds per call at full size) gets at most 3,
    # timed after the round-robin ones, and the table that prints it must say so
    assert "min and median of 5 round-robin rounds" in out
    heading = next(line for line in out.splitlines() if line.startswith("Ours (two_view + loss) vs."))
    assert re.search(r"naive bcl: min and median of 3 rounds", heading), heading


class _FakeCudaMemory:
    """A stand-in for ``torch.cuda``'s allocator counters (bytes in MiB units)."""

    def __init__(self) -> None:
        self.allocated = self.peak = 0

    def alloc(self, n: int) -> None:
        self.allocated += n
        self.peak = max(self.peak, self.allocated)


def test_cuda_peak_leaves_out_one_time_allocations_of_the_first_call(monkeypatch, load_benchmark) -> None:
    """cuBLAS's workspace is allocated (and kept) at a process's first matmul: measured in the first function's
    peak only (InfoNCE's, the denominator of every "× infonce" memory ratio) unless the call is warmed first."""
    losses = load_benchmark("losses")
    mem = _FakeCudaMemory()
    monkeypatch.setattr(losses.torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(losses.torch.cuda, "memory_allocated", lambda *a, **k: mem.allocated)
    monkeypatch.setattr(losses.torch.cuda, "max_memory_allocated", lambda *a, **k: mem.peak)
    monkeypatch.setattr(losses.torch.cuda, "reset_peak_memory_stats",
                        lambda *a, **k: setattr(mem, "peak", mem.allocated))
    calls = []

    class Loss:
        def backward(self) -> None:
            mem.alloc(3)  # transient gradient buffers
            mem.alloc(-3)

    def fn() -> Loss:
        if not calls:
            mem.alloc(32)  # the workspace, kept for the process
        calls.append(1)
        return Loss()

    assert losses.peak_bytes(fn, losses.torch.device("cuda")) == 3
