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
