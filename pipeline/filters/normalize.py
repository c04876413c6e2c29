"""Text normalisation, first step of the chain: decoding, mojibake repair, NFC, control characters
and whitespace.

Bytes that are not valid UTF-8 never crash a run: with `on_invalid_utf8="repair"` each invalid
byte is read as Windows-1252 (falling back to Latin-1), which is what stray non-UTF-8 bytes in
web text almost always are, and ftfy then fixes the result; with `"drop"` the document is dropped
with reason `invalid_utf8`. Both are counted.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

import ftfy

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentTransform

_FALLBACK_ERRORS = "lmforge-cp1252-fallback"
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\ufeff]")
_LINE_BREAK_RE = re.compile(r"\r\n?|[\u2028\u2029\x85]")
# Runs of horizontal whitespace (tabs aside) become one space: only runs that are not already a
# single space match, so the common case costs no replacement.
_SPACE_RUN_RE = re.compile(r"[^\S\n\t]{2,}|[^\S\n\t ]")
_TRAILING_SPACE_RE = re.compile(r"[ \t]+\n")
_BLANK_LINES_RE = re.compile(r"\n{3,}")
# What ftfy may change in ASCII text: HTML entities, carriage returns, control characters (the
# escape of terminal codes among them). An ASCII line without any is left as it is by every fixer.
_FTFY_ASCII_TARGETS_RE = re.compile(r"[&\r\x00-\x08\x0b\x0e-\x1f\x7f]")
_FTFY_CONFIG = ftfy.TextFixerConfig(explain=False, normalization="NFC")


def _cp1252_fallback(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    bad = error.object[error.start : error.end]
    chars = []
    for byte in bad:
        try:
            chars.append(bytes([byte]).decode("cp1252"))
        except UnicodeDecodeError:
            chars.append(chr(byte))  # the five bytes cp1252 leaves undefined
    return "".join(chars), error.end


codecs.register_error(_FALLBACK_ERRORS, _cp1252_fallback)


@dataclass(kw_only=True, slots=True)
class NormalizeConfig:
    """Settings of `TextNormalizer`."""

    enabled: bool = True
    "Run normalisation (switching it off also leaves undecoded bytes to crash later steps)."
    on_invalid_utf8: Literal["repair", "drop"] = "repair"
    "Bytes that are not UTF-8: repair them (Windows-1252 fallback + ftfy) or drop the document."
    fix_mojibake: bool = True
    "Run ftfy's fix_text (mojibake, HTML entities left in text, broken quotes)."
    collapse_blank_lines: bool = True
    "Reduce runs of three or more newlines to one blank line."

    def __post_init__(self) -> None:
        if self.on_invalid_utf8 not in ("repair", "drop"):
            raise ValueError(
                f"data.filters.normalize.on_invalid_utf8 must be 'repair' or 'drop', "
                f"got {self.on_invalid_utf8!r}"
            )


def decode_bytes(raw: bytes) -> tuple[str, bool]:
    """`raw` decoded as UTF-8, stray invalid bytes read as Windows-1252; and whether any were."""
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors=_FALLBACK_ERRORS), True


def _inert(segment: str) -> bool:
    return segment.isascii() and _FTFY_ASCII_TARGETS_RE.search(segment) is None


def repair_mojibake(text: str) -> str:
    """`ftfy.fix_text(text, normalization="NFC")`, without the cost of the lines it leaves alone.

    ftfy fixes a text line by line (segments of at most `max_decode_length`), and no fixer
    changes an ASCII line free of `&`, `\\r` and control characters; so those lines are kept as
    they are and the others go through `ftfy.fix_and_explain` as `fix_text` sends them, with its
    rule that a `<` turns HTML unescaping off for the rest of the text.
    """
    if _inert(text):
        return text
    config = _FTFY_CONFIG
    out = []
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos) + 1 or len(text)
        end = min(end, pos + config.max_decode_length)
        segment = text[pos:end]
        if config.unescape_html == "auto" and "<" in segment:
            config = config._replace(unescape_html=False)
        out.append(segment if _inert(segment) else ftfy.fix_and_explain(segment, config)[0])
        pos = end
    return "".join(out)


def normalize_text(
    text: str, *, fix_mojibake: bool = True, collapse_blank_lines: bool = True
) -> str:
    """Mojibake repaired, NFC, no control characters but `\\n` and `\\t`, tidy whitespace."""
    if fix_mojibake:
        text = repair_mojibake(text)
    ascii_text = text.isascii()
    if not ascii_text or "\r" in text:
        text = _LINE_BREAK_RE.sub("\n", text)
    text = _CONTROL_RE.sub("", text)
    if not ascii_text or "  " in text:  # ASCII has no other horizontal whitespace left but tabs
        text = _SPACE_RUN_RE.sub(" ", text)
    if " \n" in text or "\t\n" in text:
        text = _TRAILING_SPACE_RE.sub("\n", text)
    if collapse_blank_lines and "\n\n\n" in text:
        text = _BLANK_LINES_RE.sub("\n\n", text)
    text = text.strip()
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text


class TextNormalizer(DocumentTransform):
    """Decodes raw bytes and normalises text; counts `invalid_utf8_repaired` in its events."""

    name = "normalize"

    def __init__(self, config: NormalizeConfig | None = None, exclusion_sink=None) -> None:
        super().__init__(exclusion_sink)
        self.config = config or NormalizeConfig()

    def transform(self, doc: Document) -> str | tuple[None, str]:
        text = doc.text
        if isinstance(text, bytes | bytearray):
            text, had_invalid = decode_bytes(bytes(text))
            if had_invalid:
                if self.config.on_invalid_utf8 == "drop":
                    return None, "invalid_utf8"
                self.counts.add_event("invalid_utf8_repaired")
        return normalize_text(
            text,
            fix_mojibake=self.config.fix_mojibake,
            collapse_blank_lines=self.config.collapse_blank_lines,
        )
