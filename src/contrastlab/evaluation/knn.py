"""Weighted k-nearest-neighbour classifier on normalised features (the SimCLR/DCL training monitor).

Following Wu et al. (2018, instance discrimination), used by DCL/HCL's code with k = 200 and t = 0.1: the
``k`` training features with the largest cosine similarity ``s`` to a query vote for their class with weight
``exp(s / t)``; the prediction is the class with the largest total weight.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


@torch.no_grad()
def knn_predict(
    train_feats: Tensor,
    train_labels: Tensor,
    test_feats: Tensor,
    num_classes: int,
    k: int = 200,
    temperature: float = 0.1,
    chunk: int = 1024,
) -> Tensor:
    """Class scores ``[Q, num_classes]`` for ``test_feats`` ``[Q, d]`` against the bank ``train_feats`` ``[N, d]``.

    ``train_labels`` ``[N]`` are class ids; entries ``< 0`` (unlabeled) are ignored, and a bank without any other
    is a ``ValueError``. Each of the ``k`` nearest neighbours votes ``e^{s/t}`` for its class (Wu et al. 2018),
    scaled per query by the nearest one's ``e^{-s_1/t}`` so that no temperature overflows float32; the scaling does
    not change any query's ranking of the classes.
    """
    keep = train_labels >= 0
    if not bool(keep.any()):
        raise ValueError("the kNN bank has no labelled feature (every label < 0): nothing can vote")
    bank = F.normalize(train_feats[keep].float(), dim=1)                          # [N, d]
    bank_labels = train_labels[keep].long().to(bank.device)
    k = min(k, bank.shape[0])
    scores = []
    for start in range(0, test_feats.shape[0], chunk):
        q = F.normalize(test_feats[start:start + chunk].float().to(bank.device), dim=1)  # [q, d]
        sim, idx = (q @ bank.T).topk(k, dim=1)                                     # [q, k]
        weight = ((sim - sim[:, :1]) / temperature).exp()  # ÷ the nearest's e^{s/t}: no overflow at small t
        votes = torch.zeros(q.shape[0], num_classes, device=bank.device)
        votes.scatter_add_(1, bank_labels[idx], weight)                            # [q, C]
        scores.append(votes)
    return torch.cat(scores)


def knn_accuracy(
    train_feats: Tensor,
    train_labels: Tensor,
    test_feats: Tensor,
    test_labels: Tensor,
    num_classes: int,
    k: int = 200,
    temperature: float = 0.1,
) -> float:
    """Top-1 accuracy (fraction in ``[0, 1]``) of :func:`knn_predict` on ``test_labels``."""
    pred = knn_predict(train_feats, train_labels, test_feats, num_classes, k, temperature).argmax(1)
    return float((pred.cpu() == test_labels.cpu()).float().mean())
