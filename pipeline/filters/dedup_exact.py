"""Exact deduplication: a 64-bit xxhash of each document's normalised text, resolved globally.

Partitions hash their documents in parallel (`ExactDeduplicator.text_hash`); the (id, hash) pairs
of all partitions then go to `resolve_exact_duplicates`, which keeps, for every hash, the
document with the smallest id and maps every other one to it. The index holds 8 bytes of hash
per document (plus its id), never texts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import xxhash

from lmforge.pipeline.document import Document
from lmforge.pipeline.typed_config import from_mapping

_WHITESPACE_RE = re.compile(r"\s+")
HASH_BYTES = 8


@dataclass(kw_only=True, slots=True)
class ExactDedupConfig:
    """Settings of exact deduplication (config `data.dedup.exact`)."""

    enabled: bool = True
    "Remove documents whose normalised text equals an earlier one's."
    lowercase: bool = False
    "Compare case-insensitively."
    seed: int = 0
    "xxhash seed; the same on every worker."

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "data.dedup.exact") -> ExactDedupConfig:
        return from_mapping(cls, d, where)


def dedup_text(text: str, lowercase: bool = False) -> str:
    """The form of the text that is compared: whitespace runs collapsed, ends stripped."""
    text = _WHITESPACE_RE.sub(" ", text).strip()
    return text.lower() if lowercase else text


class ExactDeduplicator:
    """Hashes documents for exact dedup; stateless, so every partition can hold its own."""

    def __init__(self, config: ExactDedupConfig | None = None) -> None:
        self.config = config or ExactDedupConfig()

    def text_hash(self, doc: Document | str) -> int:
        """64-bit xxhash of the normalised text of a document (or of a string)."""
        text = doc.text if isinstance(doc, Document) else doc
        normalised = dedup_text(text, self.config.lowercase)
        return xxhash.xxh3_64_intdigest(normalised.encode("utf-8"), seed=self.config.seed)

    def hash_documents(self, docs: Iterable[Document]) -> list[tuple[str, int]]:
        """(id, hash) of each document, ready to ship to the global resolution."""
        return [(doc.id, self.text_hash(doc)) for doc in docs]


def resolve_exact_duplicates(
    pairs: Iterable[tuple[str, int]],
) -> tuple[set[str], dict[str, str]]:
    """Kept ids, and a map removed id -> kept id, from the (id, hash) pairs of all partitions.

    Among documents with the same hash the smallest id is kept, whatever the order of `pairs`.
    """
    groups: dict[int, list[str]] = {}
    seen: set[str] = set()
    for doc_id, text_hash in pairs:
        if doc_id in seen:
            raise ValueError(
                f"exact dedup: document id {doc_id!r} occurs twice; ids must be unique"
            )
        seen.add(doc_id)
        groups.setdefault(int(text_hash), []).append(doc_id)
    kept: set[str] = set()
    removed: dict[str, str] = {}
    for ids in groups.values():
        keeper = min(ids)
        kept.add(keeper)
        removed.update((doc_id, keeper) for doc_id in ids if doc_id != keeper)
    return kept, removed
