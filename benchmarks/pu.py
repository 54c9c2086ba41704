"""PU-Fashion-MNIST at CPU-smoke scale: end-to-end nnPU vs contrastive pre-training + nnPU linear probe.

Every method gets the same budget of optimizer steps on the same encoder (the ``smoke`` preset's small CNN):
the pre-trained methods run ``pretrain.steps`` contrastive steps then ``classifier.steps`` probe steps; the
end-to-end baseline trains encoder + linear head with nnPU for ``pretrain.steps + classifier.steps`` steps.
The prior is the exact one of the split (puNCE A.1.1): the nnPU risk and ``punce`` get π; PUCL runs twice,
with its paper defaults (α = 0.12, c = 0.1) and with α, c of the split (``prior.fill_pucl=true``).

Usage::

    python benchmarks/pu.py                       # the default grid (6 rows × 2 seeds, n_L = 200)
    python benchmarks/pu.py --seeds 1 --n-labeled 200 1000 --pretrain-steps 300

It prints a Markdown table (mean ± sd over seeds of test accuracy / F1 / ROC-AUC, and wall time per run) plus
the hardware. This is a smoke-scale comparison, not the paper's 1k/3k/10k GPU grid (``--preset paper``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from contrastlab.platform.config import resolve_config
from contrastlab.platform.plugins import registry
from contrastlab.platform.run import Run
from contrastlab.platform.sysinfo import describe_timing_environment, hardware_info

METHODS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "nnPU end-to-end (no pre-training)": ("end_to_end", "infonce", ()),
    "InfoNCE + nnPU probe": ("pretrain_probe", "infonce", ()),
    "DCL (τ⁺ = 0.1) + nnPU probe": ("pretrain_probe", "dcl", ()),
    "PUCL (α = 0.12, c = 0.1) + nnPU probe": ("pretrain_probe", "pucl", ()),
    "PUCL (α, c of the split) + nnPU probe": ("pretrain_probe", "pucl", ("prior.fill_pucl=true",)),
    "puNCE (π exact) + nnPU probe": ("pretrain_probe", "punce", ()),
}
"""Row label → (method, loss, extra ``--set`` overrides)."""


def run_one(method: str, loss: str, extra: tuple[str, ...], seed: int, n_labeled: int, args: argparse.Namespace,
            logdir: Path) -> dict:
    """Train one configuration and return its final metrics plus wall time."""
    plugin = registry("plugin").get("pu").factory()
    sets = [*extra,
        f"method={method}",
        f"data.n_labeled={n_labeled}",
        f"data.train_size={args.train_size}",
        f"data.test_size={args.test_size}",
        f"pretrain.steps={args.pretrain_steps}",
        f"classifier.steps={args.probe_steps}",
        "classifier.risk=nnpu",
        f"checkpoint_every={10**9}",
    ]
    config = resolve_config(plugin, preset="smoke", loss=loss, seed=seed, sets=sets, device="cpu")
    plugin.check(config)
    start = time.perf_counter()
    run = Run.create(plugin, config, logdir)
    metrics = plugin.train(config, run)
    run.finish(metrics)
    metrics["wall_s"] = time.perf_counter() - start
    metrics["loss_hparams"] = "—" if method == "end_to_end" else ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in config.loss.hparams().items()
    ) or "—"
    return metrics


def fmt(values: list[float], scale: float = 100.0, digits: int = 1) -> str:
    """``mean ± sd`` (sd omitted for a single value)."""
    vals = [v * scale for v in values]
    if len(vals) == 1:
        return f"{vals[0]:.{digits}f}"
    return f"{statistics.mean(vals):.{digits}f} ± {statistics.stdev(vals):.{digits}f}"


def main() -> None:
    """Run the grid and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--n-labeled", type=int, nargs="+", default=[200])
    parser.add_argument("--train-size", type=int, default=6000)
    parser.add_argument("--test-size", type=int, default=2000)
    parser.add_argument("--pretrain-steps", type=int, default=150)
    parser.add_argument("--probe-steps", type=int, default=300)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), help="row labels to run (default: all)")
    parser.add_argument("--logdir", type=Path, default=None, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()

    hw = hardware_info(torch.device("cpu"))
    print(f"# PU-Fashion-MNIST (upper-body garments 0,2,4,6 vs rest), train {args.train_size}, "
          f"test {args.test_size}; budget {args.pretrain_steps} + {args.probe_steps} steps")
    print(f"hardware: {hw['cpu']} ({hw['cpu_count']} cores, torch threads {torch.get_num_threads()}), torch "
          f"{torch.__version__}; {describe_timing_environment()}\n")
    total_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        logdir = args.logdir or Path(tmp)
        for n_labeled in args.n_labeled:
            print(f"## n_L = {n_labeled}\n")
            print(f"| method | loss hyperparameters (seed {args.seeds[0]}) | test accuracy % | test F1 % "
                  "| test ROC-AUC % | wall s / run |")
            print("|---|---|---|---|---|---|")
            for label in args.methods:
                method, loss, extra = METHODS[label]
                rows = [run_one(method, loss, extra, s, n_labeled, args, logdir) for s in args.seeds]
                print(f"| {label} | {rows[0]['loss_hparams']} | {fmt([r['test/accuracy'] for r in rows])} "
                      f"| {fmt([r['test/f1'] for r in rows])} "
                      f"| {fmt([r['test/auc'] for r in rows])} | {fmt([r['wall_s'] for r in rows], 1.0, 0)} |",
                      flush=True)
            print()
    print(f"seeds {args.seeds}; total wall time {time.perf_counter() - total_start:.0f} s")


if __name__ == "__main__":
    main()
