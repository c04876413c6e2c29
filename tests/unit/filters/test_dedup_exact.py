"""Exact dedup: one document kept per normalised text, chosen the same way on any partitioning."""

import pytest

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.dedup_exact import (
    ExactDedupConfig,
    ExactDeduplicator,
    resolve_exact_duplicates,
)


def test_exact_copies_keep_one_and_point_at_it():
    dedup = ExactDeduplicator()
    docs = [
        Document("b", "Same text here.", ""),
        Document("a", "Same  text\nhere. ", ""),
        Document("c", "Other text.", ""),
        Document("d", "Same text here.", ""),
    ]
    kept, removed = resolve_exact_duplicates(dedup.hash_documents(docs))
    assert kept == {"a", "c"}
    assert removed == {"b": "a", "d": "a"}


def test_the_kept_document_does_not_depend_on_partitioning_or_order():
    dedup = ExactDeduplicator()
    pairs = [(f"id{i:02d}", dedup.text_hash(f"text {i % 3}")) for i in range(12)]
    one = resolve_exact_duplicates(pairs)
    partitions = [pairs[7:], pairs[:3], pairs[3:7]]
    merged = resolve_exact_duplicates(p for part in partitions for p in reversed(part))
    assert one == merged
    assert one[0] == {"id00", "id01", "id02"}


def test_case_is_significant_unless_configured():
    assert ExactDeduplicator().text_hash("Hello") != ExactDeduplicator().text_hash("hello")
    folded = ExactDeduplicator(ExactDedupConfig(lowercase=True))
    assert folded.text_hash("Hello") == folded.text_hash("hello")


def test_repeated_ids_are_refused():
    with pytest.raises(ValueError, match="'x' occurs twice"):
        resolve_exact_duplicates([("x", 1), ("x", 1)])
