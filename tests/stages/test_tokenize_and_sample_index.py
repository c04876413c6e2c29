"""`tokenize` merges small clean shards into token shards of `tokenizer.shard_mb` and indexes each
split; `sample_index` builds the window order of the merged data for the configured run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmforge.pipeline.sources.embedded import embedded_documents
from lmforge.pipeline.training.data.sample_index import open_for_run
from lmforge.tokenizer.dataset import TokenDataset

pytestmark = pytest.mark.slow  # Ray tasks

TEXTS = [d.text for d in embedded_documents() if 1500 < len(d.text) < 30000][:80]


def stream(directory) -> np.ndarray:
    dataset = TokenDataset(directory, "train", block_size=1)
    return np.concatenate([np.asarray(s.tokens) for s in dataset.shards])


def test_small_clean_shards_merge_into_indexed_token_shards(run_stage, tmp_path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"doc{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)),
        encoding="utf-8",
    )
    clean, _ = run_stage("clean", [f"data.paths=[{corpus}]", "data.shard_mb=0.01"])
    tokenizer, _ = run_stage("train_tokenizer", ["tokenizer.vocab_size=512"], {"clean": clean})
    inputs = {"clean": clean, "train_tokenizer": tokenizer}
    one_each, unmerged = run_stage("tokenize", ["tokenizer.shard_mb=0"], inputs)
    merged_dir, merged = run_stage("tokenize", ["tokenizer.shard_mb=0.05"], inputs)

    assert unmerged["train_shards"] == unmerged["train_clean_shards"] > 4
    assert 1 <= merged["train_shards"] < unmerged["train_shards"] / 2
    assert merged["train_tokens"] == unmerged["train_tokens"]
    np.testing.assert_array_equal(stream(merged_dir), stream(one_each))  # same documents, in order
    assert (merged_dir / "train.index.json").is_file() and (merged_dir / "val.index.json").is_file()

    settings = ["model.block_size=32", "train.max_steps=30", "train.global_batch_size=16"]
    index_dir, summary = run_stage("sample_index", settings, {"tokenize": merged_dir})
    dataset = TokenDataset(merged_dir, "train", block_size=32, max_offset=31)
    assert summary["n_windows"] == len(dataset)
    assert summary["positions"] >= 30 * 16 > (summary["epochs"] - 1) * summary["n_windows"]
    open_for_run(index_dir, dataset, seed=1337, positions=30 * 16)
