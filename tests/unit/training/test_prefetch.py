"""Read-ahead: the prefetched steps are the synchronous ones, in order, each with the sampler
position a checkpoint must save; a read that fails surfaces in the training loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmforge.pipeline.training.data.prefetch import BatchPrefetcher
from lmforge.pipeline.training.data.sampler import GlobalWindowOrder, WindowSampler, load_batch
from lmforge.tokenizer.dataset import TokenDataset
from lmforge.tokenizer.shards import TokenShardWriter
from lmforge.tokenizer.split_index import index_committed_shards


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(0)
    with TokenShardWriter(tmp_path, "train", 0, vocab_size=500) as writer:
        writer.write_documents([rng.integers(1, 500, 40).tolist() for _ in range(30)])
    index_committed_shards(tmp_path, "train")
    return TokenDataset(tmp_path, "train", block_size=8, max_offset=7)


def sampler(dataset, rank=0, world=2, position=0) -> WindowSampler:
    order = GlobalWindowOrder(len(dataset), seed=4, max_offset=7)
    return WindowSampler(order, 8, 2, rank, world, position=position)


@pytest.mark.parametrize("rank", [0, 1])
def test_prefetched_steps_equal_synchronous_reads_with_the_position_after_each(dataset, rank):
    plain = sampler(dataset, rank, position=24)
    ahead = BatchPrefetcher(dataset, sampler(dataset, rank, position=24), depth=3)
    try:
        for _ in range(3 * len(dataset) // 8):  # several epochs, shifted windows included
            expected = [load_batch(dataset, mb) for mb in plain.next_step()]
            got = ahead.next_step()
            assert got.position == plain.position
            for (x, y), (gx, gy) in zip(expected, got.batches, strict=True):
                assert torch.equal(x, gx) and torch.equal(y, gy)
    finally:
        ahead.close()


def test_the_sampler_handed_over_is_not_advanced(dataset):
    mine = sampler(dataset)
    ahead = BatchPrefetcher(dataset, mine, depth=2)
    ahead.next_step()
    ahead.close()
    assert mine.position == 0


def test_a_failed_read_is_raised_by_next_step(dataset):
    class Broken:
        def window_at(self, i, offset):
            raise OSError("disk gone")

    ahead = BatchPrefetcher(Broken(), sampler(dataset), depth=1)
    with pytest.raises(OSError, match="disk gone"):
        ahead.next_step()
    ahead.close()


def test_the_thread_stops_after_the_steps_it_was_given(dataset):
    class Counting:
        reads = 0

        def window_at(self, i, offset):
            Counting.reads += 1
            return dataset.window_at(i, offset)

    ahead = BatchPrefetcher(Counting(), sampler(dataset), depth=4, steps=2)
    ahead.next_step(), ahead.next_step()
    ahead.close()
    assert Counting.reads == 2 * 4  # two steps of this rank's 4 windows, none past them
