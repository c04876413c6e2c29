"""The global window order: the same windows per step whatever the world size, exact resume."""

from __future__ import annotations

import numpy as np
import pytest

from lmforge.pipeline.training.sampler import GlobalWindowOrder, WindowSampler, load_batch


def _steps(n_windows, seed, world, steps, *, global_batch=8, micro=2, position=0):
    """Per step, the windows of all ranks in rank order (each rank's micro-batches in order)."""
    samplers = [
        WindowSampler(
            GlobalWindowOrder(n_windows, seed), global_batch, micro, r, world, position=position
        )
        for r in range(world)
    ]
    out = []
    for _ in range(steps):
        out.append(np.concatenate([np.concatenate(s.next_step()) for s in samplers]))
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
    np.testing.assert_array_equal(np.concatenate(rank1), order.windows(4, 4))
    assert [len(m) for m in rank1] == [2, 2]


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


def test_a_batch_predicts_each_token_from_the_ones_before_it():
    windows = {3: np.array([1, 2, 3, 4]), 7: np.array([5, 6, 7, 8])}
    x, y = load_batch(windows, np.array([7, 3]))
    assert x.tolist() == [[5, 6, 7], [1, 2, 3]]
    assert y.tolist() == [[6, 7, 8], [2, 3, 4]]
