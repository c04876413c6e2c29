"""A synthetic clean split with an open vocabulary, for timing BPE training: words are
Zipf-distributed ranks spelled in random syllables, so distinct words keep growing with the size
of the text, as in web text. The `train_tokenizer` calibration case and `bench/tokenizer_sample.py`
train on it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lmforge.pipeline.sources.parquet_shards import SCHEMA

UNITS = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
CONSONANTS, VOWELS = b"bdfghklmnprstvz", b"aeiou"
SYLLABLES = np.array([[c, v] for c in CONSONANTS for v in VOWELS], dtype=np.uint8)
MAX_SYLLABLES = 6  # 75**6 = 1.8e11 word forms; Zipf ranks above that are clipped
WORDS_PER_CHUNK = 1 << 21


def parse_size(text: str) -> int:
    """`32MB` -> 32 * 2^20 bytes: KB, MB and GB as powers of 1024, as the cases write them."""
    for unit, factor in UNITS.items():
        if text.upper().endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def spell(
    ranks: np.ndarray, separators: np.ndarray, spellings: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Words `ranks` spelled as their base-75 digits, a syllable each (`spellings[position]`),
    each followed by its separator: (the bytes, each word's length with its separator)."""
    n, s = len(ranks), len(SYLLABLES)
    powers = s ** np.arange(MAX_SYLLABLES, dtype=np.int64)
    digits = (ranks[:, None] // powers) % s
    length = 1 + (ranks[:, None] >= powers[1:]).sum(axis=1)
    pairs = spellings.view(np.uint16)[..., 0]  # (MAX_SYLLABLES, s): a syllable's two bytes
    letters = pairs[np.arange(MAX_SYLLABLES), digits]
    letters[np.arange(MAX_SYLLABLES) >= length[:, None]] = 0
    rows = np.empty((n, 2 * MAX_SYLLABLES + 1), dtype=np.uint8)
    rows[:, :-1] = letters.view(np.uint8)
    rows[:, -1] = separators
    return rows[rows != 0], 2 * length + 1


def documents(rng: np.random.Generator, zipf: float, spellings: np.ndarray) -> pa.StringArray:
    """About WORDS_PER_CHUNK words cut into documents of 50 to 1,000 words."""
    ranks = np.minimum(rng.zipf(zipf, WORDS_PER_CHUNK), len(SYLLABLES) ** MAX_SYLLABLES - 1)
    separators = np.where(rng.random(WORDS_PER_CHUNK) < 0.05, ord("\n"), ord(" "))
    data, word_lengths = spell(ranks, separators.astype(np.uint8), spellings)
    word_ends = np.cumsum(word_lengths)
    doc_words = np.cumsum(rng.integers(50, 1000, WORDS_PER_CHUNK // 50))
    doc_words = doc_words[doc_words < WORDS_PER_CHUNK]
    offsets = np.concatenate([[0], word_ends[doc_words - 1], [len(data)]]).astype(np.int32)
    return pa.StringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))


def write_split(out: Path, split: str, size: int, seed: int, zipf: float, shard_bytes: int) -> int:
    """Shards `<split>-NNNNN.parquet` of the clean schema, about `size` bytes; documents written.

    The spelling of words depends on `seed` alone, so train and val share one language."""
    rng = np.random.default_rng([seed, 0 if split == "train" else 1])
    orders = [
        np.random.default_rng([seed, 2 + j]).permutation(len(SYLLABLES))
        for j in range(MAX_SYLLABLES)
    ]
    spellings = np.stack([SYLLABLES[order] for order in orders])
    written = docs = shard = in_shard = 0
    writer = None
    while written < size:
        texts = documents(rng, zipf, spellings)
        n = len(texts)
        lengths = pc.binary_length(texts)
        table = pa.Table.from_arrays(
            [
                pa.array([f"{split}/{docs + i}" for i in range(n)]),
                texts,
                pa.array(["synthetic"] * n),
                pa.array(["{}"] * n),
                lengths.cast(pa.int64()),
                pa.array(["en"] * n),
                pa.array([split] * n),
            ],
            schema=SCHEMA,
        )
        if writer is None:
            writer = pq.ParquetWriter(
                out / f"{split}-{shard:05d}.parquet", SCHEMA, compression="zstd"
            )
        writer.write_table(table)
        chunk = pc.sum(lengths).as_py()
        written, docs, in_shard = written + chunk, docs + n, in_shard + chunk
        if in_shard >= shard_bytes:
            writer.close()
            writer, shard, in_shard = None, shard + 1, 0
    if writer is not None:
        writer.close()
    return docs
