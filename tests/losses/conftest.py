"""Fixtures for the loss tests: random batches and straightforward reference implementations.

The references are written directly from the formulas of losses-spec (exp-then-log, one row at a time, float64),
independently of the library's log-space implementation.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

import contrastlab as cl
from contrastlab import ContrastiveBatch


# ------------------------------------------------------------------------------------------------ batches
def random_views(B: int = 8, d: int = 5, V: int = 2, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    """``[V, B, d]`` random embeddings."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(V, B, d, generator=g, dtype=dtype)


def two_view_batch(B: int = 8, d: int = 5, t: float = 0.5, seed: int = 0, labels=None) -> ContrastiveBatch:
    """A float64 two_view batch of random embeddings (A = 2B, N = 2B − 2)."""
    z = random_views(B, d, 2, seed)
    return cl.make_sampler("two_view", temperature=t)(z[0], z[1], labels=labels)


def multi_view_batch(B: int = 6, d: int = 5, V: int = 3, t: float = 0.5, seed: int = 0, labels=None):
    """A float64 multi_view batch (M = V − 1)."""
    return cl.make_sampler("multi_view", temperature=t)(random_views(B, d, V, seed), labels=labels)


def masked_batch(A: int = 10, N: int = 9, M: int = 2, t: float = 0.5, seed: int = 0, labels: bool = True):
    """Hand-made bounded logits (cosine-like, |ℓ| ≤ 1/t) with a random validity mask and random labels."""
    g = torch.Generator().manual_seed(seed)
    pos = (torch.rand(A, M, generator=g, dtype=torch.float64) * 2 - 1) / t
    neg = (torch.rand(A, N, generator=g, dtype=torch.float64) * 2 - 1) / t
    mask = torch.rand(A, N, generator=g) > 0.25
    mask[:, 0] = True
    kw = {}
    if labels:
        kw = dict(
            anchor_labels=torch.randint(-1, 3, (A,), generator=g),
            neg_labels=torch.randint(-1, 3, (A, N), generator=g),
        )
    return ContrastiveBatch(pos, neg, neg_mask=mask, temperature=t, **kw)


def class_labels(B: int, seed: int = 0, classes: int = 3) -> torch.Tensor:
    """Random class labels in ``{-1, 0, …, classes−1}``."""
    g = torch.Generator().manual_seed(seed + 100)
    return torch.randint(-1, classes, (B,), generator=g)


def pu_labels(B: int, seed: int = 0, n_labeled: int = 3) -> torch.Tensor:
    """PU labels: ``n_labeled`` ones, the rest −1."""
    y = torch.full((B,), -1, dtype=torch.long)
    g = torch.Generator().manual_seed(seed + 200)
    y[torch.randperm(B, generator=g)[:n_labeled]] = 1
    return y


# --------------------------------------------------------------------------------------------- references
def _rows(b: ContrastiveBatch):
    mask = b.valid_mask()
    for i in range(b.num_anchors):
        valid = mask[i]
        yield (
            i,
            b.pos_logits[i],
            b.neg_logits[i][valid],
            None if b.neg_labels is None else b.neg_labels[i][valid],
            None if b.anchor_labels is None else int(b.anchor_labels[i]),
        )


def _floor(b: ContrastiveBatch, i: int) -> float:
    fl = b.floor_logit
    if fl is None:
        return -1.0 / b.temperature
    return float(fl[i]) if isinstance(fl, torch.Tensor) else float(fl)


def _neg_floor(b: ContrastiveBatch, i: int, ln: torch.Tensor, false_fraction: float):
    """Floor of the debiased negative mass N·g of row ``i``: ``N e^{ℓ_min}`` ("bound") or, for "trimmed",
    N × the mean of the ceil((1 − π) N) smallest e^{ℓ_j} (a tensor, so gradients flow like the library's)."""
    N = ln.numel()
    if b.negative_floor == "trimmed":
        keep = max(1, math.ceil((1 - false_fraction) * N - 1e-9))
        return N * torch.sort(torch.exp(ln)).values[:keep].mean()
    return torch.as_tensor(N * math.exp(_floor(b, i)), dtype=ln.dtype)


def ref_infonce(b):
    out = []
    for _, lp, ln, _, _ in _rows(b):
        pos = torch.exp(lp[0])
        out.append(-torch.log(pos / (pos + torch.exp(ln).sum())))
    return torch.stack(out)


def ref_dcl(b, tau_plus):
    out = []
    for i, lp, ln, _, _ in _rows(b):
        N = ln.numel()
        pos = torch.exp(lp[0])
        posbar = torch.exp(lp).mean()
        ng = (torch.exp(ln).sum() - N * tau_plus * posbar) / (1 - tau_plus)
        ng = torch.maximum(ng, _neg_floor(b, i, ln, tau_plus))
        out.append(-torch.log(pos / (pos + ng)))
    return torch.stack(out)


def ref_hcl(b, tau_plus, beta):
    out = []
    for i, lp, ln, _, _ in _rows(b):
        N = ln.numel()
        neg = torch.exp(ln)
        imp = torch.exp(beta * ln)
        reweight = (imp * neg).sum() / imp.mean()
        pos = torch.exp(lp[0])
        ng = (reweight - N * tau_plus * torch.exp(lp).mean()) / (1 - tau_plus)
        ng = torch.maximum(ng, _neg_floor(b, i, ln, tau_plus))
        out.append(-torch.log(pos / (pos + ng)))
    return torch.stack(out)


def ref_pucl(b, alpha, c):
    out = []
    for i, lp, ln, _, _ in _rows(b):
        N = ln.numel()
        mu = (1 - alpha * c) / (1 - alpha) * torch.exp(ln).mean() - alpha * (1 - c) / (1 - alpha) * torch.exp(lp).mean()
        mu = torch.maximum(mu, _neg_floor(b, i, ln, alpha * (1 - c) / (1 - alpha * c)) / N)
        pos = torch.exp(lp[0])
        out.append(-torch.log(pos / (pos + N * mu)))
    return torch.stack(out)


def ref_bcl_weights(scores, tau_plus, alpha, beta):
    """eq. 18 (explicit pairwise eCDF), eq. 21 (plain quadratic root), eq. 20."""
    tm = 1 - tau_plus
    phi_un = torch.stack([(scores <= s).double().mean() for s in scores])
    a = (1 - 2 * alpha) * (tm - tau_plus)
    bb = 2 * (alpha * tm + (1 - alpha) * tau_plus)
    phi = phi_un / bb if a == 0 else (-bb + torch.sqrt(bb * bb + 4 * a * phi_un)) / (2 * a)
    Z = (1 - beta) * alpha + beta * (1 - alpha)
    num = (1 - beta) * alpha + (beta - alpha) * phi
    den = alpha * tm + (1 - alpha) * tau_plus + (1 - 2 * alpha) * phi * (tm - tau_plus)
    return num / (Z * den)


def ref_bcl(b, tau_plus, alpha, beta):
    out = []
    for _, lp, ln, _, _ in _rows(b):
        w = ref_bcl_weights(torch.exp(ln), tau_plus, alpha, beta)
        pos = torch.exp(lp[0])
        out.append(-torch.log(pos / (pos + (w * torch.exp(ln)).sum())))
    return torch.stack(out)


def ref_debiased_pos(b, tau_plus, aggregation="outer", self_logit=None):
    tm = 1 - tau_plus
    out = []
    for _, lp, ln, _, _ in _rows(b):
        N = ln.numel()
        h = torch.exp(ln)
        h_self = math.exp(1 / b.temperature if self_logit is None else self_logit)
        p_minus = h.mean()

        def one(hv, h=h, h_self=h_self, N=N, p_minus=p_minus):
            p = (h.sum() + hv + h_self) / (N + 2)
            return -torch.log((p - tm * p_minus) / (p + (N * tau_plus - tm) * p_minus))

        if aggregation == "outer":
            out.append(torch.stack([one(torch.exp(v)) for v in lp]).mean())
        else:
            out.append(one(torch.exp(lp).mean()))
    return torch.stack(out)


def ref_supcon(b, aggregation="out"):
    out = []
    for _, lp, ln, nl, al in _rows(b):
        allv = torch.cat([lp, ln])
        denom = torch.exp(allv).sum()
        same = (nl == al) if al >= 0 else torch.zeros_like(nl, dtype=torch.bool)
        positives = torch.cat([lp, ln[same]])
        probs = torch.exp(positives) / denom
        out.append(-torch.log(probs).mean() if aggregation == "out" else -torch.log(probs.mean()))
    return torch.stack(out)


def ref_punce(b, prior):
    out = []
    for _, lp, ln, nl, al in _rows(b):
        allv = torch.cat([lp, ln])
        nll = -(allv - torch.log(torch.exp(allv).sum()))  # ℓ_ij for every other view
        M = lp.numel()
        aug = nll[:M]
        labeled = torch.cat([aug, nll[M:][nl == 1]])  # P \ {i} (labeled anchor) or P ∪ {a(i)} (unlabeled)
        if al == 1:
            out.append(labeled.mean())
        else:
            out.append(prior * labeled.mean() + (1 - prior) * aug.mean())
    return torch.stack(out)


def ref_unbiased(b, fill_to_n=True):
    out = []
    for _, lp, ln, nl, al in _rows(b):
        N = ln.numel()
        true_neg = ~(nl == al) if al >= 0 else torch.ones_like(nl, dtype=torch.bool)
        h = torch.exp(ln[true_neg])
        if h.numel() == 0:
            ng = torch.zeros((), dtype=ln.dtype)
        elif fill_to_n:
            ng = N * h.mean()
        else:
            ng = h.sum()
        pos = torch.exp(lp[0])
        out.append(-torch.log(pos / (pos + ng)))
    return torch.stack(out)


@pytest.fixture
def ref() -> SimpleNamespace:
    """The reference implementations and batch builders."""
    return SimpleNamespace(
        infonce=ref_infonce, dcl=ref_dcl, hcl=ref_hcl, pucl=ref_pucl, bcl=ref_bcl, bcl_weights=ref_bcl_weights,
        debiased_pos=ref_debiased_pos, supcon=ref_supcon, punce=ref_punce, unbiased=ref_unbiased,
        two_view_batch=two_view_batch, multi_view_batch=multi_view_batch, masked_batch=masked_batch,
        random_views=random_views, class_labels=class_labels, pu_labels=pu_labels,
    )
