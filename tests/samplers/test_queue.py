"""``queue`` (MoCo's FIFO) built by hand: on rank ``r`` of a world, the sizes at the edges, a change of key size."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import contrastlab as cl
from contrastlab.samplers import queue


def _unit(x):
    return F.normalize(x, dim=-1)


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_r_of_a_world_of_2_enqueues_every_ranks_keys(fake_world, rank):
    """MoCo: every rank enqueues the keys (and labels) of all ranks, in rank order; the negatives of the next call
    are those ``W·B`` keys, the rest of the queue masked."""
    W, B, d, t = 2, 2, 3, 0.5
    gen = torch.Generator().manual_seed(rank)
    q1, k1, q2, k2 = torch.randn(4, W * B, d, generator=gen, dtype=torch.float64)
    labels = torch.tensor([1, -1, 0, 1])
    shard = [slice(i * B, (i + 1) * B) for i in range(W)]
    s = cl.make_sampler("queue", size=9, temperature=t).double()
    local = shard[rank]
    fake_world(queue, rank, W, {"k": [_unit(k1[sl]) for sl in shard]}, [labels[sl] for sl in shard])
    first = s(q1[local], k1[local], labels=labels[local])
    assert first.neg_logits.shape == (B, 0) and first.meta["world_size"] == W and first.meta["rank"] == rank
    assert first.neg_labels.shape == (B, 0)  # as many label columns as negatives
    torch.testing.assert_close(first.pos_logits[:, 0], (_unit(q1[local]) * _unit(k1[local])).sum(1) / t)
    fake_world(queue, rank, W, {"k": [_unit(k2[sl]) for sl in shard]}, [labels[sl] for sl in shard])
    second = s(q2[local], k2[local], labels=labels[local])
    assert second.neg_logits.shape == (B, 9) and second.num_negatives().tolist() == [W * B] * B
    assert second.bounded and second.temperature == t and second.meta["queue_filled"] == W * B
    assert second.neg_mask[:, : W * B].all() and not second.neg_mask[:, W * B :].any()
    torch.testing.assert_close(second.neg_logits[:, : W * B], _unit(q2[local]) @ _unit(k1).T / t)
    assert second.neg_labels[:, : W * B].tolist() == [labels.tolist()] * B
    assert int(s.filled) == 2 * W * B and int(s.ptr) == 2 * W * B
    torch.testing.assert_close(s.keys[: 2 * W * B], torch.cat([_unit(k1), _unit(k2)]))


def test_a_queue_of_one_key_holds_the_newest():
    s = cl.make_sampler("queue", size=1, temperature=0.5)
    assert s.key_labels.tolist() == [-1] and int(s.filled) == 0  # a new queue: one empty, unlabeled slot
    z = torch.randn(4, 3, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    s(z[0], z[1], labels=torch.tensor([4, 5, 6]))
    assert int(s.filled) == 1 and int(s.ptr) == 0 and s.key_labels.tolist() == [6]
    b = s(z[2], z[3])
    assert b.neg_mask is None and b.neg_logits.shape == (3, 1)
    torch.testing.assert_close(b.neg_logits[:, 0], _unit(z[2]) @ _unit(z[1][2]) / 0.5)


def test_a_batch_larger_than_the_queue_keeps_its_newest_keys_in_order():
    s = cl.make_sampler("queue", size=3, temperature=1.0)
    z = torch.randn(5, 4, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    s(z[0][:2], z[1][:2], labels=torch.tensor([0, 1]))  # slots 0, 1; ptr 2
    s(z[2], z[3], labels=torch.tensor([2, 3, 4, 5]))  # 4 keys > 3: keeps keys 1..3 at slots 2, 0, 1
    assert s.key_labels.tolist() == [4, 5, 3] and int(s.ptr) == 2 and int(s.filled) == 3
    torch.testing.assert_close(s.keys, _unit(z[3])[[2, 3, 1]])


def test_a_new_key_size_or_dtype_restarts_the_queue():
    s = cl.make_sampler("queue", size=6, temperature=0.5)
    gen = torch.Generator().manual_seed(2)
    s(torch.randn(2, 4, generator=gen), torch.randn(2, 4, generator=gen))
    s(torch.randn(2, 4, generator=gen), torch.randn(2, 4, generator=gen))
    assert int(s.filled) == 4
    for d, dtype in ((3, torch.float32), (3, torch.float64)):
        q, k = torch.randn(2, 2, d, generator=gen, dtype=dtype)
        assert s(q, k).neg_logits.shape == (2, 0)  # the stored keys cannot be compared with these queries
        assert int(s.filled) == 2 and int(s.ptr) == 2 and s.keys.shape == (6, d) and s.keys.dtype == dtype
        b = s(q, k)
        assert b.num_negatives().tolist() == [2, 2]
        torch.testing.assert_close(b.neg_logits[:, :2], _unit(q) @ _unit(k).T / 0.5)


def test_a_restored_queue_keeps_its_fill_and_position():
    s = cl.make_sampler("queue", size=5, temperature=0.5)
    z = torch.randn(3, 3, 2, generator=torch.Generator().manual_seed(3))
    s(z[0], z[1])
    fresh = cl.make_sampler("queue", size=5, temperature=0.5)
    fresh.load_state_dict(s.state_dict())
    b = fresh(z[2], z[2])
    assert b.num_negatives().tolist() == [3, 3, 3]  # 3 filled slots, not an empty (or full) queue
    fresh(z[2], z[2])
    assert int(fresh.filled) == 5 and int(fresh.ptr) == 4


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_size_must_be_a_positive_integer(size):
    with pytest.raises(cl.ConfigError, match="size"):
        cl.make_sampler("queue", size=size)


def test_gather_distributed_false_enqueues_the_local_keys_only(fake_world):
    B = 2
    fake_world(queue, 1, 2, {"k": [torch.randn(B, 3), None]}, [torch.tensor([7, 8]), None])
    q, k = torch.randn(2, B, 3, generator=torch.Generator().manual_seed(6))
    labels = torch.tensor([1, 2])
    gathered = cl.make_sampler("queue", size=8)
    assert gathered(q, k, labels=labels).meta["world_size"] == 2 and int(gathered.filled) == 2 * B  # the default
    assert gathered.key_labels[: 2 * B].tolist() == [7, 8, 1, 2]
    local = cl.make_sampler("queue", size=8, gather_distributed=False)
    batch = local(q, k, labels=labels)
    assert batch.meta["world_size"] == 1 and batch.meta["rank"] == 0 and int(local.filled) == B
    assert local.key_labels[:B].tolist() == [1, 2]


def test_a_partial_state_dict_leaves_the_queue_as_it_is():
    s = cl.make_sampler("queue", size=4)
    s(torch.randn(2, 3), torch.randn(2, 3))
    keys = s.keys.clone()
    missing = s.load_state_dict({}, strict=False).missing_keys
    assert set(missing) == {"keys", "key_labels", "ptr", "filled"} and torch.equal(s.keys, keys)
