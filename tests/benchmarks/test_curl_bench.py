"""``benchmarks/curl.py``: in the interleaved A/B rounds no function's first (one-time setup) call is timed."""

from __future__ import annotations

import time


def test_interleaved_warms_every_function_before_the_timed_rounds(load_benchmark) -> None:
    curl = load_benchmark("curl")
    calls = {"cold": 0, "warm": 0}

    def cold() -> None:  # e.g. the conv-floor passes: their first call builds kernels and buffers
        calls["cold"] += 1
        time.sleep(0.2 if calls["cold"] == 1 else 0.0)

    def warm() -> None:
        calls["warm"] += 1

    times = curl.interleaved({"cold": cold, "warm": warm}, rounds=2)
    assert [len(v) for v in times.values()] == [2, 2]
    assert max(times["cold"]) < 0.1  # the 0.2 s first call was not one of the timed rounds
    assert calls == {"cold": 3, "warm": 3}  # one untimed call each, then one per round


def test_interleaved_remote_reference_reports_the_childs_seconds(load_benchmark) -> None:
    curl = load_benchmark("curl")
    times = curl.interleaved({"ours": lambda: None, "reference": lambda: 1.5}, rounds=3, remote=True)
    assert times["reference"] == [1.5, 1.5, 1.5] and all(t < 0.1 for t in times["ours"])


class _FakeAgent:
    """Stands in for CurlSAC / SB3 SAC: the actor and targets update every second step, and the first such step
    pays a one-time setup (kernels, optimiser state), as the real agents' first actor update does."""

    def __init__(self, *args, **kwargs) -> None:
        import torch

        self.device = torch.device("cpu")
        self.n_updates = 0
        self.actor_ready = False

    def learn(self, steps: int) -> None:
        pass

    def set_logger(self, logger) -> None:
        pass

    def train(self, gradient_steps: int, batch_size: int) -> None:
        for _ in range(gradient_steps):
            self.n_updates += 1
            if self.n_updates % 2 == 0 and not self.actor_ready:
                self.actor_ready = True
                time.sleep(0.3)


def test_update_timing_is_warmed_through_the_actor_update(monkeypatch, load_benchmark) -> None:
    curl = load_benchmark("curl")
    monkeypatch.setattr(curl, "resolve_config", lambda *a, **k: None)
    monkeypatch.setattr(curl, "make_env", lambda *a, **k: None)
    monkeypatch.setattr(curl, "make_agent", lambda *a, **k: _FakeAgent())
    monkeypatch.setattr(curl, "SAC", _FakeAgent)
    ours, stock = curl.bench_updates(128, updates=2, rounds=1, device="cpu")
    assert ours < 0.05 and stock < 0.05  # the actor's first (0.3 s) update was part of the warm-up
