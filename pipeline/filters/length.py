"""Drop documents that are too short or too long, in characters and in whitespace-split words."""

from __future__ import annotations

from dataclasses import dataclass

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentFilter, FilterResult


@dataclass(kw_only=True, slots=True)
class LengthConfig:
    """Settings of `LengthFilter`; a `None` bound is not checked."""

    enabled: bool = True
    "Run this filter."
    min_chars: int | None = 100
    "Fewest characters a document may have."
    max_chars: int | None = 1_000_000
    "Most characters a document may have."
    min_words: int | None = 20
    "Fewest whitespace-separated words."
    max_words: int | None = 200_000
    "Most whitespace-separated words."


class LengthFilter(DocumentFilter):
    name = "length"

    def __init__(self, config: LengthConfig | None = None, exclusion_sink=None) -> None:
        super().__init__(exclusion_sink)
        self.config = config or LengthConfig()

    def filter(self, doc: Document) -> FilterResult:
        cfg = self.config
        n_chars = len(doc.text)
        if cfg.min_chars is not None and n_chars < cfg.min_chars:
            return False, "length_too_few_chars"
        if cfg.max_chars is not None and n_chars > cfg.max_chars:
            return False, "length_too_many_chars"
        if cfg.min_words is None and cfg.max_words is None:
            return True
        n_words = len(doc.text.split())
        if cfg.min_words is not None and n_words < cfg.min_words:
            return False, "length_too_few_words"
        if cfg.max_words is not None and n_words > cfg.max_words:
            return False, "length_too_many_words"
        return True
