"""Throughput of the simclr plugin's batched augmentation and training step vs. a per-sample CPU pipeline.

Prints images/s side by side, in one run:

* ``batched``: :class:`contrastlab.data.augment.SimCLRAugment` on a whole batch (what the plugin does);
* ``per-sample torch``: the same operations applied image by image in a Python loop (a ``Dataset.__getitem__``
  that augments one tensor at a time);
* ``per-sample PIL``: the classic DataLoader pipeline users write (PIL crop/resize, flip, ImageEnhance
  brightness/contrast/saturation, HSV hue shift, grayscale, to tensor), one image at a time;
* one full training step (2 views → encoder + head → two_view → loss → Adam) fed by each pipeline.

Usage: ``python benchmarks/simclr.py [--dataset cifar10|fashion_mnist] [--batch 256] [--encoder small_cnn]
[--device cpu|cuda] [--repeats 5]``. Target on CPU: batched ≥ 3× the per-sample pipelines.
"""

from __future__ import annotations

import argparse
import platform
import random
import time

import numpy as np
import torch

import contrastlab as cl
from contrastlab.data.augment import augment_for, normalize
from contrastlab.encoders.heads import ContrastiveModel, ProjectionHead
from contrastlab.platform.sysinfo import describe_timing_environment


def pil_pipeline(img: np.ndarray, spec, rng: random.Random) -> torch.Tensor:
    """One image ``[C, H, W]`` uint8 through a PIL SimCLR pipeline → normalised float ``[C, S, S]``."""
    from PIL import Image, ImageEnhance

    gray_in = img.shape[0] == 1
    pil = Image.fromarray(img[0] if gray_in else img.transpose(1, 2, 0))
    w, h = pil.size
    for _ in range(10):
        area = rng.uniform(*spec.crop_scale) * w * h
        ratio = np.exp(rng.uniform(np.log(spec.crop_ratio[0]), np.log(spec.crop_ratio[1])))
        cw, ch = round((area * ratio) ** 0.5), round((area / ratio) ** 0.5)
        if 0 < cw <= w and 0 < ch <= h:
            break
    else:
        cw, ch = w, h
    x0, y0 = rng.randint(0, w - cw), rng.randint(0, h - ch)
    pil = pil.resize((spec.size, spec.size), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))
    if rng.random() < spec.flip_p:
        pil = pil.transpose(Image.FLIP_LEFT_RIGHT)
    if rng.random() < spec.jitter_p:
        b, c, s, hue = spec.jitter
        ops = [lambda p: ImageEnhance.Brightness(p).enhance(rng.uniform(1 - b, 1 + b)),
               lambda p: ImageEnhance.Contrast(p).enhance(rng.uniform(1 - c, 1 + c))]
        if not gray_in:
            ops.append(lambda p: ImageEnhance.Color(p).enhance(rng.uniform(1 - s, 1 + s)))

            def hue_shift(p):
                hsv = np.array(p.convert("HSV"))
                hsv[..., 0] = (hsv[..., 0].astype(np.int16) + int(rng.uniform(-hue, hue) * 255)) % 256
                return Image.fromarray(hsv, "HSV").convert("RGB")
            ops.append(hue_shift)
        rng.shuffle(ops)
        for op in ops:
            pil = op(pil)
    if not gray_in and rng.random() < spec.gray_p:
        pil = pil.convert("L").convert("RGB")
    arr = np.asarray(pil, dtype=np.float32) / 255.0
    t = torch.from_numpy(arr[None] if gray_in else arr.transpose(2, 0, 1).copy())
    return t


def time_it(fn, repeats: int, device: torch.device) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after one warm-up; on CUDA each run is timed from an idle
    device until its queued work is done (``aug.views`` returns once its kernels are queued)."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    fn()
    sync()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="cifar10", choices=["cifar10", "fashion_mnist", "stl10"])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--encoder", default="small_cnn")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    dev = torch.device(args.device)
    channels = 1 if args.dataset == "fashion_mnist" else 3
    size = {"cifar10": 32, "fashion_mnist": 28, "stl10": 96}[args.dataset]
    aug = augment_for(args.dataset, channels=channels)
    spec = aug.spec
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (args.batch, channels, size, size), dtype=torch.uint8, generator=g)
    images_dev = images.to(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    rng = random.Random(0)
    np_images = images.numpy()

    def batched():
        return aug.views(images_dev, 2, generator=gen)

    def per_sample_torch():
        return torch.stack([torch.cat([aug(images[i:i + 1]) for _ in range(2)]) for i in range(args.batch)],
                           1).to(dev)

    def per_sample_pil():
        out = torch.stack([torch.stack([pil_pipeline(np_images[i], spec, rng) for _ in range(2)])
                           for i in range(args.batch)], 1)
        return normalize(out.flatten(0, 1), spec).view(out.shape).to(dev)

    enc = cl.make_encoder(args.encoder, in_channels=channels)
    model = ContrastiveModel(enc, ProjectionHead(enc.out_dim)).to(dev).to(memory_format=torch.channels_last)
    sampler, loss_fn = cl.make_sampler("two_view", temperature=0.5), cl.make_loss("infonce")
    opt = torch.optim.Adam(model.parameters(), 1e-3)

    def step(make):
        def run():
            v = make()
            _, z = model(v.flatten(0, 1).contiguous(memory_format=torch.channels_last))
            z = z.float().view(2, args.batch, -1)
            loss = loss_fn(sampler(z[0], z[1]))
            opt.zero_grad()
            loss.backward()
            opt.step()
        return run

    rows = []
    for name, fn in (("batched (ours)", batched), ("per-sample torch loop", per_sample_torch),
                     ("per-sample PIL loop", per_sample_pil)):
        t_aug = time_it(fn, args.repeats, dev)
        t_step = time_it(step(fn), args.repeats, dev)
        rows.append((name, args.batch / t_aug, args.batch / t_step))
    print(f"simclr benchmark: {args.dataset} {channels}x{size}px, batch {args.batch} x 2 views, encoder "
          f"{args.encoder}, device {dev}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"{platform.processor() or platform.machine()}; {describe_timing_environment()}")
    print(f"{'pipeline':<24}{'augment img/s':>15}{'train-step img/s':>18}")
    for name, a, s in rows:
        print(f"{name:<24}{a:>15.0f}{s:>18.0f}")
    base = rows[0]
    for name, a, s in rows[1:]:
        print(f"speed-up vs {name}: augmentation {base[1] / a:.1f}x, training step {base[2] / s:.1f}x")


if __name__ == "__main__":
    main()
