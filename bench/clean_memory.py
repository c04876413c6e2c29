"""Peak memory of the `clean` stage at 1x and 4x input: it should stay flat (dedup index aside).

Builds two JSONL corpora from the embedded documentation (perturbed copies, so dedup keeps most
of them), runs `lmforge run --until clean` on each in a fresh workdir, and samples the RSS of the
driver and every Ray worker while it runs. Prints a table and, last, one JSON line with the peak
per-process RSS at 4x as `lmforge`, at 1x as `reference`, and `ratio` = 1x / 4x (1.0 = flat).

    .venv/bin/python bench/clean_memory.py [--docs 4000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from lmforge.pipeline.sources.embedded import embedded_documents


def write_corpus(path: Path, n_docs: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    base = [d.text for d in embedded_documents() if len(d.text) > 600]
    vocab = sorted({w for t in base[:50] for w in t.split()})
    size = 0
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n_docs):
            words = base[i % len(base)].split(" ")
            for j in rng.sample(range(len(words)), max(1, len(words) // 4)):
                words[j] = rng.choice(vocab)  # a quarter of the words differ: not a duplicate
            line = json.dumps({"id": f"d{i}", "text": " ".join(words)})
            handle.write(line + "\n")
            size += len(line)
    return size


def peak_rss(command: list[str]) -> tuple[float, float, float]:
    """(largest single process, largest process-tree total, wall seconds), RSS in MB."""
    started = time.time()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    single = total = 0.0
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            rss = [p.memory_info().rss / 2**20 for p in tree if p.is_running()]
        except psutil.Error:
            continue
        single, total = max(single, max(rss, default=0)), max(total, sum(rss))
        time.sleep(0.2)
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}")
    return single, total, time.time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=4000, help="documents at 1x")
    args = parser.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for scale in (1, 4):
            corpus = Path(tmp) / f"corpus{scale}.jsonl"
            mb = write_corpus(corpus, args.docs * scale) / 2**20
            command = [
                sys.executable,
                "-m",
                "lmforge.pipeline.cli.main",
                "run",
                "--until",
                "clean",
                f"workdir={tmp}/w{scale}",
                f"data.paths=[{corpus}]",
                "data.filters.language.enabled=false",
            ]
            single, total, wall = peak_rss(command)
            rows[scale] = (mb, single, total, wall)
            print(
                f"{scale}x: {mb:7.1f} MB input  peak process {single:7.1f} MB  "
                f"peak tree {total:7.1f} MB  {wall:6.1f}s"
            )
    result = {
        "bench": "clean_memory",
        "unit": "MB peak RSS of one process",
        "lmforge": round(rows[4][1], 1),
        "reference": round(rows[1][1], 1),
        "ratio": round(rows[1][1] / rows[4][1], 3),
        "tree_1x": round(rows[1][2], 1),
        "tree_4x": round(rows[4][2], 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
