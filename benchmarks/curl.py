"""Side-by-side measurements for the ``curl`` plugin (issue 4). Prints ratios; asserts nothing.

1. Per-update wall time at batch 128 on the CPU, our CURL update (critic + actor + contrastive) vs stock SB3
   ``SAC`` with the same encoder as its features extractor and no contrastive update. Target <= 0.85x.
2. Environment frames/s of our pixel env vs dm-control's default-quality rendering of the same task (a fresh
   ``suite.load`` env, ``physics.render(100, 100, camera_id=0)`` after each action repeat, as dmc2gym does).
   Target >= 4x.
3. Replay bytes per transition vs SB3's ``ReplayBuffer`` (obs + next_obs). Target <= 0.2x.

With a GPU it also measures updates/s at batch 512. Usage::

    python benchmarks/curl.py [--updates 6] [--rounds 3] [--frames 4000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import torch
from stable_baselines3 import SAC
from stable_baselines3.common.buffers import ReplayBuffer

from contrastlab.envs import DMCPixelEnv, curl_action_repeat
from contrastlab.platform.config import resolve_config
from contrastlab.platform.sysinfo import hardware_info
from contrastlab.plugins.curl.buffer import FrameStackReplayBuffer
from contrastlab.plugins.curl.policy import CurlFeatures
from contrastlab.plugins.curl.task import CurlTask, make_agent, make_env


def time_updates(model, batch: int, updates: int) -> float:
    """Seconds per update over ``updates`` calls of ``model.train``."""
    start = time.perf_counter()
    model.train(gradient_steps=updates, batch_size=batch)
    return (time.perf_counter() - start) / updates


def bench_updates(batch: int, updates: int, rounds: int, device: str, fill: int = 300) -> tuple[float, float]:
    """Median seconds per update of (ours, stock SB3 SAC), measured in alternating rounds."""
    config = resolve_config(CurlTask(), preset="paper", device=device,
                            sets=[f"agent.batch_size={batch}", "agent.buffer_size=2000", "agent.init_steps=100000"])
    ours = make_agent(config, make_env(config, seed=0), device)
    stock = SAC(
        "CnnPolicy", make_env(config, seed=0), buffer_size=2000, batch_size=batch, learning_starts=100000,
        policy_kwargs=dict(features_extractor_class=CurlFeatures, features_extractor_kwargs=dict(crop=84),
                           net_arch=[1024, 1024], share_features_extractor=False),
        device=device, seed=0, verbose=0,
    )
    for model in (ours, stock):
        model.learn(fill)  # random-action transitions only (learning_starts not reached)
        model.train(gradient_steps=1, batch_size=batch)  # warm-up
    t_ours, t_stock = [], []
    for _ in range(rounds):
        t_ours.append(time_updates(ours, batch, updates))
        t_stock.append(time_updates(stock, batch, updates))
    return statistics.median(t_ours), statistics.median(t_stock)


def bench_env(domain: str, task: str, frames: int) -> tuple[float, float]:
    """Environment frames/s of (ours, dm-control default-quality rendering), same task and action repeat."""
    from dm_control import suite

    repeat = curl_action_repeat(domain)
    steps = max(1, frames // repeat)
    rng = np.random.default_rng(0)

    env = DMCPixelEnv(domain, task, render_size=100)
    env.reset(seed=0)
    actions = rng.uniform(-1, 1, size=(steps, *env.action_space.shape)).astype(np.float32)
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()
    ours = steps * repeat / (time.perf_counter() - start)
    env.close()

    base = suite.load(domain, task, task_kwargs={"random": 0})
    base.reset()
    stack = [base.physics.render(100, 100, camera_id=0).transpose(2, 0, 1)] * 3
    start = time.perf_counter()
    for a in actions:
        for _ in range(repeat):
            ts = base.step(a)
            if ts.last():
                break
        stack = [*stack[1:], base.physics.render(100, 100, camera_id=0).transpose(2, 0, 1)]
        np.concatenate(stack)
        if ts.last():
            base.reset()
    baseline = steps * repeat / (time.perf_counter() - start)
    return ours, baseline


def bench_memory(episodes: int = 4) -> tuple[float, float, float]:
    """Bytes per transition of (ours, SB3 ReplayBuffer) on real cartpole episodes, and GiB for 100k at 100 px."""
    env = DMCPixelEnv("cartpole", "swingup", render_size=100)
    capacity = episodes * 125
    ours = FrameStackReplayBuffer(capacity, env.observation_space, env.action_space, device="cpu")
    sb3 = ReplayBuffer(capacity, env.observation_space, env.action_space, device="cpu")
    for _ in range(episodes):
        obs, _ = env.reset()
        done = False
        while not done:
            a = env.action_space.sample()
            nxt, r, term, trunc, _ = env.step(a)
            done = term or trunc
            info = [{"TimeLimit.truncated": trunc and not term}]
            for buf in (ours, sb3):
                buf.add(obs[None], nxt[None], a[None], np.array([r]), np.array([done]), info)
            obs = nxt
    env.close()
    sb3_bytes = sum(getattr(sb3, k).nbytes for k in ("observations", "next_observations", "actions", "rewards",
                                                       "dones", "timeouts"))
    per_ours, per_sb3 = ours.nbytes() / capacity, sb3_bytes / capacity
    frames_written_per_transition = ours.frames_written / ours.transitions
    gib_100k = 100_000 * (frames_written_per_transition * 3 * 100 * 100 + (per_ours - ours.frames.nbytes / capacity))
    return per_ours, per_sb3, gib_100k / 2**30


def cpu_name() -> str:
    """The CPU model name, as recorded in every run's summary.json."""
    return str(hardware_info()["cpu"])


def main() -> None:
    """Run the three measurements (plus GPU ones when a GPU is present) and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=6, help="updates per timing round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds (median taken)")
    parser.add_argument("--frames", type=int, default=4000, help="environment frames per env benchmark")
    args = parser.parse_args()
    wall = time.perf_counter()
    print(f"hardware: {cpu_name()}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}; "
          f"torch {torch.__version__}; MUJOCO_GL={os.environ.get('MUJOCO_GL')}")

    ours, stock = bench_updates(128, args.updates, args.rounds, "cpu")
    print(f"1. update time, batch 128, CPU: ours {ours:.3f} s (incl. contrastive) vs stock SB3 SAC {stock:.3f} s "
          f"-> ratio {ours / stock:.2f}x (target <= 0.85x)")

    for domain, task in (("cartpole", "swingup"), ("cheetah", "run")):
        fps_ours, fps_base = bench_env(domain, task, args.frames)
        print(f"2. env frames/s, {domain}-{task} (action repeat {curl_action_repeat(domain)}): ours {fps_ours:.0f} "
              f"vs dm-control default rendering {fps_base:.0f} -> ratio {fps_ours / fps_base:.1f}x (target >= 4x)")

    per_ours, per_sb3, gib = bench_memory()
    print(f"3. replay bytes/transition (9x100x100 stacks): ours {per_ours:.0f} vs SB3 obs+next_obs {per_sb3:.0f} "
          f"-> ratio {per_ours / per_sb3:.3f}x (target <= 0.2x); 100k transitions = {gib:.2f} GiB")

    if torch.cuda.is_available():
        ours, stock = bench_updates(512, args.updates, args.rounds, "cuda")
        print(f"4. GPU {torch.cuda.get_device_name()}: batch 512 ours {1 / ours:.1f} updates/s vs stock SB3 "
              f"{1 / stock:.1f} updates/s")
    else:
        print("4. no GPU: skipped updates/s at batch 512 and the cartpole-swingup 100k-frame learning runs")
    print(f"wall time: {time.perf_counter() - wall:.0f} s")


if __name__ == "__main__":
    main()
