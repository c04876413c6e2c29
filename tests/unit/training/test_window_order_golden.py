"""Golden window order: the first 300 positions of the sample index of a 50-shard reference
corpus, with its shards merged as `tokenize` merges them, are pinned in
`tests/fixtures/window_order_golden.json` (windows, shifts and a hash of the tokens read), so an
accidental change of the order, of the window numbering or of the merging fails here. With
merging off, the index equals the in-memory order the sampler has always defined.

After an intended change, record the fixture again with
`LMFORGE_RECORD_GOLDEN=1 .venv/bin/python -m pytest tests/unit/training/test_window_order_golden.py`
and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from lmforge.pipeline.stages.tokenize.stage import group_shards
from lmforge.pipeline.training.data.sample_index import SampleIndex, build_for_data
from lmforge.pipeline.training.data.sampler import GlobalWindowOrder
from lmforge.tokenizer.dataset import TokenDataset
from lmforge.tokenizer.shards import TokenShardWriter
from lmforge.tokenizer.split_index import index_committed_shards

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "window_order_golden.json"
SEED, BLOCK, VOCAB, POSITIONS = 1337, 8, 1000, 300
MERGE_TARGET = 120
"""Tokens per merged shard: the 50 shards become 15."""


def reference_corpus() -> list[list[list[int]]]:
    """50 shards of 1-4 documents of 3-20 tokens, each document led by the EOT id 0."""
    rng = np.random.default_rng(2024)
    return [
        [[0, *rng.integers(2, VOCAB, rng.integers(3, 21)).tolist()] for _ in range(n_docs)]
        for n_docs in rng.integers(1, 5, 50)
    ]


def write_split(directory: Path, shards: list[list[list[int]]]) -> Path:
    for k, docs in enumerate(shards):
        with TokenShardWriter(directory, "train", k, VOCAB) as writer:
            writer.write_documents(docs)
    index_committed_shards(directory, "train")
    return directory


def merged(shards: list[list[list[int]]]) -> list[list[list[int]]]:
    sizes = [sum(len(d) for d in docs) for docs in shards]
    return [[d for k in group for d in shards[k]] for group in group_shards(sizes, MERGE_TARGET)]


def order_of(data: Path, index_dir: Path) -> dict:
    settings = {"block_size": BLOCK, "seed": SEED, "epoch_offsets": True}
    build_for_data(index_dir, data, **settings, positions=POSITIONS)
    index = SampleIndex(index_dir)
    windows, offsets = index.windows(0, POSITIONS), index.offsets(0, POSITIONS)
    dataset = TokenDataset(data, "train", BLOCK, BLOCK - 1)
    tokens = np.stack(
        [dataset.window_at(int(w), int(o)) for w, o in zip(windows, offsets, strict=True)]
    )
    return {
        "n_windows": len(dataset),
        "n_shards": len(dataset.shards),
        "windows": windows.tolist(),
        "offsets": offsets.tolist(),
        "tokens_sha256": hashlib.sha256(tokens.astype("<i8").tobytes()).hexdigest(),
    }


def test_the_window_order_of_the_reference_corpus_is_the_recorded_one(tmp_path):
    got = order_of(write_split(tmp_path / "data", merged(reference_corpus())), tmp_path / "index")
    if os.environ.get("LMFORGE_RECORD_GOLDEN") == "1":
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_text(json.dumps(got) + "\n", encoding="utf-8")
        pytest.skip(f"recorded {FIXTURE}")
    expected = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert got["n_shards"] < 50 and got["n_windows"] < POSITIONS  # merged, a shifted epoch too
    assert got == expected


def test_with_merging_off_the_index_is_the_order_the_sampler_always_defined(tmp_path):
    got = order_of(write_split(tmp_path / "data", reference_corpus()), tmp_path / "index")
    assert got["n_shards"] == 50
    before = GlobalWindowOrder(got["n_windows"], SEED, max_offset=BLOCK - 1)
    assert got["windows"] == before.windows(0, POSITIONS).tolist()
    assert got["offsets"] == before.offsets(0, POSITIONS).tolist()
