"""How far does ``agent.bf16=true`` move CURL's updates, next to the noise every update already has? Prints a
table; asserts nothing.

Issue 10 allows speed-ups that keep learning identical *in distribution*. bf16 autocast of the conv trunks rounds
their inputs and activations to 8 mantissa bits, so its updates differ from float32 ones; the question is whether
that difference is small next to the differences SAC/CURL training has anyway. From one state (the paper preset,
cartpole-swingup replay of random actions, ``--warmup`` float32 updates after initialisation), this runs
``--updates`` more updates along four branches and compares the parameters of each to branch A after k updates:

A. float32, RNG seed 1 (the batches and the actor's noise);
B. bf16 autocast of the conv trunks, seed 1: the same batches and noise as A;
R. float32 with the NCHW convolution kernels (``agent.channels_last=false``), seed 1: the same maths as A, only
   float32 rounding differs (another summation order), so R shows how quickly the dynamics amplify rounding;
S. float32, seed 2: other batches and noise, i.e. the sampling noise of training itself;
A'. A again (the same agent): zeros show the updates are deterministic here.

For each parameter group (the shared encoder, the critic's Q heads, the actor, the target networks) it prints
``|θ_X − θ_A| / |θ_A − θ_0|``: the distance of branch X from A relative to how far A itself moved in those k
updates. bf16 changes learning "no more than noise" where B's figure stays far below S's. The loss statistics of
the last update of each branch are printed too.

    MUJOCO_GL=egl OMP_NUM_THREADS=2 python benchmarks/bf16_drift.py --fill 1000 --warmup 50 --updates 1,5,20
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from curl_reference import build_ours, collect

from contrastlab.platform.sysinfo import describe_timing_environment

BRANCHES = {
    "A": ("float32, seed 1", (), 1),
    "B": ("bf16 trunks, seed 1", ("agent.bf16=true",), 1),
    "R": ("float32 NCHW kernels, seed 1", ("agent.channels_last=false",), 1),
    "S": ("float32, seed 2", (), 2),
    "A'": ("float32, seed 1 again", (), 1),
}
"""Branch key: (what it is, its extra ``--set``s, its RNG seed). A' repeats A: 0 everywhere shows the updates are
deterministic here, so every other difference comes from what the branch changes."""


def group_of(name: str) -> str:
    """The parameter group of a ``policy.state_dict()`` key: ``encoder`` (the critic's, shared with the actor's
    convolutions and trained by the contrastive loss), ``Q heads``, ``actor`` (its own head and MLP), ``targets``."""
    if name.startswith("critic.features_extractor."):
        return "encoder"
    if name.startswith("critic."):
        return "Q heads"
    return "targets" if name.startswith("critic_target.") else name.split(".", 1)[0]


def flat_groups(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Float tensors of ``state`` concatenated per group, as float64 on the CPU."""
    parts: dict[str, list[torch.Tensor]] = {}
    for name, value in state.items():
        if value.is_floating_point():
            parts.setdefault(group_of(name), []).append(value.detach().double().cpu().flatten())
    return {g: torch.cat(v) for g, v in parts.items()}


def run_branch(model: Any, start: dict[str, Any], seed: int, batch: int, marks: list[int]) -> tuple[dict, dict]:
    """From ``start``, ``max(marks)`` updates with RNG ``seed``; the flat parameters after each mark, and the
    statistics of the last update."""
    model.load_training_state(copy.deepcopy(start))
    np.random.seed(seed)
    torch.manual_seed(seed)
    done, out = 0, {}
    for mark in marks:
        model.train(gradient_steps=mark - done, batch_size=batch)
        done = mark
        out[mark] = flat_groups(model.policy.state_dict())
    return out, {k: float(v) for k, v in model.stats.items()}


def main() -> None:
    """Parse the options, build the branches' agents on one replay content, run them, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fill", type=int, default=1000, help="random-action replay transitions")
    parser.add_argument("--warmup", type=int, default=50, help="float32 updates before the branches split")
    parser.add_argument("--updates", default="1,5,20", help="k: compare after these many updates (ascending)")
    parser.add_argument("--batch", type=int, default=128, help="batch size (the paper's: 128 on DMC, 512 there)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    marks = sorted({int(k) for k in args.updates.split(",")})
    started = time.perf_counter()
    transitions = collect(args.fill)
    models = {key: build_ours(args.device, args.batch, transitions, sets=sets)
              for key, (_, sets, _) in BRANCHES.items() if key != "A'"}
    models["A'"] = models["A"]
    base = models["A"]
    np.random.seed(0)
    torch.manual_seed(0)
    base.train(gradient_steps=args.warmup, batch_size=args.batch)
    start = copy.deepcopy(base.training_state())
    origin = flat_groups(start["policy"])
    results, stats = {}, {}
    for key in BRANCHES:
        model = models[key]
        results[key], stats[key] = run_branch(model, start, BRANCHES[key][2], args.batch, marks)
    groups = list(origin)
    print(f"device {args.device}, torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}, "
          f"{args.fill} replay transitions, {args.warmup} float32 warm-up updates, "
          f"wall {time.perf_counter() - started:.0f} s; {describe_timing_environment()}")
    print()
    print("|θ_X − θ_A| / |θ_A − θ_0| after k updates from the same state (A: float32, seed 1)")
    print()
    print("| k | branch | " + " | ".join(groups) + " |")
    print("|---|---|" + "---|" * len(groups))
    for k in marks:
        for key in ("B", "R", "S", "A'"):
            cells = []
            for g in groups:
                moved = (results["A"][k][g] - origin[g]).norm()
                apart = (results[key][k][g] - results["A"][k][g]).norm()
                cells.append(f"{apart / moved:.3g}" if moved > 0 else "– (A did not move)")
            print(f"| {k} | {key}: {BRANCHES[key][0]} | " + " | ".join(cells) + " |")
    print()
    names = sorted(stats["A"])
    print("statistics of the last update: | branch | " + " | ".join(names) + " |")
    for key in BRANCHES:
        print(f"| {key} | " + " | ".join(f"{stats[key].get(n, float('nan')):.4g}" for n in names) + " |")


if __name__ == "__main__":
    main()
