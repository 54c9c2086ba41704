"""CURL updates/s, ours vs the reference CURL agent, same device, same process, alternating rounds.

The reference agent (Laskin et al.'s ``curl_sac.py``, ``encoder.py``, ``utils.py``) is imported from
``--reference-dir`` (default: ``$CURL_REFERENCE_DIR``, else ``../shared/reference/curl`` beside the checkout);
it is used for timing only and is not part of contrastlab. Both agents get CURL's paper settings (hidden 1024,
latent 50, 4 conv layers × 32, actor/critic/encoder lr 1e-3, α lr 1e-4 with β₁ 0.5, critic τ 0.01, encoder
τ 0.05, updates of actor/targets every 2) and the same replay content: ``--fill`` transitions of random actions
in cartpole-swingup at 100 px, cropped to 84 px per sample.

One "update" is what each agent does per environment step: critic + contrastive every step, actor/α and target
EMA every second step (ours: ``CurlSAC.train(gradient_steps=n)``; reference: ``CurlSacAgent.update``), including
replay sampling and cropping. CUDA work is synchronised before each clock read. Prints a table and, with
``--json``, writes the figures to a file. Usage::

    python benchmarks/curl_reference.py --device cuda --batch 512 --updates 20 --rounds 3
    python benchmarks/curl_reference.py --device cuda --set agent.channels_last=true --set agent.bf16=true
    python benchmarks/curl_reference.py --device cpu --batch 32 --updates 2 --rounds 1 --fill 120   # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import torch

from contrastlab.envs import DMCPixelEnv
from contrastlab.platform.config import resolve_config
from contrastlab.plugins.curl.task import CurlTask, make_agent, make_env

DEFAULT_REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "curl"


class _NullLogger:
    """Stands in for the reference code's logger ``L``: every ``log*`` call is a no-op."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def collect(fill: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray, float, np.ndarray, bool]]:
    """``fill`` transitions ``(obs, action, reward, next_obs, done)`` of random actions in cartpole-swingup."""
    env = DMCPixelEnv("cartpole", "swingup", render_size=100, seed=seed)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out = []
    for _ in range(fill):
        action = rng.uniform(-1, 1, size=env.action_space.shape).astype(np.float32)
        nxt, reward, terminated, truncated, _ = env.step(action)
        out.append((obs, action, float(reward), nxt, bool(terminated or truncated)))
        obs = nxt if not (terminated or truncated) else env.reset()[0]
    env.close()
    return out


def build_ours(device: str, batch: int, transitions: list, sets: tuple[str, ...] = ()) -> Any:
    """Our CurlSAC (paper preset, extra ``--set``s) with ``transitions`` in its replay buffer."""
    config = resolve_config(CurlTask(), preset="paper", device=device,
                            sets=[f"agent.batch_size={batch}", "agent.buffer_size=5000", "agent.init_steps=1000000",
                                  *sets])
    model = make_agent(config, make_env(config, seed=0), device)
    model._setup_learn(total_timesteps=1)  # SB3 builds its logger here; no env steps
    for obs, action, reward, nxt, done in transitions:
        model.replay_buffer.add(obs[None], nxt[None], action[None], np.array([reward]), np.array([done]),
                                [{"TimeLimit.truncated": False}])
    return model


def make_ours(device: str, batch: int, transitions: list, sets: tuple[str, ...] = ()) -> Any:
    """Our CurlSAC (paper preset, extra ``--set``s) with ``transitions`` in its replay buffer; returns ``update(n)``."""
    model = build_ours(device, batch, transitions, sets)

    def update(n: int) -> None:
        model.train(gradient_steps=n, batch_size=batch)

    return update


def build_reference(device: str, batch: int, transitions: list, reference_dir: Path) -> tuple[Any, Any]:
    """The reference ``(CurlSacAgent, ReplayBuffer)`` with our settings and replay content."""
    sys.path.insert(0, str(reference_dir))
    try:
        import curl_sac  # type: ignore[import-not-found]
        import utils  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(reference_dir))
    obs_shape = transitions[0][0].shape
    action_shape = transitions[0][1].shape
    agent = curl_sac.CurlSacAgent(
        obs_shape=(obs_shape[0], 84, 84), action_shape=action_shape, device=torch.device(device), hidden_dim=1024,
        discount=0.99, init_temperature=0.1, alpha_lr=1e-4, alpha_beta=0.5, actor_lr=1e-3, critic_lr=1e-3,
        critic_tau=0.01, encoder_tau=0.05, encoder_feature_dim=50, encoder_lr=1e-3, num_layers=4, num_filters=32,
        actor_update_freq=2, critic_target_update_freq=2, cpc_update_freq=1, log_interval=10**9,
        curl_latent_dim=128,
    )
    buffer = utils.ReplayBuffer(obs_shape, action_shape, len(transitions) + 1, batch, torch.device(device),
                                image_size=84)
    for obs, action, reward, nxt, done in transitions:
        buffer.add(obs, action, reward, nxt, done)
    return agent, buffer


def make_reference(device: str, batch: int, transitions: list, reference_dir: Path) -> Any:
    """The reference ``CurlSacAgent`` with the same settings and replay content; returns ``update(n)``."""
    agent, buffer = build_reference(device, batch, transitions, reference_dir)
    logger = _NullLogger()
    step = [0]

    def update(n: int) -> None:
        for _ in range(n):
            step[0] += 1
            agent.update(buffer, logger, step[0])

    return update


def timed(update: Any, n: int, device: str) -> float:
    """Seconds per update over ``n`` updates."""
    _sync(device)
    start = time.perf_counter()
    update(n)
    _sync(device)
    return (time.perf_counter() - start) / n


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure and print updates/s of both agents; returns the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--updates", type=int, default=20, help="updates per timed round")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (median reported)")
    p.add_argument("--fill", type=int, default=1000, help="replay transitions (random actions)")
    p.add_argument("--reference-dir", type=Path,
                   default=Path(os.environ.get("CURL_REFERENCE_DIR", str(DEFAULT_REFERENCE))))
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    p.add_argument("--set", dest="sets", action="append", default=[],
                   help="config override for our agent, e.g. --set agent.bf16=true (repeatable)")
    args = p.parse_args(argv)
    if not (args.reference_dir / "curl_sac.py").is_file():
        raise SystemExit(f"error: no reference CURL at {args.reference_dir} (set --reference-dir)")
    torch.manual_seed(0)
    np.random.seed(0)
    transitions = collect(args.fill)
    ours = make_ours(args.device, args.batch, transitions, tuple(args.sets))
    ref = make_reference(args.device, args.batch, transitions, args.reference_dir)
    for fn in (ours, ref):
        fn(2)  # warm-up (cuDNN autotune, allocator)
    t_ours, t_ref = [], []
    for _ in range(args.rounds):
        t_ours.append(timed(ours, args.updates, args.device))
        t_ref.append(timed(ref, args.updates, args.device))
    o, r = statistics.median(t_ours), statistics.median(t_ref)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    result = {"device": name, "torch": torch.__version__, "batch": args.batch, "sets": args.sets,
              "updates_per_round": args.updates,
              "rounds": args.rounds, "ours_s_per_update": o, "reference_s_per_update": r,
              "ours_updates_per_s": 1 / o, "reference_updates_per_s": 1 / r, "speedup_vs_reference": r / o}
    print(f"CURL update, batch {args.batch}, {name} (torch {torch.__version__}, {torch.get_num_threads()} threads)"
          f"{', ours with ' + ' '.join(args.sets) if args.sets else ''}")
    print(f"  ours      {1 / o:8.1f} updates/s ({o * 1e3:.1f} ms)")
    print(f"  reference {1 / r:8.1f} updates/s ({r * 1e3:.1f} ms)")
    print(f"  ours / reference speed: {r / o:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
