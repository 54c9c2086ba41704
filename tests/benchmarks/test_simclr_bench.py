"""``benchmarks/simclr.py``: the batched augmentation's clock must wait for the device's queued work on CUDA
(``aug.views`` on a GPU returns as soon as its kernels are queued), or its images/s are those of the launches."""

from __future__ import annotations

import time

import torch


def test_time_it_waits_for_queued_cuda_work(monkeypatch, load_benchmark) -> None:
    simclr = load_benchmark("simclr")
    calls: list[str] = []

    def fake_synchronize(*args, **kwargs) -> None:  # the queued kernels take 20 ms to finish
        calls.append("sync")
        time.sleep(0.02)

    monkeypatch.setattr(simclr.torch.cuda, "synchronize", fake_synchronize)
    seconds = simclr.time_it(lambda: calls.append("fn"), 3, torch.device("cuda"))
    assert seconds >= 0.02  # the wait for the device is inside every timed call
    assert calls.count("fn") == 4 and calls[-2:] == ["fn", "sync"]  # 1 warm-up + 3 timed, each followed by a sync


def test_time_it_does_not_touch_cuda_on_the_cpu(monkeypatch, load_benchmark) -> None:
    simclr = load_benchmark("simclr")

    def no_sync(*args, **kwargs) -> None:
        raise AssertionError("synchronize called for a CPU benchmark")

    monkeypatch.setattr(simclr.torch.cuda, "synchronize", no_sync)
    assert simclr.time_it(lambda: None, 2, torch.device("cpu")) >= 0.0
