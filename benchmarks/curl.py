"""Side-by-side measurements for the ``curl`` plugin (issues 4 and 10). Prints ratios; asserts nothing.

Headline (issue 10), ours vs the reference CURL agent (``benchmarks/curl_reference.py``: Laskin et al.'s code
imported from ``--reference-dir``), the same replay content, interleaved A/B rounds in this one process, min and
median over the rounds:

H1. 2 updates (critic + contrastive each, actor/α/targets once), batch 128, CPU. Target <= 0.6x.
H2. the same at batch 512. Target <= 0.5x.
H3. replay sample + crop + float cast, batch 128: our ``CurlSAC.sample_views`` and ``.float()`` of its crops vs
    the reference's ``ReplayBuffer.sample_cpc`` (which casts its crops to float; both leave the 1/255 scaling to
    the encoder). Target <= 0.7x.
H3u. our ``sample_views`` alone (uint8 crops, no cast) against the same reference figure: where the time goes.
H3p. the input work of one update, replay to conv input: ours ``sample_views`` + ``CurlFeatures.prepare`` of each
    batch of crops (float ``/255``, channels-last, once per batch); the reference ``sample_cpc`` + the ``/ 255.``
    its encoder does at each of the update's 6 (on average) forward passes.
H1 floor. The convolutions of our 2 updates alone (per update 3 trunk forward passes without and 2 with gradient,
    each followed by its backward; no heads, MLPs or optimisers) vs the reference's full 2 updates: the lowest
    float32 H1 reachable with these kernels without changing the update.
H4. cost growth of H1 → H2 (time at 512 / time at 128) of each agent. Target <= 4.5x.
H1b/H2b. H1/H2 with ``agent.bf16=true`` (the conv trunks under bf16 autocast; on a CPU with AVX512-BF16 or AMX
    oneDNN runs them in bf16, elsewhere it emulates them and this row is slower).

``agent.tune_malloc`` (our default) changes glibc's settings for the whole process, so a reference measured in
this process runs with them too (the ratios then compare the agents under the same allocator settings).
``--reference-process`` runs the reference in a child process with glibc's defaults, as it ships, still one
round each in turn (the issue's comparison); ``--no-tune-malloc`` turns our setting off.

Secondary rows (issue 4):

1. Per-update wall time at batch 128 on the CPU, our CURL update (critic + actor + contrastive) vs stock SB3
   ``SAC`` with the same encoder as its features extractor and no contrastive update. Target <= 0.85x.
2. Environment frames/s of our pixel env vs dm-control's default-quality rendering of the same task (a fresh
   ``suite.load`` env, ``physics.render(100, 100, camera_id=0)`` after each action repeat, as dmc2gym does).
   Target >= 4x.
3. Replay bytes per transition vs SB3's ``ReplayBuffer`` (obs + next_obs). Target <= 0.2x.

With a GPU it also measures updates/s at batch 512. Usage::

    python benchmarks/curl.py --skip-secondary --reference-process     # headline, reference as it ships
    python benchmarks/curl.py [--rounds 3] [--fill 1000] [--no-tune-malloc] [--updates 6] [--frames 4000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import torch
from stable_baselines3 import SAC
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.logger import Logger

from contrastlab.envs import DMCPixelEnv, curl_action_repeat
from contrastlab.platform.config import resolve_config
from contrastlab.platform.sysinfo import describe_timing_environment, hardware_info
from contrastlab.plugins.curl.buffer import FrameStackReplayBuffer
from contrastlab.plugins.curl.policy import CurlFeatures
from contrastlab.plugins.curl.task import CurlTask, make_agent, make_env

sys.path.insert(0, str(Path(__file__).resolve().parent))
from curl_reference import DEFAULT_REFERENCE, _NullLogger, build_ours, build_reference, collect


def time_updates(model, batch: int, updates: int) -> float:
    """Seconds per update over ``updates`` calls of ``model.train`` (on a GPU, from an idle device until its queued
    work is done: our update never waits for the GPU by itself)."""
    cuda = model.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(model.device)
    start = time.perf_counter()
    model.train(gradient_steps=updates, batch_size=batch)
    if cuda:
        torch.cuda.synchronize(model.device)
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
    stock.set_logger(Logger(None, []))  # else SB3 makes an empty SB3-<date> folder in the temp dir
    for model in (ours, stock):
        model.learn(fill)  # random-action transitions only (learning_starts not reached)
        # warm-up: 2 updates, so that the actor/α/target update (every second one) has run once too; with 1, the
        # first timed round paid that path's one-time setup (≈ 2.7 vs 0.42 s per update of ours on the 2-core VM)
        model.train(gradient_steps=2, batch_size=batch)
    t_ours, t_stock = [], []
    for _ in range(rounds):
        t_ours.append(time_updates(ours, batch, updates))
        t_stock.append(time_updates(stock, batch, updates))
    return statistics.median(t_ours), statistics.median(t_stock)


def interleaved(fns: dict[str, Any], rounds: int, remote: bool = False) -> dict[str, list[float]]:
    """Seconds of each ``fn()`` per round, the functions alternating within every round (A/B/A/B...), after one
    untimed call of each (its one-time setup: kernels, buffers, page faults); with ``remote`` the ``reference``
    function returns its own (child-process) seconds."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            out = fn()
            times[name].append(out if remote and name == "reference" else time.perf_counter() - start)
    return times


def reference_worker(batch: int, fill: int, reference_dir: Path) -> None:
    """``--worker``: the reference agent in its own process (glibc defaults), timing one round per stdin line
    (``update``: 2 updates; ``sample``: one ``sample_cpc``) and printing its seconds."""
    torch.manual_seed(0)
    np.random.seed(0)
    agent, buffer = build_reference("cpu", batch, collect(fill), reference_dir)
    logger, step = _NullLogger(), [0]

    def updates() -> None:
        for _ in range(2):
            step[0] += 1
            agent.update(buffer, logger, step[0])

    updates()  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        fn = {"update": updates, "sample": buffer.sample_cpc, "input": lambda: reference_input(buffer)}[line.strip()]
        start = time.perf_counter()
        fn()
        print(time.perf_counter() - start, flush=True)


def reference_input(buffer: Any) -> None:
    """The reference's input work of one update: ``sample_cpc`` (crops cast to float) and the ``obs / 255.`` its
    ``PixelEncoder.forward`` does at each of the update's 6 encoder passes on average (``obs``: critic, anchor and,
    every 2nd update, actor + critic again; ``next_obs``: actor and target critic; the positive key)."""
    obs, _, _, next_obs, _, cpc = buffer.sample_cpc()
    for images in (obs, obs, obs, next_obs, next_obs, cpc["obs_pos"]):
        images / 255.0


class _RemoteReference:
    """Drives :func:`reference_worker` in a child process; ``run(cmd)`` returns the child's seconds."""

    def __init__(self, batch: int, fill: int, reference_dir: Path) -> None:
        cmd = [sys.executable, __file__, "--worker", str(batch), "--fill", str(fill), "--reference-dir",
               str(reference_dir)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
            raise SystemExit("error: the reference worker failed to start")

    def run(self, cmd: str) -> float:
        self.proc.stdin.write(cmd + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return float(self.proc.stdout.readline())  # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait()


def vs_reference(batch: int, rounds: int, transitions: list, reference_dir: Path, tune_malloc: bool,
                 sample: bool = False, remote: bool = False, fill: int = 0) -> dict[str, list[float]]:
    """Seconds per 2 updates (and, with ``sample``, per sample + crop) of ours, ours with ``agent.bf16=true``
    (``ours_bf16``) and the reference, interleaved; ``remote``: the reference in a child process with glibc's
    defaults, still one round each in turn."""
    malloc = f"agent.tune_malloc={str(tune_malloc).lower()}"
    ours = build_ours("cpu", batch, transitions, sets=(malloc,))
    ours_bf16 = build_ours("cpu", batch, transitions, sets=(malloc, "agent.bf16=true"))

    def ours_sample() -> None:  # + the float cast the reference's sample_cpc does to its crops
        views, data = ours.sample_views(batch)
        [v.float() for v in (*views, data.next_observations)]

    def ours_input() -> None:  # + what our update does before its conv passes (float /255, channels-last)
        views, data = ours.sample_views(batch)
        [ours.policy.encoder.prepare(v) for v in (*views, data.next_observations)]

    views, data = ours.sample_views(batch)  # one prepared batch for the conv-only rows (not timed)
    obs, nxt, pos = (ours.policy.encoder.prepare(v) for v in (views[0], data.next_observations, views[1]))

    def ours_conv() -> None:  # the conv passes of 2 updates alone: per update 3 without and 2 with gradient
        encoder, key_encoder = ours.policy.encoder, ours.policy.key_encoder
        for _ in range(2):
            with torch.no_grad():
                encoder.trunk(nxt), key_encoder.trunk(nxt), key_encoder.trunk(pos)
            for _ in range(2):  # critic and contrastive passes (their backward reaches the first conv's weights)
                encoder.trunk(obs).sum().backward()
        encoder.zero_grad(set_to_none=True)

    if remote:
        ref = _RemoteReference(batch, fill, reference_dir)
        ref_update, ref_sample = (lambda: ref.run("update")), (lambda: ref.run("sample"))
        ref_input = lambda: ref.run("input")  # noqa: E731
    else:
        agent, buffer = build_reference("cpu", batch, transitions, reference_dir)
        logger, step = _NullLogger(), [0]

        def ref_update() -> None:
            for _ in range(2):
                step[0] += 1
                agent.update(buffer, logger, step[0])

        ref_sample = buffer.sample_cpc
        ref_input = lambda: reference_input(buffer)  # noqa: E731
    # interleaved() warms every function once (before, the conv-floor and sampling rows had no warm-up)
    times = interleaved({"ours": lambda: ours.train(gradient_steps=2, batch_size=batch), "reference": ref_update,
                         "ours_bf16": lambda: ours_bf16.train(gradient_steps=2, batch_size=batch),
                         "ours_conv": ours_conv}, rounds, remote)
    if sample:
        times.update({f"{k}_sample": v for k, v in interleaved(
            {"ours": ours_sample, "ours_crop": lambda: ours.sample_views(batch), "reference": ref_sample},
            rounds * 20, remote).items()})
        times.update({f"{k}_input": v for k, v in interleaved(
            {"ours": ours_input, "reference": ref_input}, rounds * 20, remote).items()})
    if remote:
        ref.close()
    return times


def ratio_line(label: str, ours: list[float], ref: list[float], target: str, unit: float = 1.0, fmt: str = ".3f",
               suffix: str = "s") -> str:
    """``label: ours min/median vs reference min/median -> ratio min/median``."""
    o_min, o_med, r_min, r_med = min(ours), statistics.median(ours), min(ref), statistics.median(ref)
    return (f"{label}: ours {o_min * unit:{fmt}}/{o_med * unit:{fmt}} {suffix} vs reference {r_min * unit:{fmt}}/"
            f"{r_med * unit:{fmt}} {suffix} (min/median) -> ratio {o_min / r_min:.2f}x/{o_med / r_med:.2f}x "
            f"(target {target})")


def headline(rounds: int, fill: int, reference_dir: Path, tune_malloc: bool, remote: bool) -> None:
    """Print H1-H4 (module docstring)."""
    torch.manual_seed(0)
    np.random.seed(0)
    transitions = collect(fill)
    where = "its own process, glibc defaults" if remote else "this process, the same allocator settings"
    print(f"reference: {where}")
    t128 = vs_reference(128, rounds, transitions, reference_dir, tune_malloc, sample=True, remote=remote, fill=fill)
    print(ratio_line("H1. 2 updates, batch 128", t128["ours"], t128["reference"], "<= 0.6x"))
    t512 = vs_reference(512, rounds, transitions, reference_dir, tune_malloc, remote=remote, fill=fill)
    print(ratio_line("H2. 2 updates, batch 512", t512["ours"], t512["reference"], "<= 0.5x"))
    print(ratio_line("H1b. H1 with agent.bf16=true", t128["ours_bf16"], t128["reference"], "<= 0.6x"))
    print(ratio_line("H2b. H2 with agent.bf16=true", t512["ours_bf16"], t512["reference"], "<= 0.5x"))
    print(ratio_line("H3. replay sample + crop + float cast, batch 128", t128["ours_sample"],
                     t128["reference_sample"], "<= 0.7x", unit=1e3, fmt=".1f", suffix="ms"))
    print(ratio_line("H3u. our sample + crop alone (uint8)", t128["ours_crop_sample"], t128["reference_sample"],
                     "-", unit=1e3, fmt=".1f", suffix="ms"))
    print(ratio_line("H3p. input work per update (sample, crop, cast, 1/255)", t128["ours_input"],
                     t128["reference_input"], "-", unit=1e3, fmt=".1f", suffix="ms"))
    print(ratio_line("H1 floor. our conv passes alone (float32)", t128["ours_conv"], t128["reference"],
                     "the lowest float32 H1 these kernels allow"))
    grow = {k: statistics.median(t512[k]) / statistics.median(t128[k]) for k in ("ours", "reference")}
    print(f"H4. cost growth 128 -> 512 (median): ours {grow['ours']:.1f}x, reference {grow['reference']:.1f}x "
          f"(target <= 4.5x)")


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
    parser.add_argument("--fill", type=int, default=1000, help="replay transitions for the headline rows")
    parser.add_argument("--reference-dir", type=Path,
                        default=Path(os.environ.get("CURL_REFERENCE_DIR", str(DEFAULT_REFERENCE))))
    parser.add_argument("--no-tune-malloc", action="store_true", help="glibc defaults for both agents")
    parser.add_argument("--skip-secondary", action="store_true", help="only the headline rows H1-H4")
    parser.add_argument("--reference-process", action="store_true",
                        help="run the reference in a child process with glibc's defaults (as it ships)")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        reference_worker(args.worker, args.fill, args.reference_dir)
        return
    wall = time.perf_counter()
    print(f"hardware: {cpu_name()}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}; "
          f"torch {torch.__version__}; MUJOCO_GL={os.environ.get('MUJOCO_GL')}; "
          f"load average {os.getloadavg()[0]:.1f}; agent.tune_malloc={not args.no_tune_malloc}; "
          f"{describe_timing_environment()}")
    if (args.reference_dir / "curl_sac.py").is_file():
        headline(args.rounds, args.fill, args.reference_dir, not args.no_tune_malloc, args.reference_process)
    else:
        print(f"H1-H4 skipped: no reference CURL at {args.reference_dir} (set --reference-dir)")
    if args.skip_secondary:
        print(f"wall time: {time.perf_counter() - wall:.0f} s; load average {os.getloadavg()[0]:.1f}")
        return

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
    print(f"wall time: {time.perf_counter() - wall:.0f} s; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
