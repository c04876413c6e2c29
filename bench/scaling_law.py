"""Does a scaling law fitted on small runs predict a larger one? The parts that do not need
`lmforge sweep`: the corpus and the budgets.

The corpus is real text that exists wherever lmforge is installed: the Python sources (code and
docstrings) under the virtualenv's site-packages, deduplicated by content, written as JSONL
shards (`build_corpus`). The default clean chain is made for web prose and would drop most of it,
so the bench runs clean with `CODE_FILTERS`: the language, Gopher quality and C4 filters off
(code is not a natural language, its symbol and alphabetic-word ratios and its lines without
terminal punctuation are what code looks like), Gopher repetition relaxed (closing brackets and
`return` lines repeat), length, normalisation, the blocklist and dedup as they are.

The budgets are sized from a short throughput probe (tokens per second of a probe model on this
machine) to fit a time target (`size_budgets`): a geometric ladder of budgets, each run at K
shapes, plus one held-out run at 3x the largest budget.

    .venv/bin/python bench/scaling_law.py --corpus-only OUT [--target-mb 40]

prints the corpus's JSON line (the grid, fit and held-out run come with `lmforge sweep`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import site
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CODE_FILTERS = (
    "data.filters.language.enabled=false",
    "data.filters.gopher_quality.enabled=false",
    "data.filters.c4.enabled=false",
    "data.filters.gopher_repetition.max_dup_line_frac=0.6",
    "data.filters.gopher_repetition.max_dup_line_char_frac=0.4",
    "data.filters.gopher_repetition.max_dup_para_frac=0.6",
    "data.filters.gopher_repetition.max_dup_para_char_frac=0.4",
)
"""The clean settings that suit Python sources (the module docstring says why each)."""
MAX_FILE_BYTES = 512 * 1024
"""Larger sources are mostly generated tables or vendored bundles: skipped."""
SHARD_BYTES = 32 * 2**20
HELDOUT_FACTOR = 3.0


def site_packages() -> Path:
    """The running virtualenv's site-packages."""
    return Path(next(p for p in site.getsitepackages() if p.endswith("site-packages")))


def python_sources(root: Path) -> Iterator[tuple[str, str]]:
    """(relative path, text) of every readable UTF-8 `.py` file under `root`, in path order,
    each content once (the first path that has it)."""
    seen: set[bytes] = set()
    for path in sorted(root.rglob("*.py")):
        try:
            if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        digest = hashlib.sha256(data).digest()
        if digest in seen or not data.strip():
            continue
        seen.add(digest)
        try:
            yield path.relative_to(root).as_posix(), data.decode("utf-8")
        except UnicodeDecodeError:
            continue


@dataclass(frozen=True, slots=True)
class CorpusStats:
    files: int
    bytes: int
    shards: int

    def to_json(self) -> dict:
        return {"files": self.files, "bytes": self.bytes, "shards": self.shards}


def build_corpus(root: Path, out: Path, target_bytes: int) -> CorpusStats:
    """JSONL shards of `{"id", "text"}` from the sources under `root`, up to `target_bytes` of
    text, into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    files = size = shards = 0
    shard_size = SHARD_BYTES + 1
    handle = None
    try:
        for name, text in python_sources(root):
            if size >= target_bytes:
                break
            if shard_size > SHARD_BYTES:
                if handle:
                    handle.close()
                handle = (out / f"python-{shards:04d}.jsonl").open("w", encoding="utf-8")
                shards, shard_size = shards + 1, 0
            line = json.dumps({"id": name, "text": text}, ensure_ascii=False) + "\n"
            handle.write(line)
            files += 1
            size += len(text.encode("utf-8"))
            shard_size += len(line)
    finally:
        if handle:
            handle.close()
    return CorpusStats(files, size, shards)


@dataclass(frozen=True, slots=True)
class BudgetLadder:
    budgets: list[float]
    heldout: float
    flops_per_s: float
    """The probe's sustained training FLOP/s on this machine."""
    planned_s: float


def size_budgets(
    probe_tokens_per_s: float,
    probe_flops_per_token: float,
    target_s: float,
    *,
    budgets: int = 3,
    shapes: int = 4,
    ratio: float = 3.0,
    overhead_s: float = 60.0,
) -> BudgetLadder:
    """A ladder of `budgets` budgets, each `ratio` times the last, whose grid (`shapes` runs a
    budget) and held-out run (3x the largest) fit `target_s` at the probe's FLOP/s, each run
    paying `overhead_s` of start-up and evaluation besides its training."""
    rate = probe_tokens_per_s * probe_flops_per_token
    runs = budgets * shapes + 1
    training_s = target_s - runs * overhead_s
    if rate <= 0 or training_s <= 0:
        raise ValueError(
            f"{runs} runs of {overhead_s:.0f}s overhead each do not fit {target_s:.0f}s: "
            "raise the target or lower the overhead"
        )
    weights = sum(ratio**k for k in range(budgets)) * shapes + HELDOUT_FACTOR * ratio ** (
        budgets - 1
    )
    smallest = rate * training_s / weights
    ladder = [smallest * ratio**k for k in range(budgets)]
    total = (shapes * sum(ladder) + HELDOUT_FACTOR * ladder[-1]) / rate + runs * overhead_s
    return BudgetLadder(ladder, HELDOUT_FACTOR * ladder[-1], rate, total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus-only", type=Path, metavar="OUT", required=True)
    parser.add_argument("--target-mb", type=float, default=40.0)
    args = parser.parse_args()
    root = site_packages()
    stats = build_corpus(root, args.corpus_only, int(args.target_mb * 2**20))
    print(json.dumps({"bench": "scaling_law", "corpus": stats.to_json(), "root": str(root)}))


if __name__ == "__main__":
    sys.exit(main())
