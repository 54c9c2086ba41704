"""Speed and memory of every loss relative to InfoNCE, and of our DCL/HCL/BCL against paper-style code.

Usage::

    python benchmarks/losses.py                    # B = 512 (A = 1024, N = 1022), d = 128; CPU and CUDA if present
    python benchmarks/losses.py --device cpu --threads 1 2 --repeats 20
    python benchmarks/losses.py --quick            # B = 128, fewer repeats (smoke)

What is measured (forward + backward, from the two ``[B, d]`` embedding batches with ``requires_grad``):

* **pipeline**: ``two_view`` sampler + loss (what a training step pays for the contrastive part);
* **loss only**: the loss on a precomputed ``ContrastiveBatch`` (logits as leaves with ``requires_grad``).

Timing: every function is run round-robin (one call of each per round, ``--repeats`` rounds after warm-up), so all
of them see the same background load on a shared machine; the tables give the minimum and the median over the
rounds and the ratios of both. The paper-style BCL (seconds per call at full size) is the exception: it is timed
after the round-robin rounds, in min(``--repeats``, 3) rounds of its own, as its table says. CPU timings are taken
for every ``--threads`` value (default: 1 and torch's default count). Peak memory is the peak of bytes allocated
during forward + backward above the level before it: on CUDA ``torch.cuda.max_memory_allocated``; on CPU the
running sum of the allocation/free events recorded by ``torch.profiler`` (``profile_memory=True``), which includes
transient tensors (e.g. the ``[A, N, N]`` comparison tensor of the BCL reference code): the events are replayed in
time order, each adding its own (self) allocations minus frees, and the running maximum is taken. (Our BCL's eCDF
on CPU sorts in numpy, in row blocks whose reused buffers, ≈ 2.3 MiB per thread, the profiler does not see.)

The "naive" implementations are written the way the papers' reference code computes (DCL: chingyaoc/DCL,
HCL: joshr17/HCL, BCL: liubin06/BCL; exp of the similarities, masked_select of the negatives, then log; BCL's
eCDF from an ``[A, N, N]`` comparison). They are re-written here from the descriptions, not copied.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

import contrastlab as cl
from contrastlab.platform.sysinfo import describe_timing_environment

LOSSES = ["infonce", "dcl", "hcl", "bcl", "pucl", "debiased_pos", "punce", "supcon", "unbiased"]
T, TAU = 0.5, 0.1


# ------------------------------------------------------------------------------------------ paper-style code
def _paper_neg_pos(z1: torch.Tensor, z2: torch.Tensor, t: float) -> tuple[torch.Tensor, torch.Tensor]:
    """exp-space similarities as in the DCL/HCL/BCL repos: ``neg [2B, 2B−2]`` and ``pos [2B]``."""
    out_1, out_2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    B = z1.shape[0]
    out = torch.cat([out_1, out_2], dim=0)
    neg = torch.exp(out @ out.t().contiguous() / t)
    mask = torch.ones(2 * B, 2 * B, dtype=torch.bool, device=z1.device)
    idx = torch.arange(B, device=z1.device)
    mask[idx, idx] = mask[idx + B, idx + B] = mask[idx, idx + B] = mask[idx + B, idx] = False
    neg = neg.masked_select(mask).view(2 * B, -1)
    pos = torch.exp(torch.sum(out_1 * out_2, dim=-1) / t)
    return neg, torch.cat([pos, pos], dim=0)


def naive_dcl(z1: torch.Tensor, z2: torch.Tensor, tau_plus: float = TAU, t: float = T) -> torch.Tensor:
    """DCL as in its reference code (exp, then clamp, then log)."""
    neg, pos = _paper_neg_pos(z1, z2, t)
    N = neg.shape[1]
    ng = (-tau_plus * N * pos + neg.sum(dim=-1)) / (1 - tau_plus)
    ng = torch.clamp(ng, min=N * math.e ** (-1 / t))
    return (-torch.log(pos / (pos + ng))).mean()


def naive_hcl(z1: torch.Tensor, z2: torch.Tensor, tau_plus: float = TAU, beta: float = 1.0, t: float = T):
    """HCL as in its reference code (importance weights ``neg^β``, not detached)."""
    neg, pos = _paper_neg_pos(z1, z2, t)
    N = neg.shape[1]
    imp = (beta * neg.log()).exp()
    reweight_neg = (imp * neg).sum(dim=-1) / imp.mean(dim=-1)
    ng = (-tau_plus * N * pos + reweight_neg) / (1 - tau_plus)
    ng = torch.clamp(ng, min=N * math.e ** (-1 / t))
    return (-torch.log(pos / (pos + ng))).mean()


def naive_bcl(z1: torch.Tensor, z2: torch.Tensor, tau_plus: float = TAU, alpha: float = 0.9, beta: float = 0.9,
              t: float = T) -> torch.Tensor:
    """BCL as in its reference code: eCDF from an ``[A, N, N]`` comparison, eq. 21 root, eq. 20 weights."""
    neg, pos = _paper_neg_pos(z1, z2, t)
    N = neg.shape[1]
    phi_un = (neg.unsqueeze(1) <= neg.unsqueeze(2)).sum(dim=-1) / N  # [A, N, N] → [A, N]
    tm = 1 - tau_plus
    a = (1 - 2 * alpha) * (tm - tau_plus)
    b = 2 * (alpha * tm + (1 - alpha) * tau_plus)
    phi = (-b + torch.sqrt(b * b + 4 * a * phi_un)) / (2 * a)
    z = (1 - beta) * alpha + beta * (1 - alpha)
    w = ((1 - beta) * alpha + (beta - alpha) * phi) / (z * (alpha * tm + (1 - alpha) * tau_plus
                                                           + (1 - 2 * alpha) * phi * (tm - tau_plus)))
    ng = (w.detach() * neg).sum(dim=-1)
    return (-torch.log(pos / (pos + ng))).mean()


NAIVE = {"dcl": naive_dcl, "hcl": naive_hcl, "bcl": naive_bcl}


# ------------------------------------------------------------------------------------------------ measuring
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_interleaved(fns: dict[str, Callable[[], torch.Tensor]], device: torch.device, repeats: int,
                     warmup: int = 2) -> dict[str, list[float]]:
    """Seconds of ``fn().backward()`` for every ``fn`` in each of ``repeats`` round-robin rounds.

    Interleaving the functions within each round makes the *ratios* robust to other load on a shared machine
    (every function sees the same background); report the minimum and the median of the rounds.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn().backward()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            _sync(device)
            start = time.perf_counter()
            fn().backward()
            _sync(device)
            samples[name].append(time.perf_counter() - start)
    return samples


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence the profiler's native start/stop lines (written to file descriptor 2)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def peak_bytes(fn: Callable[[], torch.Tensor], device: torch.device) -> int:
    """Peak bytes allocated during ``fn().backward()`` above the level before it (see the module doc), measured
    on a second call: one-time allocations of a first call (cuBLAS's workspace at the process's first matmul on
    CUDA, kept for the process) are no part of any loss's peak."""
    fn().backward()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn().backward()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    with _quiet_stderr(), torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True
    ) as prof:
        fn().backward()
    events = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events())
    level = peak = 0
    for _, delta in events:
        level += delta
        peak = max(peak, level)
    return peak


def make_inputs(B: int, d: int, device: torch.device, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two correlated views ``[B, d]`` (leaves with grad) and PU labels ``[B]`` (10 % labeled)."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(B, d, generator=g)
    z1 = (base + 0.5 * torch.randn(B, d, generator=g)).to(device).requires_grad_(True)
    z2 = (base + 0.5 * torch.randn(B, d, generator=g)).to(device).requires_grad_(True)
    labels = torch.where(torch.rand(B, generator=g) < 0.1, 1, -1).to(device)
    return z1, z2, labels


TARGETS = {"debiased": 1.5, "bcl_time": 2.0, "bcl_memory": 2.0, "vs_naive": 1.0}
"""The issue's targets: debiased losses ≤ 1.5× InfoNCE time, BCL ≤ 2× time and memory, ours ≤ naive."""
DEBIASED = ["dcl", "hcl", "bcl", "pucl", "debiased_pos", "punce"]


def bench_device(device: torch.device, B: int, d: int, repeats: int, threads: list[int]) -> None:
    """Print the tables for one device (CPU: timings for every thread count in ``threads``)."""
    z1, z2, labels = make_inputs(B, d, device)
    sampler = cl.make_sampler("two_view", temperature=T)
    with torch.no_grad():
        fixed = sampler(z1, z2, labels=labels)
    pos_leaf = fixed.pos_logits.clone().requires_grad_(True)
    neg_leaf = fixed.neg_logits.clone().requires_grad_(True)
    A, N = fixed.num_anchors, fixed.neg_logits.shape[1]
    print(f"\n### {device.type.upper()}: B = {B} (A = {A}, N = {N}), d = {d}, temperature {T}")

    fns: dict[str, Callable[[], torch.Tensor]] = {}
    for name in LOSSES:
        loss = cl.make_loss(name)
        lab = labels if cl.loss_label_kinds(name) else None
        fns[f"pipe/{name}"] = lambda loss=loss, lab=lab: loss(sampler(z1, z2, labels=lab))
        kw = {} if lab is None else {"anchor_labels": fixed.anchor_labels, "neg_labels": fixed.neg_labels}
        fns[f"loss/{name}"] = lambda loss=loss, kw=kw: loss(cl.ContrastiveBatch(pos_leaf, neg_leaf, temperature=T,
                                                                                  **kw))
    for name, naive in NAIVE.items():
        fns[f"naive/{name}"] = lambda naive=naive: naive(z1, z2)
    slow = {k: fns.pop(k) for k in list(fns) if k == "naive/bcl"}
    peaks = {k: peak_bytes(fn, device) for k, fn in {**fns, **slow}.items()}
    diffs = {}
    with torch.no_grad():
        for name, naive in NAIVE.items():
            diffs[name] = abs(float(fns[f"pipe/{name}"]()) - float(naive(z1, z2)))

    print("\nPeak memory above the level before the call (forward + backward):\n")
    print("| loss | pipeline peak (MiB) | × infonce | loss-only peak (MiB) | × infonce |")
    print("|---|---|---|---|---|")
    mp0, ml0 = peaks["pipe/infonce"], peaks["loss/infonce"]
    for name in LOSSES:
        mp, ml = peaks[f"pipe/{name}"], peaks[f"loss/{name}"]
        print(f"| {name} | {mp / 2**20:.1f} | {mp / mp0:.2f} | {ml / 2**20:.1f} | {ml / ml0:.2f} |")

    verdicts: list[str] = []
    for n_threads in threads if device.type == "cpu" else [torch.get_num_threads()]:
        if device.type == "cpu":
            torch.set_num_threads(n_threads)
        samples = time_interleaved(fns, device, repeats)
        slow_rounds = max(1, min(repeats, 3))  # seconds per call at full size: timed apart, in fewer rounds
        samples.update(time_interleaved(slow, device, slow_rounds, warmup=1))
        best = {k: min(v) for k, v in samples.items()}
        med = {k: statistics.median(v) for k, v in samples.items()}
        where = f"{n_threads} CPU thread{'s' if n_threads > 1 else ''}" if device.type == "cpu" else "CUDA"
        print(f"\n#### Time, {where} (min and median of {repeats} round-robin rounds; ratios to infonce)\n")
        print("| loss | pipeline min (ms) | median (ms) | × infonce (min) | × infonce (median) "
              "| loss-only min (ms) | median (ms) | × infonce (min) | × infonce (median) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name in LOSSES:
            p, lo = f"pipe/{name}", f"loss/{name}"
            print(f"| {name} | {best[p] * 1e3:.2f} | {med[p] * 1e3:.2f} | {best[p] / best['pipe/infonce']:.2f} "
                  f"| {med[p] / med['pipe/infonce']:.2f} | {best[lo] * 1e3:.2f} | {med[lo] * 1e3:.2f} "
                  f"| {best[lo] / best['loss/infonce']:.2f} | {med[lo] / med['loss/infonce']:.2f} |")

        print(f"\nOurs (two_view + loss) vs. paper-style exp-then-log code, {where}, forward + backward from the "
              f"embeddings (naive bcl: min and median of {slow_rounds} rounds of its own, after the round-robin "
              "ones):\n")
        print("| loss | ours min (ms) | naive min (ms) | ours / naive (min) | ours / naive (median) "
              "| ours peak (MiB) | naive peak (MiB) | ours / naive memory | value diff |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name in NAIVE:
            o, n = f"pipe/{name}", f"naive/{name}"
            mo, mn = peaks[o], peaks[n]
            print(f"| {name} | {best[o] * 1e3:.2f} | {best[n] * 1e3:.2f} | {best[o] / best[n]:.2f} "
                  f"| {med[o] / med[n]:.2f} | {mo / 2**20:.1f} | {mn / 2**20:.1f} | {mo / mn:.2f} "
                  f"| {diffs[name]:.1e} |")

        lines = [(f"{name} pipeline ≤ {TARGETS['debiased']}× infonce", f"pipe/{name}", "pipe/infonce",
                  TARGETS["debiased"]) for name in DEBIASED if name != "bcl"]
        lines.append((f"bcl pipeline ≤ {TARGETS['bcl_time']}× infonce", "pipe/bcl", "pipe/infonce",
                      TARGETS["bcl_time"]))
        lines += [(f"{name} ours ≤ naive", f"pipe/{name}", f"naive/{name}", TARGETS["vs_naive"]) for name in NAIVE]
        for text, a, b, limit in lines:
            r_min, r_med = best[a] / best[b], med[a] / med[b]
            ok = "met" if max(r_min, r_med) <= limit else ("met on min only" if r_min <= limit else "NOT met")
            verdicts.append(f"| {where} | {text} | {r_min:.2f} | {r_med:.2f} | {ok} |")

    r_mem = peaks["pipe/bcl"] / peaks["pipe/infonce"]
    verdicts.append(f"| any | bcl pipeline peak ≤ {TARGETS['bcl_memory']}× infonce | {r_mem:.2f} | {r_mem:.2f} "
                    f"| {'met' if r_mem <= TARGETS['bcl_memory'] else 'NOT met'} |")
    print("\n#### Targets (ratios: min-based / median-based)\n")
    print("| threads | target | ratio (min) | ratio (median) | verdict |")
    print("|---|---|---|---|---|")
    print("\n".join(verdicts))

    if device.type == "cpu":
        torch.set_num_threads(threads[0])
    print(f"\nBCL scaling in N (loss only, per anchor, {torch.get_num_threads()} thread(s); ours is O(N log N) time "
          "and O(N) memory per anchor):\n")
    print("| B | N | ours time / anchor (µs) | ours peak / anchor (KiB) | naive peak / anchor (KiB) |")
    print("|---|---|---|---|---|")
    for b_size in (64, 128, 256, 512, 1024):
        if b_size > B:
            break
        y1, y2, _ = make_inputs(b_size, d, device, seed=1)
        with torch.no_grad():
            fb = sampler(y1, y2)
        p, n = fb.pos_logits.clone().requires_grad_(True), fb.neg_logits.clone().requires_grad_(True)
        bcl = cl.make_loss("bcl")

        def ours_bcl(bcl=bcl, p=p, n=n):
            return bcl(cl.ContrastiveBatch(p, n, temperature=T))

        def naive_only(y1=y1, y2=y2):
            return naive_bcl(y1, y2)

        t_ours = min(time_interleaved({"bcl": ours_bcl}, device, repeats)["bcl"])
        a = 2 * b_size
        print(f"| {b_size} | {2 * b_size - 2} | {t_ours / a * 1e6:.2f} | {peak_bytes(ours_bcl, device) / a / 1024:.1f} "
              f"| {peak_bytes(naive_only, device) / a / 1024:.1f} |")


def main() -> None:
    """Parse arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: CPU, plus CUDA when available")
    parser.add_argument("--batch", type=int, default=512, help="B (A = 2B anchors, N = 2B − 2)")
    parser.add_argument("--dim", type=int, default=128, help="embedding size d")
    parser.add_argument("--repeats", type=int, default=12, help="timed round-robin rounds (min and median reported)")
    parser.add_argument("--threads", type=int, nargs="+", default=None,
                        help="CPU thread counts to time (default: 1 and torch's default count)")
    parser.add_argument("--quick", action="store_true", help="B = 128 and 3 repeats")
    args = parser.parse_args()
    default_threads = torch.get_num_threads()
    threads = args.threads or sorted({1, default_threads})
    if args.quick:
        args.batch, args.repeats = 128, 3
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"default {default_threads} CPU threads (timed with {threads}), CUDA: {torch.cuda.is_available()}; "
          f"{describe_timing_environment()}")
    print(f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    devices = []
    if args.device in ("auto", "cpu"):
        devices.append(torch.device("cpu"))
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        devices.append(torch.device("cuda"))
    for device in devices:
        torch.set_num_threads(default_threads)
        bench_device(device, args.batch, args.dim, args.repeats, threads)


if __name__ == "__main__":
    main()
