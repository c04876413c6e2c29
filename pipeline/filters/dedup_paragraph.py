"""Paragraph (or line) deduplication across documents: what a unit is, how it is normalised and
hashed, and how a document loses the units found elsewhere.

A document is cut into units (lines, or paragraphs between blank lines). Each unit is normalised
as CCNet does (lowercase, every digit to 0, whitespace runs collapsed, punctuation at both ends
stripped), so "Last updated on October 7." and "Last updated on October 9" are one unit, and
hashed with a 64-bit xxhash. A unit found in at least `min_docs` documents is removed from every
one of them but the document with the smallest id; a unit shorter than `min_chars` once
normalised (a lone `}`, a `*`) never counts. The global count runs sharded by hash range
(`pipeline/dedup/paragraph.py`); `pipeline/dedup/in_memory.py` holds the single-process
reference.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Literal

import numpy as np
import xxhash

from lmforge.pipeline.typed_config import from_mapping

_DIGIT_RE = re.compile(r"\d")
_PARAGRAPH_BREAK_RE = re.compile(r"\n[^\S\n]*\n\s*")
END_PUNCTUATION = string.punctuation + string.whitespace + "…–—‘’“”«»·•‹›¡¿、。，；：！？"
"""What is stripped from both ends of a normalised unit."""


@dataclass(kw_only=True, slots=True)
class ParagraphDedupConfig:
    """Settings of paragraph deduplication (config `data.dedup.paragraph`)."""

    enabled: bool = True
    "Remove lines or paragraphs repeated across documents (boilerplate, navigation, footers)."
    unit: Literal["line", "paragraph"] = "line"
    "What is compared: each line, or each paragraph (text between blank lines)."
    min_docs: int = 3
    "A unit found in at least this many documents is kept only in the one with the smallest id."
    min_chars: int = 10
    "Units shorter than this once normalised never count as duplicates."
    units_per_task: int = 4_000_000
    "Unit hashes a counting task holds (about 50 bytes each at its peak): its memory."

    def __post_init__(self) -> None:
        if self.min_docs < 2:
            raise ValueError(f"data.dedup.paragraph.min_docs must be >= 2, got {self.min_docs}")
        if self.units_per_task <= 0:
            raise ValueError("data.dedup.paragraph.units_per_task must be > 0")

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "data.dedup.paragraph") -> ParagraphDedupConfig:
        return from_mapping(cls, d, where)


def split_units(text: str, unit: str) -> list[str]:
    """The units of `text` in order: its lines, or its paragraphs (blank lines between)."""
    return text.split("\n") if unit == "line" else _PARAGRAPH_BREAK_RE.split(text)


def normalize_unit(piece: str) -> str:
    """CCNet's form of a unit: lowercase, digits to 0, whitespace collapsed, ends stripped of
    punctuation and space."""
    return " ".join(_DIGIT_RE.sub("0", piece.lower()).split()).strip(END_PUNCTUATION)


def normalized_units(text: str, unit: str) -> list[str]:
    """`normalize_unit` of each of `split_units(text, unit)`, the whole text lowercased and its
    digits replaced at once (a third of the time of doing it unit by unit; neither changes
    where a line or a paragraph ends)."""
    pieces = split_units(_DIGIT_RE.sub("0", text.lower()), unit)
    return [" ".join(piece.split()).strip(END_PUNCTUATION) for piece in pieces]


def unit_hash(normal: str) -> int:
    return xxhash.xxh3_64_intdigest(normal.encode("utf-8", errors="surrogateescape"))


def counted_hashes(text: str, cfg: ParagraphDedupConfig) -> list[int]:
    """The distinct hashes of the units of `text` that count, ascending (a unit repeated inside
    one document counts once: documents are counted, not occurrences)."""
    return sorted(
        {unit_hash(n) for n in normalized_units(text, cfg.unit) if len(n) >= cfg.min_chars}
    )


def unit_hashes_of_batch(
    texts: list[str], cfg: ParagraphDedupConfig
) -> tuple[np.ndarray, np.ndarray]:
    """(hashes, row in `texts`) of every counted unit of a batch of documents."""
    hashes: list[int] = []
    rows: list[int] = []
    for row, text in enumerate(texts):
        found = counted_hashes(text, cfg)
        hashes += found
        rows += [row] * len(found)
    return np.array(hashes, dtype=np.uint64), np.array(rows, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class RemovedUnit:
    """One unit taken out of a document."""

    hash: int
    text: str
    "The unit as it stood in the document."


def remove_units(
    text: str, hashes: set[int], cfg: ParagraphDedupConfig
) -> tuple[str, list[RemovedUnit]]:
    """`text` without its units whose hash is in `hashes` (every occurrence), and what was
    removed. Lines are joined back with a newline, paragraphs with a blank line."""
    pieces = split_units(text, cfg.unit)
    normals = normalized_units(text, cfg.unit)
    if len(normals) != len(pieces):  # never seen; the unit-by-unit form is the definition
        normals = [normalize_unit(piece) for piece in pieces]
    kept: list[str] = []
    removed: list[RemovedUnit] = []
    for piece, normal in zip(pieces, normals, strict=True):
        if len(normal) >= cfg.min_chars and (found := unit_hash(normal)) in hashes:
            removed.append(RemovedUnit(found, piece))
        else:
            kept.append(piece)
    if not removed:
        return text, removed
    return ("\n" if cfg.unit == "line" else "\n\n").join(kept).strip("\n"), removed
