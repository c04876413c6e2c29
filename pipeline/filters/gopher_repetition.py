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

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentFilter, FilterResult
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
    prefix repeats too), so after each n only the positions of its repeated n-grams are kept,
    hashed on to n + 1 and sorted: far fewer than all positions in ordinary text.
    """

    def __init__(self, tokens: tuple[str, ...]) -> None:
        distinct = dict.fromkeys(tokens)  # numbered in order of first occurrence
        number = dict(zip(distinct, range(len(distinct)), strict=True))
        ids = np.fromiter(map(number.__getitem__, tokens), dtype=np.uint64, count=len(tokens))
        self.token_hash = (ids + np.uint64(1)) * _MIX
        self.lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        self.char_prefix = np.concatenate(([0], np.cumsum(self.lengths)))
        self._start_over()

    def _start_over(self) -> None:
        self._n = 1
        self._positions = np.arange(self.lengths.size)  # where a repeated n-gram may start
        self._hashes = self.token_hash  # the n-grams' hashes there

    def _grouped(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Start positions of the n-grams that may repeat, sorted by (n-gram, position), and
        which of them begins a run of equal n-grams; keeps the repeated ones for the next n."""
        if n < self._n:
            self._start_over()
        size = self.lengths.size
        while self._n < n:
            room = self._positions + self._n < size
            positions, prev = self._positions[room], self._hashes[room]
            mixed = ((prev ^ (prev >> np.uint64(31))) * _STEP) ^ self.token_hash[
                positions + self._n
            ]
            self._positions, self._hashes, self._n = positions, mixed, self._n + 1
        if self._positions.size < 2:  # nothing repeats, at this n or any longer one
            self._positions, self._hashes = self._positions[:0], self._hashes[:0]
            return self._positions, np.ones(0, dtype=bool)
        order = np.argsort(self._hashes, kind="stable")
        sorted_hashes = self._hashes[order]
        new_run = np.empty(order.size, dtype=bool)
        new_run[:1] = True
        np.not_equal(sorted_hashes[1:], sorted_hashes[:-1], out=new_run[1:])
        repeated = ~new_run
        repeated[:-1] |= ~new_run[1:]
        positions = self._positions[order]
        keep = np.sort(order[repeated])
        self._positions, self._hashes = self._positions[keep], self._hashes[keep]
        return positions, new_run

    def top_chars(self, n: int) -> int:
        """Characters (words + spaces) times occurrences of the most frequent repeated n-gram
        (the first to occur among equally frequent ones)."""
        positions, new_run = self._grouped(n)
        runs = np.flatnonzero(new_run)
        if runs.size == positions.size:
            return 0
        counts = np.concatenate((runs[1:], [positions.size])) - runs
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
