"""Gopher repetition rules (Rae et al. 2021, table A1): repeated lines, paragraphs and n-grams.

Dropped when the share of duplicate lines/paragraphs (by count or by characters) is too high,
when the most frequent repeated 2-, 3- or 4-gram covers too many characters, or when the
repeated occurrences of 5- to 10-grams cover too many characters. An occurrence counts as a
duplicate when the same n-gram appeared earlier; characters are counted once even where
duplicate n-grams overlap. N-grams are compared through 64-bit hashes of token ids in numpy,
which keeps the cost per document low.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from lmforge.pipeline.filters.base import DocumentFilter, FilterResult
from lmforge.pipeline.filters.document import Document
from lmforge.pipeline.filters.words import split_tokens

_PARAGRAPH_RE = re.compile(r"\n{2,}")
_LINE_RE = re.compile(r"\n+")
_MIX = np.uint64(0x9E3779B97F4A7C15)
_STEP = np.uint64(0xBF58476D1CE4E5B9)


@dataclass(kw_only=True, slots=True)
class GopherRepetitionConfig:
    """Settings of `GopherRepetitionFilter`; a `None` threshold switches that rule off."""

    enabled: bool = True
    "Run this filter."
    max_dup_line_frac: float | None = 0.30
    "Largest share of lines that repeat an earlier line."
    max_dup_para_frac: float | None = 0.30
    "Largest share of paragraphs that repeat an earlier paragraph."
    max_dup_line_char_frac: float | None = 0.20
    "Largest share of characters in repeated lines."
    max_dup_para_char_frac: float | None = 0.20
    "Largest share of characters in repeated paragraphs."
    top_ngram_max_char_frac: tuple[tuple[int, float], ...] = ((2, 0.20), (3, 0.18), (4, 0.16))
    "(n, limit): largest share of characters in the most frequent repeated n-gram."
    dup_ngram_max_char_frac: tuple[tuple[int, float], ...] = (
        (5, 0.15),
        (6, 0.14),
        (7, 0.13),
        (8, 0.12),
        (9, 0.11),
        (10, 0.10),
    )
    "(n, limit): largest share of characters covered by repeated n-gram occurrences."


def duplicate_elements(elements: list[str]) -> tuple[int, int]:
    """How many elements repeat an earlier one, and how many characters those repeats hold."""
    seen: set[str] = set()
    n_dup = n_chars = 0
    for element in elements:
        if element in seen:
            n_dup += 1
            n_chars += len(element)
        else:
            seen.add(element)
    return n_dup, n_chars


class _NgramIndex:
    """Token-id n-gram hashes of one document, built incrementally for growing n."""

    def __init__(self, tokens: tuple[str, ...]) -> None:
        vocab: dict[str, int] = {}
        ids = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for t in tokens), dtype=np.uint64, count=len(tokens)
        )
        self.token_hash = (ids + np.uint64(1)) * _MIX
        lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        self.lengths = lengths
        self.char_prefix = np.concatenate(([0], np.cumsum(lengths)))
        self._n = 1
        self._hashes = self.token_hash

    def hashes(self, n: int) -> np.ndarray:
        """Hashes of every n-gram (cheapest when n grows between calls)."""
        if n < self._n:
            self._n, self._hashes = 1, self.token_hash
        while self._n < n:
            self._n += 1
            prev = self._hashes[:-1]
            self._hashes = ((prev ^ (prev >> np.uint64(31))) * _STEP) ^ self.token_hash[
                self._n - 1 :
            ]
        return self._hashes

    def ngram_chars(self, n: int) -> np.ndarray:
        """Characters (without separators) of every n-gram."""
        return self.char_prefix[n:] - self.char_prefix[:-n]


def top_ngram_chars(index: _NgramIndex, n: int) -> int:
    """Characters (words + spaces) times occurrences of the most frequent repeated n-gram."""
    hashes = index.hashes(n)
    if hashes.size < 2:
        return 0
    _, first, counts = np.unique(hashes, return_index=True, return_counts=True)
    top = counts.max()
    if top < 2:
        return 0
    position = first[counts == top].min()
    return int((index.ngram_chars(n)[position] + n - 1) * top)


def duplicate_ngram_chars(index: _NgramIndex, n: int) -> int:
    """Characters covered by n-gram occurrences whose n-gram appeared earlier."""
    hashes = index.hashes(n)
    if hashes.size < 2:
        return 0
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    starts = np.flatnonzero(first[inverse] < np.arange(hashes.size))
    if starts.size == 0:
        return 0
    n_tokens = index.lengths.size
    depth = np.bincount(starts, minlength=n_tokens + 1) - np.bincount(
        starts + n, minlength=n_tokens + 1
    )
    covered = np.cumsum(depth[:n_tokens]) > 0
    return int(index.lengths[covered].sum())


class GopherRepetitionFilter(DocumentFilter):
    name = "gopher_repetition"

    def __init__(self, config: GopherRepetitionConfig | None = None, exclusion_sink=None) -> None:
        super().__init__(exclusion_sink)
        self.config = config or GopherRepetitionConfig()
        self._top = sorted(self.config.top_ngram_max_char_frac)
        self._dup = sorted(self.config.dup_ngram_max_char_frac)

    def filter(self, doc: Document) -> FilterResult:
        text = doc.text
        n_chars = max(len(text), 1)
        reason = self._block_rules(text, n_chars)
        if reason:
            return False, reason
        if not self._top and not self._dup:
            return True
        index = _NgramIndex(split_tokens(text))
        for n, limit in self._top:
            if top_ngram_chars(index, n) / n_chars > limit:
                return False, f"gopher_top_{n}_gram"
        for n, limit in self._dup:
            if duplicate_ngram_chars(index, n) / n_chars > limit:
                return False, f"gopher_duplicated_{n}_grams"
        return True

    def _block_rules(self, text: str, n_chars: int) -> str | None:
        cfg = self.config
        paragraphs = _PARAGRAPH_RE.split(text.strip())
        n_dup, dup_chars = duplicate_elements(paragraphs)
        if cfg.max_dup_para_frac is not None and n_dup / len(paragraphs) > cfg.max_dup_para_frac:
            return "gopher_dup_para_frac"
        if (
            cfg.max_dup_para_char_frac is not None
            and dup_chars / n_chars > cfg.max_dup_para_char_frac
        ):
            return "gopher_dup_para_char_frac"
        lines = _LINE_RE.split(text)
        n_dup, dup_chars = duplicate_elements(lines)
        if cfg.max_dup_line_frac is not None and n_dup / len(lines) > cfg.max_dup_line_frac:
            return "gopher_dup_line_frac"
        if (
            cfg.max_dup_line_char_frac is not None
            and dup_chars / n_chars > cfg.max_dup_line_char_frac
        ):
            return "gopher_dup_line_char_frac"
        return None
