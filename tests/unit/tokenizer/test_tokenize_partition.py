"""One partition of documents becomes one committed shard, in batches, order kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


ENCODE_THEN_COUNT_THREADS = """
import json, os, sys
import json
import os
import subprocess
import sys
from pathlib import Path

from lmforge.tokenizer import load_tokenizer, tokenize_partition


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


tok = load_tokenizer(sys.argv[1])
texts = [f"document {i}: " + "the quick brown fox jumps over a lazy dog " * 40 for i in range(3000)]
before = threads()
tokenize_partition(tok, texts, Path(sys.argv[2]) / "a", "train", 0)
after_partition = threads()
setting = os.environ.get("TOKENIZERS_PARALLELISM")
tok.encode_batch(texts)  # tokenizers left to itself: its rayon pool
print(json.dumps([before, after_partition, threads(), setting]))
"""


def test_a_partition_is_encoded_on_the_calling_thread_and_the_setting_put_back(
    saved_dir: Path, tmp_path: Path
) -> None:
    # A fresh process (tokenizers sizes its rayon pool once per process, to every core): the
    # partition starts no thread, a plain batch call afterwards does, so the count can tell.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TOKENIZERS_PARALLELISM", "RAYON_NUM_THREADS")
    }
    env["RAYON_NUM_THREADS"] = "2"  # a pool of two, whatever this machine's cores
    done = subprocess.run(
        [sys.executable, "-c", ENCODE_THEN_COUNT_THREADS, str(saved_dir), str(tmp_path)],
        capture_output=True, text=True, env=env, check=True, timeout=120,
    )  # fmt: skip
    before, after_partition, after_batch, setting = json.loads(done.stdout.splitlines()[-1])
    assert after_partition == before
    assert after_batch > before
    assert setting is None
