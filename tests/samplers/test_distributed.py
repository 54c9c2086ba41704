"""Distributed correctness on CPU: 2 gloo processes vs. the single-process computation on the concatenated batch.

One pair of processes (spawned once per module) checks every sampler × every loss: on each rank the loss value
equals the single-process value, the DDP-averaged parameter gradients (encoder and the bilinear ``W``) equal the
single-process gradients, and each rank's embeddings receive ``world_size ×`` their single-process gradient (the
documented convention that makes DDP's averaging exact).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SAMPLERS = ["two_view", "multi_view", "queue", "query_key", "query_key_cosine"]
LOSSES = ["infonce", "dcl", "hcl", "bcl", "pucl", "punce", "debiased_pos", "supcon", "unbiased"]
WORLD = 2


@pytest.fixture(scope="module")
def dist_results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gloo")
    init = tmp / "init"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CONTRASTLAB_PLUGINS": ""}
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "dist_worker.py"), str(r), str(WORLD), str(init), str(tmp / f"out{r}.json")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for r in range(WORLD)
    ]
    logs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("gloo workers timed out")
        logs.append(out)
    for r, p in enumerate(procs):
        assert p.returncode == 0, f"rank {r} failed:\n{logs[r][-4000:]}"
    return [json.loads((tmp / f"out{r}.json").read_text()) for r in range(WORLD)]


@pytest.mark.distributed
@pytest.mark.slow
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_matches_single_process(dist_results, sampler, loss):
    for rank, res in enumerate(dist_results):
        r = res[f"{sampler}/{loss}"]
        assert r["value_nonzero"] > 0, "degenerate case: the loss is zero"
        assert r["value"] < 1e-10, (rank, r)
        assert r["param_grad"] < 1e-10, (rank, r)
        assert r["embedding_grad"] < 1e-10, (rank, r)
