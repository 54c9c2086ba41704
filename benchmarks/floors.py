"""Evidence for the ``query_key`` floor (issue 13): how much learning signal each floor leaves CURL's anchors.

For DCL/HCL/PUCL on bilinear rows, per floor rule (``row_min``: contrastlab 0.1; ``trimmed``: the new default):

* ``clamped``: fraction of anchors whose debiased negative mass sits at the floor;
* ``lost``: fraction of anchors where InfoNCE's loss is > 0.1 but the loss's gradient on the positive logit is
  below 5 % of InfoNCE's (the anchor silently stops learning);
* ``grad ratio``: median of that gradient ratio over the anchors where InfoNCE's loss is > 0.1.

Two sources of rows:

* ``--synthetic`` (default): :func:`contrastlab.losses.floor_analysis.curl_like_rows` with CURL's logit spread
  (5, 8, 11), 512 anchors × 511 negatives;
* ``--run DIR``: real rows from a CURL run's last checkpoint (``train.save_buffer=true``): ``--batches`` replay
  batches of the run's batch size, cropped as in training, encoded by its online/key encoders, scored by its
  bilinear ``W``. Prints the measured logit spread too. The same query/key pairs are also scored on the
  bounded scale, ``cos(q, k)/t`` (``--cosine-temperature``, default 0.1), with the papers' floor ``N e^{-1/t}``
  (rule ``paper``) and with the trimmed floor: the alternative of normalising q, k (``sampler.similarity=cosine``).

Usage::

    python benchmarks/floors.py                          # synthetic rows, seconds on a CPU
    python benchmarks/floors.py --run runs/curl/dcl/<run> --json floors.json
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import torch

import contrastlab as cl
from contrastlab.losses.floor_analysis import curl_like_rows, signal_report, with_floor

LOSSES = (("dcl", {"tau_plus": 0.1}), ("dcl", {"tau_plus": 0.01}), ("hcl", {"tau_plus": 0.1, "beta": 1.0}),
          ("pucl", {"alpha": 0.12, "c": 0.1}))
RULES = ("row_min", "trimmed")


def evaluate(batches: list[Any], source: str, rules: tuple[str, ...] = RULES) -> list[dict[str, Any]]:
    """One row per (loss, floor rule): the signal report averaged over ``batches``. The rule ``paper`` keeps the
    batch's own floor (for cosine batches: the papers' ``N e^{-1/t}``)."""
    infonce = cl.make_loss("infonce")
    rows = []
    for name, hp in LOSSES:
        loss = cl.make_loss(name, **hp)
        for rule in rules:
            reports = [signal_report(loss, b if rule == "paper" else with_floor(b, rule), infonce) for b in batches]
            mean = {k: sum(r[k] for r in reports) / len(reports) for k in reports[0]}
            rows.append({"source": source, "loss": name, **hp, "floor": rule, **mean})
    return rows


def real_batches(run_dir: Path, batches: int, device: str,
                 cosine_temperature: float = 0.1) -> tuple[list[Any], list[Any], dict[str, float]]:
    """Contrastive batches of a CURL run's checkpoint (online queries vs key-encoder keys) scored by the run's
    bilinear ``W``, the same query/key pairs scored as ``cos/t`` (the bounded alternative), and the spread."""
    from contrastlab.platform.run import Run
    from contrastlab.plugins.curl.augment import random_crops
    from contrastlab.plugins.curl.task import make_agent, make_env

    run = Run.open(run_dir, device=device, resume=False)
    state = run.load_checkpoint(restore_rng=False)
    if state is None or "replay_buffer" not in state:
        raise SystemExit(f"error: {run_dir} has no checkpoint with a replay buffer (train.save_buffer=true)")
    config = run.config
    agent = make_agent(config, make_env(config, seed=0), run.device)
    agent.load_training_state(state["agent"])
    agent.replay_buffer.load_state_dict(state["replay_buffer"])
    out, cosine, spreads = [], [], []
    cos_sampler = cl.make_sampler("query_key", similarity="cosine", temperature=cosine_temperature).double()
    torch.manual_seed(0)
    with torch.no_grad():
        for _ in range(batches):
            data = agent.replay_buffer.sample(config.agent.batch_size)
            anchor, positive = random_crops(data.observations, config.agent.crop, 2)
            q = agent.policy.encoder(anchor.float().div_(255.0)).double()
            k = agent.policy.key_encoder(positive.float().div_(255.0)).double()
            sampler = cl.make_sampler("query_key", embed_dim=q.shape[1]).to(q.device).double()
            sampler.W.copy_(agent.sampler.W.detach().double())
            b = sampler(q, k)
            cosine.append(cos_sampler(q.cpu(), k.cpu()))
            b = replace(b, pos_logits=b.pos_logits.cpu(), neg_logits=b.neg_logits.cpu(),
                        floor_logit=b.floor_logit.cpu())
            spreads.append(float((b.neg_logits.amax(1) - b.neg_logits.amin(1)).median()))
            out.append(b)
    run.close()
    info = {"median_row_spread": sorted(spreads)[len(spreads) // 2], "env_frames": float(state.get("step", 0))}
    return out, cosine, info


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Print the table (and write ``--json``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", type=Path, default=None, help="a CURL run directory with a buffer checkpoint")
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--cosine-temperature", type=float, default=0.1,
                   help="temperature of the bounded (cosine) rescoring of a run's query/key pairs")
    args = p.parse_args(argv)
    results: list[dict[str, Any]] = []
    if args.run is None:
        for spread in (5.0, 8.0, 11.0):
            batches = [curl_like_rows(spread=spread, seed=s) for s in range(3)]
            results += evaluate(batches, f"synthetic spread {spread:g}")
    else:
        batches, cosine, info = real_batches(args.run, args.batches, args.device, args.cosine_temperature)
        print(f"real rows from {args.run}: {info}")
        results += [dict(r, **info) for r in evaluate(batches, f"CURL run {args.run.name}, bilinear")]
        results += [dict(r, **info) for r in evaluate(cosine, f"same pairs, cos/{args.cosine_temperature:g}",
                                                         ("paper", "trimmed"))]
    print("| rows | loss | floor | clamped | lost | grad ratio (InfoNCE loss > 0.1) | mean loss |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        hp = ", ".join(f"{k}={r[k]}" for k in ("tau_plus", "alpha", "c", "beta") if k in r)
        print(f"| {r['source']} | {r['loss']} ({hp}) | {r['floor']} | {r['clamped_frac']:.2f} | "
              f"{r['lost_signal_frac']:.2f} | {r['median_grad_ratio_active']:.3f} | {r['mean_loss']:.3f} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
