"""The train/test split of the ``recsys`` plugin: a seeded 4:1 split of every user's items.

BCL Appendix D divides each dataset into training and test sets "with a 4:1 ratio" (Table 9: 80k/20k for
MovieLens-100k) without saying more; we split **per user**, as LightGCN-style collaborative-filtering setups do,
so that every user is both trained on and evaluated:

* user ``u`` with ``n_u`` items puts ``min(round(f·n_u), n_u − 1)`` of them, chosen at random, in the test set
  (``f = data.test_fraction``, default 0.2); a user with one item is training-only, and has no test items;
* the random choice is a seeded permutation (``data.split_seed``), so the split is the same on every machine
  and for every run seed unless asked otherwise;
* **cold items**: a test interaction whose item has no training interaction is dropped (a collaborative model
  has never seen the item, so it cannot rank it); the count is recorded as ``dropped_cold_items``. Users are
  never cold (every user keeps ≥ 1 training item). A split with no test interaction left is an error.

Both parts are stored sorted by (user, item) with CSR row pointers, so the items of a contiguous user range are
one contiguous slice (what the batched evaluation needs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from contrastlab.platform.errors import ConfigError
from contrastlab.plugins.recsys.data import Interactions


@dataclass(frozen=True)
class Part:
    """One side of the split: (user, item) pairs sorted by user then item, with CSR row pointers."""

    users: Tensor
    """``[n]`` long user index."""
    items: Tensor
    """``[n]`` long item index."""
    indptr: Tensor
    """``[U + 1]`` long: the pairs of user ``u`` are ``indptr[u]:indptr[u+1]``."""

    def __len__(self) -> int:
        return int(self.users.numel())

    def keys(self, num_items: int) -> Tensor:
        """``[n]`` sorted long keys ``user · num_items + item`` (for membership tests with ``searchsorted``)."""
        return self.users * num_items + self.items


def make_part(users: Tensor, items: Tensor, num_users: int, num_items: int) -> Part:
    """Sort the pairs by (user, item) and build the CSR pointers."""
    order = torch.argsort(users * num_items + items)
    users, items = users[order], items[order]
    counts = torch.bincount(users, minlength=num_users)
    indptr = torch.zeros(num_users + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(counts, 0)
    return Part(users.contiguous(), items.contiguous(), indptr)


@dataclass(frozen=True)
class Split:
    """Training and test interactions of one dataset."""

    train: Part
    """Training interactions (the only ones the model, the graph and the negatives' mask ever see)."""
    test: Part
    """Held-out interactions (evaluation only)."""
    num_users: int
    """Users (rows of the score matrix)."""
    num_items: int
    """Items (columns of the score matrix)."""
    dropped_cold_items: int
    """Test interactions dropped because their item has no training interaction."""
    name: str
    """The dataset it came from."""

    @property
    def train_density(self) -> float:
        """``#training interactions / (#users × #items)``."""
        return len(self.train) / float(self.num_users * self.num_items)

    def summary(self) -> dict[str, Any]:
        """Counts for ``summary.json``."""
        test_users = int((self.test.indptr[1:] > self.test.indptr[:-1]).sum())
        return {"dataset": self.name, "users": self.num_users, "items": self.num_items,
                "train_interactions": len(self.train), "test_interactions": len(self.test),
                "test_users": test_users, "dropped_cold_items": self.dropped_cold_items}


def split_per_user(data: Interactions, test_fraction: float = 0.2, seed: int = 0) -> Split:
    """Seeded per-user split: ``round(f · n_u)`` test items per user (at most ``n_u − 1``); see the module doc."""
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"data.test_fraction={test_fraction} must be in (0, 1) (BCL: 0.2, a 4:1 split)")
    n = len(data)
    g = torch.Generator().manual_seed(int(seed))
    shuffled = torch.randperm(n, generator=g)
    # stable sort by user of a random permutation: each user's interactions end up in random order
    by_user = shuffled[torch.sort(data.users[shuffled], stable=True).indices]
    users = data.users[by_user]
    counts = torch.bincount(users, minlength=data.num_users)  # [U]
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(n) - starts[users]  # position of each interaction within its user's random order
    n_test = torch.minimum(torch.round(counts.double() * test_fraction).long(), (counts - 1).clamp_min(0))
    is_test = rank < n_test[users]
    tr_u, tr_i = users[~is_test], data.items[by_user][~is_test]
    te_u, te_i = users[is_test], data.items[by_user][is_test]
    seen = torch.zeros(data.num_items, dtype=torch.bool)
    seen[tr_i] = True
    warm = seen[te_i]
    dropped = int((~warm).sum())
    te_u, te_i = te_u[warm], te_i[warm]
    if te_u.numel() == 0:
        raise ConfigError(f"{data.name}: the split left no test interactions ({n} interactions, "
                          f"{data.num_users} users); use more data or a larger data.test_fraction")
    return Split(make_part(tr_u, tr_i, data.num_users, data.num_items),
                 make_part(te_u, te_i, data.num_users, data.num_items),
                 data.num_users, data.num_items, dropped, data.name)
