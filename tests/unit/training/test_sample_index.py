"""The sample index: built once on disk, it holds the global window order and its shifts, equal
to the in-memory definition; a larger build starts with the same windows; a run refuses an index
of other data, another seed or too few positions."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from lmforge.pipeline.training.data.sample_index import (
    ORDER,
    SampleIndex,
    build_for_data,
    build_sample_index,
    epochs_for,
    open_for_run,
)
from lmforge.pipeline.training.data.sampler import GlobalWindowOrder, WindowSampler
from lmforge.tokenizer.dataset import TokenDataset
from lmforge.tokenizer.shards import TokenShardWriter
from lmforge.tokenizer.split_index import index_committed_shards


def build(path, n_windows=37, seed=5, max_offset=7, epochs=3) -> SampleIndex:
    build_sample_index(
        path,
        n_windows=n_windows,
        seed=seed,
        max_offset=max_offset,
        epochs=epochs,
        block_size=8,
        data_fingerprint="data",
    )
    return SampleIndex(path)


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(1)
    for k in range(3):
        with TokenShardWriter(tmp_path / "data", "train", k, vocab_size=300) as writer:
            writer.write_documents([rng.integers(1, 300, 30).tolist() for _ in range(4)])
    index_committed_shards(tmp_path / "data", "train")
    return TokenDataset(tmp_path / "data", "train", block_size=8, max_offset=7)


def test_the_index_holds_the_order_and_shifts_that_the_seed_defines(tmp_path):
    index = build(tmp_path)
    reference = GlobalWindowOrder(37, seed=5, max_offset=7)
    np.testing.assert_array_equal(index.windows(0, 111), reference.windows(0, 111))
    np.testing.assert_array_equal(index.offsets(0, 111), reference.offsets(0, 111))
    np.testing.assert_array_equal(index.windows(30, 20), reference.windows(30, 20))
    assert (tmp_path / ORDER).stat().st_size == 111 * 4  # uint32 per position


def test_a_larger_build_starts_with_the_same_windows(tmp_path):
    build(tmp_path / "short", epochs=2)
    build(tmp_path / "long", epochs=5)
    short = (tmp_path / "short" / ORDER).read_bytes()
    assert (tmp_path / "long" / ORDER).read_bytes()[: len(short)] == short


def test_reading_past_the_covered_positions_says_to_rebuild(tmp_path):
    index = build(tmp_path, epochs=2)
    assert index.positions == 74
    with pytest.raises(IndexError, match="past the 74 .* rebuild"):
        index.windows(70, 8)


def test_every_world_size_reads_the_same_windows_from_the_index(tmp_path):
    index = build(tmp_path, n_windows=50, epochs=4)

    def steps(world):
        samplers = [WindowSampler(index, 8, 2, r, world) for r in range(world)]
        return [
            np.concatenate([mb.windows for s in samplers for mb in s.next_step()])
            for _ in range(20)
        ]

    for a, b in zip(steps(1), steps(4), strict=True):
        np.testing.assert_array_equal(a, b)


def test_copies_share_the_map_and_pickles_reopen_it(tmp_path):
    index = build(tmp_path)
    assert copy.deepcopy(index) is index  # the read-ahead thread's sampler copy reads no data
    clone = pickle.loads(pickle.dumps(index))
    assert len(pickle.dumps(index)) < 500
    np.testing.assert_array_equal(clone.windows(0, 37), index.windows(0, 37))


def test_a_run_opens_the_index_of_its_data_seed_and_steps(tmp_path, dataset):
    assert len(dataset) == 42  # three shards of 120 tokens, (120 - 7 - 1) // 8 windows each
    settings = {"block_size": 8, "seed": 3, "epoch_offsets": True}
    build_for_data(tmp_path / "index", dataset.directory, **settings, positions=100)
    index = open_for_run(tmp_path / "index", dataset, seed=3, positions=99)
    assert index.epochs == epochs_for(100, 42) == 3
    with pytest.raises(ValueError, match="seed"):
        open_for_run(tmp_path / "index", dataset, seed=4, positions=99)
    with pytest.raises(ValueError, match="covers 126 positions .* reads 200"):
        open_for_run(tmp_path / "index", dataset, seed=3, positions=200)
    other = TokenDataset(dataset.directory, "train", block_size=8, max_offset=0)
    with pytest.raises(ValueError, match="other data or settings"):
        open_for_run(tmp_path / "index", other, seed=3, positions=10)


def test_a_missing_or_truncated_index_names_the_stage_to_rerun(tmp_path):
    with pytest.raises(FileNotFoundError, match="sample_index stage"):
        SampleIndex(tmp_path)
    build(tmp_path)
    order = tmp_path / ORDER
    order.write_bytes(order.read_bytes()[:-4])
    with pytest.raises(ValueError, match="rerun the sample_index stage"):
        SampleIndex(tmp_path)


def test_data_without_a_window_is_refused_naming_block_size(tmp_path):
    with pytest.raises(ValueError, match="block_size"):
        build(tmp_path, n_windows=0)
