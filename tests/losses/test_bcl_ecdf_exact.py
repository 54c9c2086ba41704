"""BCL's eCDF (eq. 18) is exactly the ``≤``-count of a brute-force O(N²) comparison, ties and all paths included."""

from __future__ import annotations

import importlib

import pytest
import torch

import contrastlab as cl
from contrastlab.losses.batch import ContrastiveBatch
from contrastlab.losses.bcl import bcl_weights, ecdf

bcl_mod = importlib.import_module("contrastlab.losses.bcl")  # the package re-exports a function `bcl`


def _brute(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``#{valid k : x_k ≤ x_j} / N_valid`` by an ``[A, N, N]`` comparison (float64 for the division)."""
    le = x[:, None, :] <= x[:, :, None]  # [A, j, k]
    if mask is not None:
        le &= mask[:, None, :]
        n = mask.sum(1, keepdim=True).clamp_min(1)
    else:
        n = torch.full((x.shape[0], 1), max(x.shape[1], 1))
    return (le.sum(-1).double() / n).clamp(max=1.0)


def _tied(A: int, N: int, levels: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-levels, levels + 1, (A, N), generator=g).float() / 7.0


CASES = {
    "continuous": lambda: torch.randn(37, 1022, generator=torch.Generator().manual_seed(1)),
    "many_ties": lambda: _tied(33, 300, 5, 2),  # ~11 distinct values per row: heavy ties → int64 fallback
    "some_ties": lambda: _tied(29, 513, 5000, 3),  # scattered ties and near-equal values in shared-prefix groups
    "close_values": lambda: 1.0 + torch.arange(64 * 200).float().reshape(64, 200)[:, torch.randperm(200)] * 1.2e-7,
    "single_column": lambda: torch.randn(5, 1),
    "two_columns_equal": lambda: torch.ones(4, 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ecdf_equals_brute_force(case):
    x = CASES[case]()
    want = _brute(x)
    torch.testing.assert_close(ecdf(x, None).double(), want, rtol=0, atol=1e-7)  # float32 fast path
    torch.testing.assert_close(ecdf(x.double(), None), want, rtol=0, atol=0)  # generic sort + searchsorted path


def test_ecdf_special_values_and_mask():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(21, 257, generator=g)
    x[:, 0], x[:, 1] = -0.0, 0.0  # signed zeros tie
    x[:, 2], x[:, 3] = float("inf"), -float("inf")
    x[:, 4] = x[:, 5] = x[:, 6]
    x[3:9, 10:20] = x[3:9, 20:21]  # a wide tie group in a few rows
    x[:, 30] = torch.nextafter(x[:, 31], torch.tensor(float("inf")))  # adjacent floats: same int32 prefix
    mask = torch.rand(21, 257, generator=g) > 0.3
    torch.testing.assert_close(ecdf(x, None).double(), _brute(x), rtol=0, atol=1e-7)
    got = ecdf(x, mask).double()  # masked columns' own entries are unused
    torch.testing.assert_close(got[mask], _brute(x, mask)[mask], rtol=0, atol=1e-7)


@pytest.mark.parametrize(("levels", "fallback"), [(3000, False), (20, True)])
def test_int32_and_int64_paths_give_brute_force_counts(monkeypatch, levels, fallback):
    """Scattered ties stay on the int32 prefix path, heavy ties fall back to int64 keys; both are exact."""
    x = _tied(40, 100, levels, 5)
    want = (x[:, None, :] <= x[:, :, None]).sum(-1).float()
    calls = []
    exact64 = bcl_mod._counts_le_exact64
    monkeypatch.setattr(bcl_mod, "_counts_le_exact64", lambda k: calls.append(1) or exact64(k))
    torch.testing.assert_close(bcl_mod._counts_le_numpy(x), want, rtol=0, atol=0)
    assert bool(calls) == fallback
    monkeypatch.setattr(bcl_mod, "_IDX_BITS_MAX", 0)  # force the int64 path everywhere
    torch.testing.assert_close(bcl_mod._counts_le_numpy(x), want, rtol=0, atol=0)
    assert calls


def test_log_weight_table_equals_elementwise_weights():
    """The unmasked count→log ω table gives the weights of eq. 20 applied elementwise to the eCDF."""
    x = _tied(16, 300, 40, 6)
    for hp in ((0.1, 0.9, 0.9), (0.5, 0.7, 1.0), (0.0, 1.0, 0.7), (0.3, 1.0, 1.0)):
        want = bcl_weights(ecdf(x, None), *hp).log().clamp_min(-1e30)
        torch.testing.assert_close(bcl_mod.log_bcl_weights(x, None, *hp), want, rtol=1e-6, atol=1e-6)


def test_bcl_loss_equals_explicit_weighted_sum_with_ties():
    """Loss value on a tied float32 batch = -log(e^{ℓ⁺} / (e^{ℓ⁺} + Σ ω e^{ℓ})) with brute-force ω."""
    x = _tied(12, 90, 6, 7)
    pos = torch.randn(12, 1, generator=torch.Generator().manual_seed(8))
    w = bcl_weights(_brute(x), 0.1, 0.9, 0.9)
    xd, pd = x.double(), pos.double()[:, 0]
    want = -(pd - torch.log(pd.exp() + (w * xd.exp()).sum(1)))
    got = cl.make_loss("bcl", reduction="none")(ContrastiveBatch(pos, x, temperature=0.5))
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)


def test_blocks_split_over_threads_give_brute_force_counts(monkeypatch):
    """Many row blocks, shared by the calling thread and the helper pool: still the exact counts."""
    x = _tied(50, 120, 2000, 9)
    x[7, :60] = 0.5  # one heavily tied block next to ordinary ones
    want = (x[:, None, :] <= x[:, :, None]).sum(-1).float()
    monkeypatch.setattr(bcl_mod, "_BLOCK", 4 * 120)  # 4 rows per block → 13 blocks
    monkeypatch.setattr(bcl_mod.torch, "get_num_threads", lambda: 3)
    torch.testing.assert_close(bcl_mod._counts_le_numpy(x), want, rtol=0, atol=0)
