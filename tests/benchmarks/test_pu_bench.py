"""``benchmarks/pu.py``: the table's labels describe the runs it prints (stand-in training, no data needed)."""

from __future__ import annotations

import sys


def test_hyperparameter_column_names_the_seed_it_shows(monkeypatch, capsys, load_benchmark) -> None:
    pu = load_benchmark("pu")

    def fake_run_one(method, loss, extra, seed, n_labeled, args, logdir) -> dict:
        return {"test/accuracy": 0.8 + seed / 100, "test/f1": 0.7, "test/auc": 0.9, "wall_s": 1.0,
                "loss_hparams": f"from seed {seed}"}

    monkeypatch.setattr(pu, "run_one", fake_run_one)
    monkeypatch.setattr(sys, "argv", ["pu.py", "--seeds", "3", "4", "--methods", "InfoNCE + nnPU probe"])
    pu.main()
    out = capsys.readouterr().out
    assert "loss hyperparameters (seed 3)" in out and "| from seed 3 |" in out
    assert "| 83.5 ± 0.7 |" in out  # mean ± sample sd over seeds 3 and 4, in %
