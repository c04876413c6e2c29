"""The default chain's decisions on a fixed sample are pinned: speeding a filter up must not
change what it keeps, drops (and why), rewrites or records.

`tests/fixtures/chain_sample.jsonl.gz` holds 234 documents: 200 web-like pages recombined from
Python's documentation (as `bench/clean_throughput.py` builds them) and crafted cases (German,
French, Spanish, Dutch, Russian and Chinese text, toxic passages, PII, mojibake, odd whitespace,
long documents, hashtags, ellipses, blocklisted words, near-empty texts).
`tests/fixtures/chain_decisions.json` is what the chain decided on them before the filters were
optimised; rerun `python tests/unit/filters/test_chain_decisions.py` to record it again after a
deliberate change of behaviour.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

import pytest

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.chain import (
    FilterChainConfig,
    build_filter_chain,
    chain_counts,
    run_chain,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SAMPLE = FIXTURES / "chain_sample.jsonl.gz"
DECISIONS = FIXTURES / "chain_decisions.json"


def sample() -> list[Document]:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as lines:
        return [
            Document(id=r["id"], text=r["text"], source="sample") for r in map(json.loads, lines)
        ]


def decide(batch_size: int) -> dict:
    """Per document: the reason it was dropped, or the digest of its kept text and its meta; and
    every step's counts (CPU time aside)."""
    dropped = []
    chain = build_filter_chain(FilterChainConfig(), exclusion_sink=dropped.append)
    docs = sample()
    kept = {d.id: d for d in run_chain(docs, chain, batch_size=batch_size)}
    outcome = {e.id: {"dropped": f"{e.step}:{e.reason}"} for e in dropped}
    for doc_id, doc in kept.items():
        digest = hashlib.sha256(doc.text.encode("utf-8")).hexdigest()[:16]
        outcome[doc_id] = {"text": digest, "meta": doc.meta}
    counts = {}
    for name, c in chain_counts(chain).items():
        counts[name] = {k: v for k, v in c.to_dict().items() if k != "cpu_seconds"}
    return {"documents": dict(sorted(outcome.items())), "counts": counts}


@pytest.mark.parametrize("batch_size", [256, 7])
def test_the_default_chain_decides_as_pinned_whatever_the_batch_size(batch_size):
    expected = json.loads(DECISIONS.read_text(encoding="utf-8"))
    found = json.loads(json.dumps(decide(batch_size)))  # the JSON form of floats and tuples
    changed = {
        doc_id: (want, found["documents"].get(doc_id))
        for doc_id, want in expected["documents"].items()
        if found["documents"].get(doc_id) != want
    }
    assert not changed, (
        f"{len(changed)} documents decided otherwise, e.g. {list(changed.items())[:3]}"
    )
    assert found == expected


if __name__ == "__main__":
    DECISIONS.write_text(json.dumps(decide(256), indent=1, sort_keys=True) + "\n")
    print(f"recorded {DECISIONS}", file=sys.stderr)
