"""Token shards: dtype by vocabulary, atomic commit, clear errors, memory-mapped windows read
through the split index with a bounded number of shards open."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from lmforge.tokenizer import (
    TokenDataset,
    TokenShardWriter,
    index_committed_shards,
    num_windows,
    read_shard,
    split_token_counts,
)

DOCS = [[0, 5, 6, 7], [0, 8], [0, 9, 10, 11, 12, 13], [0, 300, 301]]


def write_shard(out: Path, split: str, index: int, docs: list[list[int]], vocab: int = 1000):
    with TokenShardWriter(out, split, index, vocab) as writer:
        writer.write_documents(docs[:2])
        writer.write_documents(docs[2:])
    return writer.info


@pytest.mark.parametrize(("vocab", "itemsize"), [(4096, 2), (65536, 2), (70000, 4)])
def test_shard_stores_uint16_when_the_vocabulary_fits_else_uint32(
    tmp_path: Path, vocab: int, itemsize: int
) -> None:
    docs = [[0, 1, vocab - 1], [0, 2]]
    info = write_shard(tmp_path, "train", 0, docs, vocab=vocab)
    assert info.dtype == ("uint16" if itemsize == 2 else "uint32")
    assert (tmp_path / "train-00000.tokens.bin").stat().st_size == 5 * itemsize
    shard = read_shard(info.header)
    assert shard.tokens.tolist() == [0, 1, vocab - 1, 0, 2]


def test_chunks_written_in_several_calls_keep_document_offsets(tmp_path: Path) -> None:
    info = write_shard(tmp_path, "train", 0, DOCS)
    shard = read_shard(info.header)
    assert shard.tokens.tolist() == [t for d in DOCS for t in d]
    assert shard.doc_starts.tolist() == [0, 4, 6, 12]
    assert (info.n_tokens, info.n_docs) == (15, 4)


def test_a_writer_that_is_never_closed_leaves_no_visible_shard(tmp_path: Path) -> None:
    writer = TokenShardWriter(tmp_path, "train", 0, 1000)
    writer.write_documents(DOCS)
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []
    with pytest.raises(FileNotFoundError, match="no committed 'train' token shards"):
        TokenDataset(tmp_path, "train", block_size=4)
    writer.abort()
    assert list(tmp_path.iterdir()) == []


def test_an_exception_inside_the_writer_block_discards_the_shard(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), TokenShardWriter(tmp_path, "train", 0, 1000) as writer:
        writer.write_documents(DOCS)
        raise RuntimeError("worker died")
    assert list(tmp_path.iterdir()) == []


def test_an_id_outside_the_vocabulary_is_refused(tmp_path: Path) -> None:
    with (
        pytest.raises(ValueError, match="vocab_size 100"),
        TokenShardWriter(tmp_path, "train", 0, 100) as writer,
    ):
        writer.write_documents([[0, 150]])


def test_a_truncated_shard_raises_an_error_naming_the_file(tmp_path: Path) -> None:
    info = write_shard(tmp_path, "train", 0, DOCS)
    index_committed_shards(tmp_path, "train")
    tokens_file = tmp_path / "train-00000.tokens.bin"
    tokens_file.write_bytes(tokens_file.read_bytes()[:-3])
    with pytest.raises(ValueError, match=r"train-00000\.tokens\.bin.*truncated"):
        read_shard(info.header)
    with pytest.raises(ValueError, match="truncated"):
        TokenDataset(tmp_path, "train", block_size=4)[0]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("n_docs", 3, "document index does not match"), ("dtype", "uint32", "dtype uint32")],
)
def test_an_inconsistent_header_raises_an_error_naming_it(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    info = write_shard(tmp_path, "train", 0, DOCS)
    header = json.loads(info.header.read_text())
    header[field] = value
    info.header.write_text(json.dumps(header))
    with pytest.raises(ValueError, match=message):
        read_shard(info.header)


def test_a_corrupt_header_raises_an_error_naming_it(tmp_path: Path) -> None:
    info = write_shard(tmp_path, "train", 0, DOCS)
    info.header.write_text("{not json")
    with pytest.raises(ValueError, match=r"train-00000\.shard\.json"):
        read_shard(info.header)


def test_dataset_memory_maps_shards_and_returns_int64_windows(tmp_path: Path) -> None:
    write_shard(tmp_path, "train", 0, DOCS)
    index_committed_shards(tmp_path, "train")
    ds = TokenDataset(tmp_path, "train", block_size=4)
    assert isinstance(ds.shards[0].tokens, np.memmap)
    assert ds.shards[0].tokens.dtype == np.uint16
    assert len(ds) == num_windows(15, 4) == 3
    assert ds[0].dtype == np.int64 and ds[0].shape == (5,)
    assert ds[1].tolist() == [0, 8, 0, 9, 10]
    assert ds[-1].tolist() == ds[2].tolist()
    with pytest.raises(IndexError):
        ds[3]


def test_windows_never_cross_shard_boundaries_and_follow_shard_order(tmp_path: Path) -> None:
    write_shard(tmp_path, "train", 1, [[0, 20, 21, 22, 23, 24, 25]])  # 7 tokens -> 1 window
    write_shard(tmp_path, "train", 0, DOCS)  # 15 tokens -> 3 windows
    write_shard(tmp_path, "val", 0, [[0, 40, 41]])
    index_committed_shards(tmp_path, "train")
    index_committed_shards(tmp_path, "val")
    ds = TokenDataset(tmp_path, "train", block_size=4)
    assert len(ds) == 4
    assert ds[3].tolist() == [0, 20, 21, 22, 23]
    assert ds.n_tokens == 22
    assert ds.doc_offsets.tolist() == [0, 4, 6, 12, 15]
    assert split_token_counts(tmp_path) == {"train": 22, "val": 3}


def test_dataset_pickles_by_reopening_its_shards(tmp_path: Path) -> None:
    write_shard(tmp_path, "train", 0, DOCS)
    index_committed_shards(tmp_path, "train")
    ds = TokenDataset(tmp_path, "train", block_size=4)
    clone = pickle.loads(pickle.dumps(ds))
    assert len(pickle.dumps(ds)) < 1000  # paths, not token data
    assert isinstance(clone.shards[0].tokens, np.memmap)
    assert [clone[i].tolist() for i in range(len(clone))] == [ds[i].tolist() for i in range(3)]


def test_rewriting_a_shard_replaces_it_whole(tmp_path: Path) -> None:
    write_shard(tmp_path, "train", 0, DOCS)
    write_shard(tmp_path, "train", 0, [[0, 1, 2], [0, 3]])
    index_committed_shards(tmp_path, "train")
    ds = TokenDataset(tmp_path, "train", block_size=2)
    assert ds.shards[0].tokens.tolist() == [0, 1, 2, 0, 3]
    assert ds.doc_offsets.tolist() == [0, 3]


def test_a_split_opens_from_its_index_without_touching_a_shard(tmp_path: Path) -> None:
    for k in range(5):
        write_shard(tmp_path, "train", k, DOCS)
    index_committed_shards(tmp_path, "train")
    for k in range(5):  # the dataset would fail on first use of a shard, not at open
        (tmp_path / f"train-{k:05d}.tokens.bin").unlink()
        (tmp_path / f"train-{k:05d}.shard.json").unlink()
    ds = TokenDataset(tmp_path, "train", block_size=4)
    assert (len(ds), ds.n_tokens, ds.open_shards) == (15, 75, 0)
    with pytest.raises(FileNotFoundError, match=r"train-00002\.tokens\.bin"):
        ds[7]


def test_at_most_max_open_shards_stay_mapped_and_reads_stay_correct(tmp_path: Path) -> None:
    docs = {k: [[0, *range(10 * k + 1, 10 * k + 9)]] for k in range(12)}  # 9 tokens, 2 windows
    for k, shard_docs in docs.items():
        write_shard(tmp_path, "train", k, shard_docs)
    index_committed_shards(tmp_path, "train")
    ds = TokenDataset(tmp_path, "train", block_size=4, max_open_shards=3)
    order = np.random.default_rng(0).permutation(len(ds))
    for i in order:
        k, local = divmod(int(i), 2)
        assert ds[int(i)].tolist() == docs[k][0][4 * local : 4 * local + 5]
        assert ds.open_shards <= 3
    assert [s.info.index for s in ds.shards] == list(range(12))
    assert ds.open_shards == 3


def test_a_split_without_its_index_names_the_stage_to_run(tmp_path: Path) -> None:
    write_shard(tmp_path, "train", 0, DOCS)
    with pytest.raises(FileNotFoundError, match=r"train\.index\.json.*tokenize"):
        TokenDataset(tmp_path, "train", block_size=4)


def test_shards_must_be_numbered_without_gaps_to_be_indexed(tmp_path: Path) -> None:
    write_shard(tmp_path, "train", 1, DOCS)
    with pytest.raises(ValueError, match=r"not numbered 0\.\.0"):
        index_committed_shards(tmp_path, "train")
