"""One partition of documents becomes one committed shard, in batches, order kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from lmforge.tokenizer import encode_documents, read_shard, tokenize_partition


def test_partition_is_encoded_in_batches_into_one_shard_in_order(
    tok: Tokenizer, corpus: list[str], tmp_path: Path
) -> None:
    info = tokenize_partition(tok, iter(corpus[:50]), tmp_path, "train", 7, batch_size=8)
    expected = [t for doc in encode_documents(tok, corpus[:50]) for t in doc]
    shard = read_shard(tmp_path / "train-00007.shard.json")
    assert info.index == 7 and info.n_docs == 50 and info.n_tokens == len(expected)
    assert shard.tokens.tolist() == expected
    assert len(shard.doc_starts) == 50


def test_partition_loads_the_tokenizer_from_its_directory(
    tok: Tokenizer, saved_dir: Path, corpus: list[str], tmp_path: Path
) -> None:
    from_dir = tokenize_partition(saved_dir, corpus[:5], tmp_path / "a", "val", 0)
    from_obj = tokenize_partition(tok, corpus[:5], tmp_path / "b", "val", 0)
    a = (tmp_path / "a" / "val-00000.tokens.bin").read_bytes()
    assert a == (tmp_path / "b" / "val-00000.tokens.bin").read_bytes()
    assert from_dir.n_tokens == from_obj.n_tokens


def test_a_failing_document_stream_leaves_no_shard(tok: Tokenizer, tmp_path: Path) -> None:
    def texts():
        yield "first document"
        raise OSError("source shard unreadable")

    with pytest.raises(OSError, match="unreadable"):
        tokenize_partition(tok, texts(), tmp_path, "train", 0)
    assert list(tmp_path.iterdir()) == []
