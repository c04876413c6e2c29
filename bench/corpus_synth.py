"""A seeded generator of large JSONL.zst corpora from real words, with planted duplicates.

Writes `--docs` documents into `--files` `.jsonl.zst` files and `planted.json` with the
generator the `clean` calibration case uses (`pipeline/estimate/calibration/synthetic_corpus.py`
says what the documents and the planted copies are), and prints one JSON line.

    python bench/corpus_synth.py --docs 1000000 --files 16 --out DIR [--seed 0] [--words 32]
        [--workers 2]

The default length (~40 words, ~290 bytes of JSON a document) makes 10 million documents about
2.9 GB of JSONL (`--words 20`: about 2.3 GB).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lmforge.pipeline.estimate.calibration.synthetic_corpus import synthesize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, required=True)
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--words", type=int, default=32, help="mean words per original")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    planted = synthesize(args.out, args.docs, args.files, args.seed, args.words, args.workers)
    wall = time.perf_counter() - started
    size = sum((args.out / name).stat().st_size for name in planted["files"])
    print(
        json.dumps(
            {
                "bench": "corpus_synth",
                "docs": args.docs,
                "files": args.files,
                "exact_copies": len(planted["exact"]),
                "near_copies": len(planted["near"]),
                "compressed_mb": round(size / 1e6, 2),
                "wall_s": round(wall, 2),
                "docs_per_s": round(args.docs / wall),
            }
        )
    )


if __name__ == "__main__":
    main()
