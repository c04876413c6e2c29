"""The contract of a cleaning step: a predicate with a reason, and counts kept by the base class.

A filter implements `filter(doc)` returning `True` (keep) or `(False, reason)` (drop); the base
class counts documents and characters in and out, drops by reason, and hands every dropped
document to an optional exclusion sink, so nothing is lost silently. Invariant kept here:
`docs_in == docs_out + sum(dropped_by_reason.values())`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from lmforge.pipeline.document import Document

FilterResult = bool | tuple[bool, str]
SNIPPET_CHARS = 200


@dataclass(slots=True)
class DroppedDocument:
    """What an exclusion sink receives for each dropped document."""

    id: str
    "Id of the dropped document."
    source: str
    "Where it came from."
    step: str
    "Name of the filter that dropped it."
    reason: str
    "Why it was dropped (e.g. `gopher_short_doc`)."
    snippet: str
    "The first characters of its text, to inspect decisions without keeping whole documents."


ExclusionSink = Callable[[DroppedDocument], None]


@dataclass(slots=True)
class FilterCounts:
    """Counts of one step; mergeable across partitions and serialisable to a plain dict."""

    docs_in: int = 0
    "Documents the step received."
    docs_out: int = 0
    "Documents the step kept."
    chars_in: int = 0
    "Characters of the documents it received."
    chars_out: int = 0
    "Characters of the documents it kept, after any rewriting."
    dropped_by_reason: dict[str, int] = field(default_factory=dict)
    "Dropped documents per reason."
    events: dict[str, int] = field(default_factory=dict)
    "Step-specific tallies: lines removed, redactions by type, repaired encodings..."
    cpu_seconds: float = field(default=0.0, compare=False)
    "CPU time of the process while the step ran on batches (a measurement, not a count)."

    def add_event(self, name: str, count: int = 1) -> None:
        self.events[name] = self.events.get(name, 0) + count

    @property
    def docs_dropped(self) -> int:
        return sum(self.dropped_by_reason.values())

    def merge(self, other: FilterCounts) -> FilterCounts:
        """A new FilterCounts holding the sum of `self` and `other`."""
        merged = FilterCounts(
            docs_in=self.docs_in + other.docs_in,
            docs_out=self.docs_out + other.docs_out,
            chars_in=self.chars_in + other.chars_in,
            chars_out=self.chars_out + other.chars_out,
            dropped_by_reason=dict(self.dropped_by_reason),
            events=dict(self.events),
            cpu_seconds=self.cpu_seconds + other.cpu_seconds,
        )
        for reason, n in other.dropped_by_reason.items():
            merged.dropped_by_reason[reason] = merged.dropped_by_reason.get(reason, 0) + n
        for name, n in other.events.items():
            merged.add_event(name, n)
        return merged

    def to_dict(self) -> dict:
        return {
            "docs_in": self.docs_in,
            "docs_out": self.docs_out,
            "chars_in": self.chars_in,
            "chars_out": self.chars_out,
            "dropped_by_reason": dict(sorted(self.dropped_by_reason.items())),
            "events": dict(sorted(self.events.items())),
            "cpu_seconds": round(self.cpu_seconds, 4),
        }

    @classmethod
    def from_dict(cls, d: dict) -> FilterCounts:
        return cls(
            docs_in=int(d["docs_in"]),
            docs_out=int(d["docs_out"]),
            chars_in=int(d["chars_in"]),
            chars_out=int(d["chars_out"]),
            dropped_by_reason={k: int(v) for k, v in d.get("dropped_by_reason", {}).items()},
            events={k: int(v) for k, v in d.get("events", {}).items()},
            cpu_seconds=float(d.get("cpu_seconds", 0.0)),
        )


class DocumentFilter(ABC):
    """A step that keeps or drops whole documents (and may shorten their text, like C4's lines).

    Subclasses set `name` and implement `filter`; batch-friendly ones override `filter_batch`.
    """

    name: ClassVar[str] = "filter"

    def __init__(self, exclusion_sink: ExclusionSink | None = None) -> None:
        self.counts = FilterCounts()
        self.exclusion_sink = exclusion_sink

    @abstractmethod
    def filter(self, doc: Document) -> FilterResult:
        """`True` to keep `doc`, `(False, reason)` to drop it. May rewrite `doc.text`."""

    def filter_batch(self, docs: list[Document]) -> list[FilterResult]:
        """One result per document; override when a batch is cheaper than documents one by one."""
        return [self.filter(doc) for doc in docs]

    def process(self, doc: Document) -> Document | None:
        """Run the filter on one document with counting; the document, or None if dropped."""
        chars_in = len(doc.text)
        return self._account(doc, chars_in, self.filter(doc))

    __call__ = process

    def process_batch(self, docs: list[Document]) -> list[Document]:
        """Run the filter on a batch with counting; the kept documents, in order."""
        started = time.process_time()
        chars_in = [len(doc.text) for doc in docs]
        results = self.filter_batch(docs)
        if len(results) != len(docs):
            raise RuntimeError(
                f"{self.name}: filter_batch returned {len(results)} results "
                f"for {len(docs)} documents"
            )
        kept = []
        for doc, n_chars, result in zip(docs, chars_in, results, strict=True):
            if self._account(doc, n_chars, result) is not None:
                kept.append(doc)
        self.counts.cpu_seconds += time.process_time() - started
        return kept

    def _account(self, doc: Document, chars_in: int, result: FilterResult) -> Document | None:
        counts = self.counts
        counts.docs_in += 1
        counts.chars_in += chars_in
        keep, reason = (result, self.name) if isinstance(result, bool) else result
        if keep:
            counts.docs_out += 1
            counts.chars_out += len(doc.text)
            return doc
        counts.dropped_by_reason[reason] = counts.dropped_by_reason.get(reason, 0) + 1
        if self.exclusion_sink is not None:
            snippet = doc.text[:SNIPPET_CHARS]
            if isinstance(snippet, bytes):
                snippet = snippet.decode("utf-8", errors="replace")
            self.exclusion_sink(DroppedDocument(doc.id, doc.source, self.name, reason, snippet))
        return None

    def run(self, docs: Iterable[Document]) -> Iterable[Document]:
        """Stream documents through this filter alone."""
        for doc in docs:
            if self.process(doc) is not None:
                yield doc


class DocumentTransform(DocumentFilter):
    """A step that rewrites text (normalisation, PII redaction).

    Subclasses implement `transform`, returning the new text, or `(None, reason)` when the
    document cannot be rewritten and must be dropped. Documents whose text changed are counted
    in `counts.events["documents_changed"]`.
    """

    name: ClassVar[str] = "transform"

    @abstractmethod
    def transform(self, doc: Document) -> str | tuple[None, str]:
        """The rewritten text of `doc`, or `(None, reason)` to drop it."""

    def filter(self, doc: Document) -> FilterResult:
        new_text = self.transform(doc)
        if isinstance(new_text, tuple):
            return False, new_text[1]
        if new_text != doc.text:
            self.counts.add_event("documents_changed")
            doc.text = new_text
        return True
