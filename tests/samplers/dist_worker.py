"""Worker of test_distributed.py: one gloo rank. Run as ``python dist_worker.py RANK WORLD INIT_FILE OUT_JSON``.

For every sampler and every loss it computes, on this rank's shard of a global batch, the loss value, the
DDP-averaged parameter gradients of a small shared encoder and the gradient reaching this rank's embeddings,
and compares them with the single-process computation on the concatenated batch (done on this rank too).
"""

from __future__ import annotations

import copy
import json
import os
import sys

import torch
import torch.distributed as dist

import contrastlab as cl

LOSSES = {
    "infonce": {}, "dcl": {"tau_plus": 0.1}, "hcl": {}, "bcl": {}, "pucl": {"alpha": 0.3, "c": 0.1},
    "punce": {}, "debiased_pos": {}, "supcon": {}, "unbiased": {},
}
SAMPLERS = {
    "two_view": {}, "multi_view": {}, "queue": {"size": 12, "temperature": 0.5},
    "query_key": {"embed_dim": 6}, "query_key_cosine": {"similarity": "cosine", "temperature": 0.5},
}
B, D_IN, D = 4, 5, 6


def _labels(loss: str, n: int, gen: torch.Generator) -> torch.Tensor | None:
    kinds = cl.loss_label_kinds(loss)
    if not kinds:
        return None
    if kinds == frozenset({"pu"}):
        return torch.where(torch.rand(n, generator=gen) < 0.4, 1, -1)
    return torch.randint(-1, 2, (n,), generator=gen)


def _run(sampler, enc, x, labels, steps):
    """Loss values and (after each step) gradients; ``x``: [steps, V, B', d_in]; ``labels``: [B'] or None."""
    out = []
    for s in range(steps):
        enc.zero_grad()
        sampler.zero_grad()
        z = enc(x[s])  # [V, B', d]
        z.retain_grad()
        if sampler.name in ("two_view",):
            batch = sampler(z[0], z[1], labels=labels)
        elif sampler.name == "multi_view":
            batch = sampler(z, labels=labels)
        elif sampler.name == "queue":
            batch = sampler(z[0], z[1].detach(), labels=labels)
        else:
            batch = sampler(z[0], [z[1].detach(), z[2].detach()], labels=labels)
        value = LOSS(batch)
        value.backward()
        grads = [p.grad.clone() for p in list(enc.parameters()) + list(sampler.parameters())]
        out.append((value.detach(), grads, z.grad.clone()))
    return out


def main() -> None:
    global LOSS
    rank, world, init, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    results = {}
    for si, (sname, shp) in enumerate(SAMPLERS.items()):
        registry_name = "query_key" if sname.startswith("query_key") else sname
        for li, (lname, lhp) in enumerate(LOSSES.items()):
            gen = torch.Generator().manual_seed(100 * si + li)  # identical global data on every rank
            steps = 3 if sname == "queue" else 1
            V = 3 if sname in ("multi_view", "query_key", "query_key_cosine") else 2
            x = torch.randn(steps, V, world * B, D_IN, generator=gen, dtype=torch.float64)
            labels = _labels(lname, world * B, gen)
            torch.manual_seed(1234)
            enc = torch.nn.Linear(D_IN, D).double()
            sampler = cl.make_sampler(registry_name, **shp).double()
            ref_enc, ref_sampler = copy.deepcopy(enc), copy.deepcopy(sampler)
            ref_sampler.gather_distributed = False
            LOSS = cl.make_loss(lname, **lhp)
            sl = slice(rank * B, (rank + 1) * B)
            dist_out = _run(sampler, enc, x[:, :, sl], None if labels is None else labels[sl], steps)
            ref_out = _run(ref_sampler, ref_enc, x, labels, steps)
            worst = {"value": 0.0, "param_grad": 0.0, "embedding_grad": 0.0, "value_nonzero": 0.0}
            for (v, g, zg), (rv, rg, rzg) in zip(dist_out, ref_out, strict=True):
                worst["value"] = max(worst["value"], float((v - rv).abs()))
                worst["value_nonzero"] = max(worst["value_nonzero"], float(rv.abs()))
                for gi, rgi in zip(g, rg, strict=True):
                    dist.all_reduce(gi)
                    gi /= world  # what DDP does
                    worst["param_grad"] = max(worst["param_grad"], float((gi - rgi).abs().max()))
                # documented convention: this rank's embeddings receive world_size × the single-process gradient
                worst["embedding_grad"] = max(worst["embedding_grad"],
                                              float((zg - world * rzg[:, sl]).abs().max()))
            results[f"{sname}/{lname}"] = worst
    with open(out_path, "w") as fh:
        json.dump(results, fh)
    dist.barrier()
    dist.destroy_process_group()
    # Leave without interpreter teardown: gloo's background threads can abort the process (SIGABRT) while Python
    # destroys modules, which would turn a finished, written result into a failed run.
    sys.stdout.flush()
    os._exit(0)


LOSS = None

if __name__ == "__main__":
    main()
