"""Memory and time of BPE training on a `tokenizer.sample_bytes` sample, and its cost in quality.

Generates (seeded, in a temporary directory) a synthetic clean split with an open vocabulary
(`pipeline/estimate/calibration/synthetic_split.py`): words are Zipf-distributed ranks spelled
in random syllables, so distinct words keep growing with the size of the text, as in web text.
Then, each in a fresh subprocess that runs the `train_tokenizer` stage's own training
(`train_on_sample`, through `calibration/tokenizer_training.py`), it trains a BPE of `--vocab`
tokens on a `--sample`, on a `--reference-sample`, and on all of the split, and records each
one's peak RSS (VmHWM of that subprocess) and wall time. The sampled and unsampled runs leave
out words seen fewer than `--min-word-count` times (the stage's default); the reference keeps
every word.
Validation bytes per token of the sampled tokenizer are compared with those of the reference.
Sizes take KB/MB/GB (powers of 1024). The last line is JSON with `peak_rss_mb`, `wall_s`,
`bytes_per_token_rel_diff` and `unsampled_peak_rss_mb` (goals: < 2048 MB, < 300 s, < 0.01).

    .venv/bin/python bench/tokenizer_sample.py [--size 3GB] [--sample 256MB]
        [--reference-sample 1GB] [--vocab 32768] [--min-word-count 2] [--no-unsampled]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from lmforge.pipeline.estimate.calibration.synthetic_split import parse_size, write_split
from lmforge.pipeline.estimate.calibration.tokenizer_training import train
from lmforge.tokenizer.config import TokenizerConfig


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
    main()
