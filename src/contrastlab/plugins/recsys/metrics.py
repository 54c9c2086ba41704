"""Top-K ranking metrics of the ``recsys`` plugin: Precision, Recall and NDCG at K (BCL Appendix D, Table 10).

For each user ``u`` with a non-empty test set ``T_u``, all items are ranked by score after the user's
*training* items are removed (set to −∞), and with ``h_r = 1`` when the item at rank ``r`` is in ``T_u``:

* ``Precision@K = (1/K) Σ_{r≤K} h_r``;
* ``Recall@K = (1/|T_u|) Σ_{r≤K} h_r``;
* ``NDCG@K = DCG/IDCG`` with ``DCG = Σ_{r≤K} h_r / log₂(r+1)`` and ``IDCG = Σ_{r≤min(|T_u|,K)} 1/log₂(r+1)``
  (binary relevance, the LightGCN/NGCF evaluation the BCL table follows).

Each metric is the mean over users with test items. Scores are computed on the run's device one **user batch**
at a time (``[b, I]``, never the whole ``[U, I]`` matrix), and only ``torch.topk`` of each row is kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.recsys.split import Split

DEFAULT_KS = (5, 10, 20)
"""Cut-offs of BCL Table 10."""
METRICS = ("precision", "recall", "ndcg")
"""Metric names; logged as ``eval/<metric>@<K>``."""


def metric_names(ks: Sequence[int] = DEFAULT_KS, prefix: str = "eval/") -> list[str]:
    """``eval/precision@5``, ``eval/recall@5``, ``eval/ndcg@5``, ... for every ``K``."""
    return [f"{prefix}{m}@{k}" for k in ks for m in METRICS]


def topk_hits_metrics(hits: Tensor, n_test: Tensor, ks: Sequence[int]) -> dict[str, Tensor]:
    """Per-user metrics from ``hits [b, Kmax]`` (1 where the rank-r item is a test item) and ``n_test [b]``.

    Returns ``{"precision@K": [b], "recall@K": [b], "ndcg@K": [b]}`` (users with ``n_test = 0`` give NaN recall
    and NDCG; the caller drops them).
    """
    kmax = hits.shape[1]
    discount = 1.0 / torch.log2(torch.arange(2, kmax + 2, device=hits.device, dtype=torch.float64))  # [Kmax]
    ideal = torch.cumsum(discount, 0)  # IDCG for min(|T_u|, K) = 1..Kmax
    hits = hits.double()
    n = n_test.double()
    out: dict[str, Tensor] = {}
    for k in ks:
        kk = min(k, kmax)
        h = hits[:, :kk]
        found = h.sum(dim=1)
        out[f"precision@{k}"] = found / k
        out[f"recall@{k}"] = found / n
        idcg = ideal[(n_test.clamp(min=1, max=kk) - 1).long()]
        out[f"ndcg@{k}"] = (h * discount[:kk]).sum(dim=1) / idcg
    return out


@torch.no_grad()
def ranking_metrics(score_users: Callable[[int, int], Tensor], split: Split, ks: Sequence[int] = DEFAULT_KS,
                    batch_users: int = 1024, device: torch.device | str = "cpu", prefix: str = "eval/"
                    ) -> dict[str, float]:
    """Mean Precision/Recall/NDCG@K over the users with test items.

    ``score_users(u0, u1)`` returns the ``[u1 − u0, I]`` scores of users ``u0..u1−1`` on ``device``. Training
    items are masked with −∞ before ``topk``; test membership is a dense ``[b, I]`` mask of the batch only.
    Non-finite scores (a diverged model) raise a one-line :class:`ConfigError` instead of random-looking metrics.
    """
    device = torch.device(device)
    kmax = min(max(ks), split.num_items)
    sums = {f"{m}@{k}": 0.0 for k in ks for m in METRICS}
    count = 0
    tr, te = split.train, split.test
    for u0 in range(0, split.num_users, batch_users):
        u1 = min(u0 + batch_users, split.num_users)
        a, b = int(te.indptr[u0]), int(te.indptr[u1])
        if a == b:
            continue  # no test items in this user range
        scores = score_users(u0, u1).float().clone()  # [b, I]
        if not bool(torch.isfinite(scores).all()):  # topk of nan scores is an arbitrary order: near-random metrics
            raise ConfigError("ranking got non-finite scores (the model diverged); lower train.lr or change the "
                              "loss's hyperparameters")
        s, e = int(tr.indptr[u0]), int(tr.indptr[u1])
        scores[(tr.users[s:e] - u0).to(device), tr.items[s:e].to(device)] = -math.inf
        truth = torch.zeros(u1 - u0, split.num_items, dtype=torch.bool, device=device)
        truth[(te.users[a:b] - u0).to(device), te.items[a:b].to(device)] = True
        n_test = truth.sum(dim=1)  # [b]
        top = scores.topk(kmax, dim=1).indices  # [b, Kmax]
        per_user = topk_hits_metrics(truth.gather(1, top), n_test, ks)
        has = n_test > 0
        count += int(has.sum())
        for key, values in per_user.items():
            sums[key] += float(values[has].sum())
    if count == 0:
        return {f"{prefix}{key}": float("nan") for key in sums}
    return {f"{prefix}{key}": value / count for key, value in sums.items()}


def matrix_scorer(scores: Tensor) -> Callable[[int, int], Tensor]:
    """A ``score_users`` callback reading rows of a precomputed ``[U, I]`` score matrix (tests, baselines)."""
    return lambda u0, u1: scores[u0:u1]


def popularity_scorer(split: Split, device: torch.device | str = "cpu") -> Callable[[int, int], Tensor]:
    """The most-popular baseline: every user gets the items' training interaction counts as scores."""
    counts = torch.bincount(split.train.items, minlength=split.num_items).float().to(device)
    return lambda u0, u1: counts[None, :].expand(u1 - u0, -1)
