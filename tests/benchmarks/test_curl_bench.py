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
