"""The global window order: the same windows per step whatever the world size, exact resume,
and every epoch after the first read at a new shift."""

from __future__ import annotations

import numpy as np
import pytest

from lmforge.pipeline.training.data.sampler import (
    GlobalWindowOrder,
    MicroBatch,
    WindowSampler,
    load_batch,
)
from lmforge.tokenizer.dataset import TokenDataset
from lmforge.tokenizer.shards import TokenShardWriter
from lmforge.tokenizer.split_index import index_committed_shards


def _steps(n_windows, seed, world, steps, *, global_batch=8, micro=2, position=0, offset=7):
    """Per step, (window, shift) of all ranks in rank order (micro-batches in order)."""
    samplers = [
        WindowSampler(
            GlobalWindowOrder(n_windows, seed, offset), global_batch, micro, r, world, position
        )
        for r in range(world)
    ]
    out = []
    for _ in range(steps):
        batches = [mb for s in samplers for mb in s.next_step()]
        out.append(
            np.stack(
                [
                    np.concatenate([b.windows for b in batches]),
                    np.concatenate([b.offsets for b in batches]),
                ]
            )
        )
    return out


def test_every_world_size_reads_the_same_windows_at_every_step():
    one = _steps(50, seed=3, world=1, steps=20)
    for world in (2, 4):
        other = _steps(50, seed=3, world=world, steps=20)
        for a, b in zip(one, other, strict=True):
            np.testing.assert_array_equal(a, b)


def test_a_worker_reads_a_contiguous_share_of_the_global_batch():
    order = GlobalWindowOrder(40, seed=0)
    rank1 = WindowSampler(order, 8, 2, rank=1, world_size=2).next_step()
    np.testing.assert_array_equal(np.concatenate([m.windows for m in rank1]), order.windows(4, 4))
    assert [len(m.windows) for m in rank1] == [2, 2]


def test_resuming_at_the_saved_position_reads_the_batches_of_the_uninterrupted_run():
    uninterrupted = _steps(30, seed=9, world=2, steps=12)
    first = WindowSampler(GlobalWindowOrder(30, 9), 8, 2, rank=0, world_size=2)
    for _ in range(5):
        first.next_step()
    resumed = _steps(30, seed=9, world=1, steps=7, position=first.position)
    for a, b in zip(uninterrupted[5:], resumed, strict=True):
        np.testing.assert_array_equal(a, b)


def test_each_epoch_visits_every_window_once_in_a_new_order():
    order = GlobalWindowOrder(17, seed=1)
    two_epochs = order.windows(0, 34)
    assert sorted(two_epochs[:17]) == list(range(17))
    assert sorted(two_epochs[17:]) == list(range(17))
    assert not np.array_equal(two_epochs[:17], two_epochs[17:])


def test_the_first_epoch_is_read_unshifted_and_each_later_one_at_its_own_shift():
    order = GlobalWindowOrder(10, seed=4, max_offset=63)
    offsets = order.offsets(0, 10 * 8).reshape(8, 10)
    assert (offsets[0] == 0).all()
    assert all(len(set(epoch)) == 1 for epoch in offsets), "one shift per epoch"
    shifts = offsets[1:, 0]
    assert ((shifts >= 0) & (shifts <= 63)).all() and len(set(shifts)) > 1
    np.testing.assert_array_equal(
        offsets, GlobalWindowOrder(10, 4, 63).offsets(0, 80).reshape(8, 10)
    )
    assert not GlobalWindowOrder(10, 4, max_offset=0).offsets(0, 80).any()


def test_a_step_across_an_epoch_end_reads_each_window_at_its_epoch_shift():
    order = GlobalWindowOrder(5, seed=2, max_offset=31)
    [batch] = WindowSampler(order, 4, 4, rank=0, world_size=1, position=3).next_step()
    assert batch.offsets.tolist() == [0, 0, order.offset(1), order.offset(1)]


def test_the_order_depends_on_the_seed():
    assert not np.array_equal(
        GlobalWindowOrder(100, 1).windows(0, 100), GlobalWindowOrder(100, 2).windows(0, 100)
    )
    np.testing.assert_array_equal(
        GlobalWindowOrder(100, 1).windows(10, 50), GlobalWindowOrder(100, 1).windows(10, 50)
    )


def test_a_global_batch_that_does_not_split_into_micro_batches_is_rejected():
    with pytest.raises(ValueError, match="does not split"):
        WindowSampler(GlobalWindowOrder(10, 0), 6, 2, rank=0, world_size=2)
    with pytest.raises(ValueError, match="rank"):
        WindowSampler(GlobalWindowOrder(10, 0), 4, 2, rank=2, world_size=2)


def test_data_without_a_single_window_is_an_error_that_says_what_to_do():
    with pytest.raises(ValueError, match="block_size"):
        GlobalWindowOrder(0, seed=0)


def test_a_batch_predicts_each_token_from_the_ones_before_it_at_its_shift(tmp_path):
    with TokenShardWriter(tmp_path, "train", 0, vocab_size=100) as writer:
        writer.write_documents([list(range(20))])
    index_committed_shards(tmp_path, "train")
    dataset = TokenDataset(tmp_path, "train", block_size=3, max_offset=2)
    assert len(dataset) == 5  # (20 - 2 spare - 1) // 3: every window also fits shifted by 2
    x, y = load_batch(dataset, MicroBatch(np.array([4, 1]), np.array([0, 2])))
    assert x.tolist() == [[12, 13, 14], [5, 6, 7]]
    assert y.tolist() == [[13, 14, 15], [6, 7, 8]]
    assert dataset.window_at(4, 2).tolist() == [14, 15, 16, 17]
    with pytest.raises(IndexError):
        dataset.window_at(0, 3)
