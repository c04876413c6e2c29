"""Gopher repetition rules (Rae et al. 2021, table A1): repeated lines, paragraphs and n-grams.

Dropped when the share of duplicate lines/paragraphs (by count or by characters) is too high,
when the most frequent repeated 2-, 3- or 4-gram covers too many characters, or when the
repeated occurrences of 5- to 10-grams cover too many characters. An occurrence counts as a
duplicate when the same n-gram appeared earlier; characters are counted once even where
duplicate n-grams overlap. N-grams are compared through 64-bit hashes of token ids in numpy, and
each longer n only looks where the shorter one repeated, which keeps the cost per document low.
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


class NgramIndex:
    """Token n-grams of one document as 64-bit hashes, asked for growing n.

    Only a position that starts an n-gram seen twice can start a repeated longer n-gram (whose
    prefix repeats too), so each n after the first sorts the positions of the last n's repeated
    n-grams alone: far fewer than all of them in ordinary text.
    """

    def __init__(self, tokens: tuple[str, ...]) -> None:
        distinct = dict.fromkeys(tokens)  # numbered in order of first occurrence
        number = dict(zip(distinct, range(len(distinct)), strict=True))
        ids = np.fromiter(map(number.__getitem__, tokens), dtype=np.uint64, count=len(tokens))
        self.token_hash = (ids + np.uint64(1)) * _MIX
        self.lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        self.char_prefix = np.concatenate(([0], np.cumsum(self.lengths)))
        self._n = 1
        self._hashes = self.token_hash
        self._narrowed_at = 0  # the n whose repeated n-grams' positions `_candidates` holds
        self._candidates = np.arange(len(tokens))

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

    def _grouped(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Start positions of the n-grams that may repeat, sorted by (n-gram, position), and
        which of them begins a run of equal n-grams; keeps the repeated ones for the next n."""
        hashes = self.hashes(n)
        if n < self._narrowed_at:
            self._candidates = np.arange(self.lengths.size)
        candidates = self._candidates[self._candidates < hashes.size]
        positions = candidates[np.argsort(hashes[candidates], kind="stable")]
        sorted_hashes = hashes[positions]
        new_run = np.empty(positions.size, dtype=bool)
        new_run[:1] = True
        np.not_equal(sorted_hashes[1:], sorted_hashes[:-1], out=new_run[1:])
        repeated = ~new_run
        repeated[:-1] |= ~new_run[1:]
        self._candidates, self._narrowed_at = np.sort(positions[repeated]), n
        return positions, new_run

    def top_chars(self, n: int) -> int:
        """Characters (words + spaces) times occurrences of the most frequent repeated n-gram
        (the first to occur among equally frequent ones)."""
        positions, new_run = self._grouped(n)
        runs = np.flatnonzero(new_run)
        if runs.size == positions.size:
            return 0
        counts = np.diff(runs, append=positions.size)
        top = counts.max()
        first = int(positions[runs[counts == top]].min())
        chars = self.char_prefix[first + n] - self.char_prefix[first]
        return int((chars + n - 1) * top)

    def duplicate_chars(self, n: int) -> int:
        """Characters covered by n-gram occurrences whose n-gram appeared earlier (counted once
        where they overlap)."""
        positions, new_run = self._grouped(n)
        starts = positions[~new_run]
        if starts.size == 0:
            return 0
        covered = np.zeros(self.lengths.size, dtype=bool)
        for k in range(n):
            covered[starts + k] = True
        return int(self.lengths[covered].sum())


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
        index = NgramIndex(split_tokens(text))
        for n, limit in self._top:
            if index.top_chars(n) / n_chars > limit:
                return False, f"gopher_top_{n}_gram"
        for n, limit in self._dup:
            if index.duplicate_chars(n) / n_chars > limit:
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
