"""Gopher quality rules (Rae et al. 2021, "Scaling Language Models", appendix A.1.1).

A document is dropped when its word count or mean word length is out of range, when `#` or
ellipses are too frequent relative to words, when nearly all lines are bullets or many lines end
in an ellipsis, when too few words contain a letter, or when it lacks common English stop words.
Words come from the shared split (`words.text_tokens`, done once per text for both Gopher
filters); punctuation tokens count in the ratios' denominators but not as words for the length
statistics, as in the reference rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentFilter, FilterResult
from lmforge.pipeline.filters.words import text_tokens

GOPHER_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")


@dataclass(kw_only=True, slots=True)
class GopherQualityConfig:
    """Settings of `GopherQualityFilter`; a `None` threshold switches that rule off."""

    enabled: bool = True
    "Run this filter."
    min_words: int | None = 50
    "Fewest words (punctuation tokens excluded)."
    max_words: int | None = 100_000
    "Most words."
    min_mean_word_length: float | None = 3.0
    "Shortest allowed mean word length, in characters."
    max_mean_word_length: float | None = 10.0
    "Longest allowed mean word length, in characters."
    max_symbol_word_ratio: float | None = 0.1
    "Most `#` (and, separately, ellipses) per token."
    max_bullet_lines_ratio: float | None = 0.9
    "Largest share of lines that may start with a bullet."
    max_ellipsis_lines_ratio: float | None = 0.3
    "Largest share of lines that may end with an ellipsis."
    min_alpha_words_ratio: float | None = 0.8
    "Smallest share of tokens that must contain an alphabetic character."
    min_stop_words: int | None = 2
    "Fewest distinct stop words that must occur."
    stop_words: tuple[str, ...] = GOPHER_STOP_WORDS
    "The stop words (compared lower-cased)."
    bullet_prefixes: tuple[str, ...] = ("•", "-", "*")
    "Line prefixes counted as bullets."


class GopherQualityFilter(DocumentFilter):
    name = "gopher_quality"

    def __init__(self, config: GopherQualityConfig | None = None, exclusion_sink=None) -> None:
        super().__init__(exclusion_sink)
        self.config = config or GopherQualityConfig()
        self._stop_words = frozenset(w.lower() for w in self.config.stop_words)
        self._stop_max_len = max((len(w) for w in self._stop_words), default=0)

    def filter(self, doc: Document) -> FilterResult:
        cfg = self.config
        text = doc.text
        split = text_tokens(text)
        words = split.words
        n_tokens = max(len(split.tokens), 1)
        n_words = len(words)
        if cfg.min_words is not None and n_words < cfg.min_words:
            return False, "gopher_too_few_words"
        if cfg.max_words is not None and n_words > cfg.max_words:
            return False, "gopher_too_many_words"
        mean_length = sum(map(len, words)) / max(n_words, 1)
        if cfg.min_mean_word_length is not None and mean_length < cfg.min_mean_word_length:
            return False, "gopher_short_mean_word_length"
        if cfg.max_mean_word_length is not None and mean_length > cfg.max_mean_word_length:
            return False, "gopher_long_mean_word_length"
        if cfg.max_symbol_word_ratio is not None:
            if text.count("#") / n_tokens > cfg.max_symbol_word_ratio:
                return False, "gopher_too_many_hashes"
            if (text.count("...") + text.count("…")) / n_tokens > cfg.max_symbol_word_ratio:
                return False, "gopher_too_many_ellipses"
        reason = self._line_rules(text)
        if reason:
            return False, reason
        alpha = cfg.min_alpha_words_ratio
        if alpha is not None and split.n_alpha_words / n_tokens < alpha:
            return False, "gopher_too_few_alpha_words"
        if cfg.min_stop_words is not None:
            limit = self._stop_max_len
            present = {w.lower() for w in set(words) if len(w) <= limit} & self._stop_words
            if len(present) < cfg.min_stop_words:
                return False, "gopher_too_few_stop_words"
        return True

    def _line_rules(self, text: str) -> str | None:
        cfg = self.config
        if cfg.max_bullet_lines_ratio is None and cfg.max_ellipsis_lines_ratio is None:
            return None
        lines = text.splitlines() or [""]
        if cfg.max_bullet_lines_ratio is not None:
            bullets = sum(1 for line in lines if line.lstrip().startswith(cfg.bullet_prefixes))
            if bullets / len(lines) > cfg.max_bullet_lines_ratio:
                return "gopher_too_many_bullet_lines"
        if cfg.max_ellipsis_lines_ratio is not None:
            ellipses = sum(1 for line in lines if line.rstrip().endswith(("...", "…")))
            if ellipses / len(lines) > cfg.max_ellipsis_lines_ratio:
                return "gopher_too_many_ellipsis_lines"
        return None
