"""Memory and time of BPE training on a `tokenizer.sample_bytes` sample, and its cost in quality.

Generates (seeded, in a temporary directory) a synthetic clean split with an open vocabulary:
words are Zipf-distributed ranks spelled in random syllables, so distinct words keep growing
with the size of the text, as in web text. Then, each in a fresh subprocess that runs the
`train_tokenizer` stage's own training (`train_on_sample`), it trains a BPE of `--vocab` tokens
on a `--sample`, on a `--reference-sample`, and on all of the split, and records each one's peak
RSS (VmHWM of that subprocess) and wall time. The sampled and unsampled runs leave out words seen
fewer than `--min-word-count` times (the stage's default); the reference keeps every word.
Validation bytes per token of the sampled tokenizer are compared with those of the reference.
Sizes take KB/MB/GB (powers of 1024). The last line is JSON with `peak_rss_mb`, `wall_s`,
`bytes_per_token_rel_diff` and `unsampled_peak_rss_mb` (goals: < 2048 MB, < 300 s, < 0.01).

    .venv/bin/python bench/tokenizer_sample.py [--size 3GB] [--sample 256MB]
        [--reference-sample 1GB] [--vocab 32768] [--min-word-count 2] [--no-unsampled]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lmforge.pipeline.sources.parquet_shards import SCHEMA
from lmforge.tokenizer.config import TokenizerConfig

UNITS = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
CONSONANTS, VOWELS = b"bdfghklmnprstvz", b"aeiou"
SYLLABLES = np.array([[c, v] for c in CONSONANTS for v in VOWELS], dtype=np.uint8)
MAX_SYLLABLES = 6  # 75**6 = 1.8e11 word forms; Zipf ranks above that are clipped
WORDS_PER_CHUNK = 1 << 21


def parse_size(text: str) -> int:
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


def peak_rss_mb() -> float:
    """VmHWM of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def train_worker(
    clean_dir: str, out_file: str, sample_bytes: int, vocab: int, min_word_count: int
) -> None:
    """Run in a fresh process: the stage's training, then one JSON line with its peak RSS."""
    from lmforge.pipeline.stages.train_tokenizer.stage import train_on_sample
    from lmforge.tokenizer import TokenizerConfig

    cfg = TokenizerConfig(
        vocab_size=vocab, sample_bytes=sample_bytes, min_word_count=min_word_count
    )
    tok, stats, words = train_on_sample(Path(clean_dir), cfg)
    tok.save(out_file)
    summary = {**stats.to_summary(), **words.to_summary()}
    print(json.dumps({"peak_rss_mb": round(peak_rss_mb(), 1), **summary}))


def train(
    clean_dir: Path, out_file: Path, sample_bytes: int, vocab: int, min_word_count: int
) -> dict:
    command = [sys.executable, __file__, "--worker", str(clean_dir), str(out_file)]
    settings = [str(sample_bytes), str(vocab), str(min_word_count)]
    started = time.perf_counter()
    done = subprocess.run([*command, *settings], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"training on {sample_bytes} bytes failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "wall_s": round(time.perf_counter() - started, 1)}


def bytes_per_token(tokenizer_file: Path, clean_dir: Path) -> float:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_file))
    n_bytes = n_tokens = 0
    for path in sorted(clean_dir.glob("val-*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=512, columns=["text"]):
            texts = batch.column(0).to_pylist()
            n_bytes += sum(len(t.encode("utf-8")) for t in texts)
            n_tokens += sum(len(e.ids) for e in tok.encode_batch(texts))
    return n_bytes / n_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="3GB", help="train split size")
    parser.add_argument("--sample", default="256MB", help="tokenizer.sample_bytes under test")
    parser.add_argument("--reference-sample", default="1GB", help="sample of the reference BPE")
    parser.add_argument("--val-size", default="8MB", help="validation text for bytes per token")
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument(
        "--min-word-count",
        type=int,
        default=TokenizerConfig().min_word_count,
        help="tokenizer.min_word_count of the sampled and unsampled runs (the reference keeps "
        "every word)",
    )
    parser.add_argument("--zipf", type=float, default=1.25, help="Zipf exponent of word ranks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-unsampled", action="store_true", help="skip the full-split run")
    args = parser.parse_args()
    size, sample, reference = map(parse_size, (args.size, args.sample, args.reference_sample))
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "clean"
        clean.mkdir()
        started = time.perf_counter()
        docs = write_split(clean, "train", size, args.seed, args.zipf, 128 << 20)
        write_split(clean, "val", parse_size(args.val_size), args.seed, args.zipf, 128 << 20)
        elapsed = time.perf_counter() - started
        print(f"generated {size / 2**20:.0f} MB, {docs} documents in {elapsed:.0f} s")
        runs = {}
        plan = (("sampled", sample, args.min_word_count), ("reference", reference, 1))
        for name, budget, min_count in plan:
            runs[name] = train(clean, Path(tmp) / f"{name}.json", budget, args.vocab, min_count)
            runs[name]["val_bytes_per_token"] = bytes_per_token(Path(tmp) / f"{name}.json", clean)
            print(name, json.dumps(runs[name]))
        if not args.no_unsampled:
            runs["unsampled"] = train(
                clean, Path(tmp) / "unsampled.json", 0, args.vocab, args.min_word_count
            )
            print("unsampled", json.dumps(runs["unsampled"]))
    bpt, ref_bpt = runs["sampled"]["val_bytes_per_token"], runs["reference"]["val_bytes_per_token"]
    print(
        json.dumps(
            {
                "bench": "tokenizer_sample",
                "size_mb": round(runs["sampled"]["train_text_bytes"] / 2**20),
                "sample_mb": round(sample / 2**20),
                "reference_sample_mb": round(reference / 2**20),
                "vocab": args.vocab,
                "min_word_count": args.min_word_count,
                "sample_distinct_words": runs["sampled"].get("sample_distinct_words"),
                "bpe_words": runs["sampled"].get("bpe_words"),
                "peak_rss_mb": runs["sampled"]["peak_rss_mb"],
                "wall_s": runs["sampled"]["wall_s"],
                "bytes_per_token": round(bpt, 4),
                "reference_bytes_per_token": round(ref_bpt, 4),
                "bytes_per_token_rel_diff": round(abs(bpt - ref_bpt) / ref_bpt, 5),
                "reference_peak_rss_mb": runs["reference"]["peak_rss_mb"],
                "unsampled_peak_rss_mb": runs.get("unsampled", {}).get("peak_rss_mb"),
                "unsampled_wall_s": runs.get("unsampled", {}).get("wall_s"),
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--worker":
        train_worker(sys.argv[2], sys.argv[3], *map(int, sys.argv[4:]))
    else:
        main()
