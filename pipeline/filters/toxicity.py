"""Offline toxicity classifier (alt-profanity-check's linear model) with a threshold.

The classifier scores bag-of-words text, so one toxic passage is diluted in a long document;
documents are therefore cut into chunks of about `chunk_chars` characters (on line breaks where
possible) and scored by their most toxic chunk. Scoring is batched: `filter_batch` sends every
chunk of a batch of documents to the model in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentFilter, FilterResult


@dataclass(kw_only=True, slots=True)
class ToxicityConfig:
    """Settings of `ToxicityFilter`."""

    enabled: bool = True
    "Run this filter."
    threshold: float = 0.9
    "Drop documents whose most toxic chunk scores at least this probability."
    chunk_chars: int = 1000
    "Approximate size of the chunks scored separately."


def split_chunks(text: str, chunk_chars: int) -> list[str]:
    """`text` cut into pieces of about `chunk_chars` characters, on newlines where possible."""
    if len(text) <= chunk_chars:
        return [text]
    chunks = []
    start = 0
    while start < len(text):
        end = min(start + chunk_chars, len(text))
        if end < len(text):
            cut = text.rfind("\n", start + chunk_chars // 2, end)
            if cut == -1:
                cut = text.rfind(" ", start + chunk_chars // 2, end)
            if cut != -1:
                end = cut + 1
        chunks.append(text[start:end])
        start = end
    return chunks


def toxicity_scores(texts: list[str], chunk_chars: int) -> list[float]:
    """The probability of the most toxic chunk of each text."""
    from profanity_check import predict_prob

    chunks: list[str] = []
    owners: list[int] = []
    for i, text in enumerate(texts):
        pieces = split_chunks(text, chunk_chars)
        chunks.extend(pieces)
        owners.extend([i] * len(pieces))
    scores = [0.0] * len(texts)
    if not chunks:
        return scores
    for owner, prob in zip(owners, predict_prob(chunks), strict=True):
        scores[owner] = max(scores[owner], float(prob))
    return scores


class ToxicityFilter(DocumentFilter):
    """Drops documents scored toxic; writes the score into `doc.meta["toxicity"]`."""

    name = "toxicity"

    def __init__(self, config: ToxicityConfig | None = None, exclusion_sink=None) -> None:
        super().__init__(exclusion_sink)
        self.config = config or ToxicityConfig()
        if not 0.0 <= self.config.threshold <= 1.0:
            raise ValueError(
                f"data.filters.toxicity.threshold must be in [0, 1], got {self.config.threshold}"
            )

    def filter(self, doc: Document) -> FilterResult:
        return self.filter_batch([doc])[0]

    def filter_batch(self, docs: list[Document]) -> list[FilterResult]:
        scores = toxicity_scores([doc.text for doc in docs], self.config.chunk_chars)
        results: list[FilterResult] = []
        for doc, score in zip(docs, scores, strict=True):
            doc.meta["toxicity"] = round(score, 4)
            results.append(True if score < self.config.threshold else (False, "toxicity"))
        return results
