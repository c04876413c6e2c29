"""C4 rules (Raffel et al. 2020, section 2.2): keep only sentence-like lines, drop boilerplate.

Line by line: lines with a word over `max_word_length` characters, without terminal punctuation
(or ending in an ellipsis), with fewer than `min_words_per_line` words, mentioning javascript,
or carrying cookie/terms/privacy-policy boilerplate are removed; a kept line containing
"lorem ipsum" or a curly bracket drops the whole document, as in the reference implementation.
A document left with fewer than `min_sentences` sentences is dropped. Kept lines are joined with
newlines (a blank line where the source had one between them, to keep paragraphs), so the text
of a kept document shrinks to its prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentFilter, FilterResult

_CITATION_RE = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]", re.IGNORECASE)
_SENTENCE_END_RE = re.compile(r"[.!?]+[\"')\]]*(?=\s|$)")
TERMINAL_PUNCTUATION = (".", "?", "!", '"', "'")
POLICY_PHRASES = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)


@dataclass(kw_only=True, slots=True)
class C4Config:
    """Settings of `C4Filter`; a `None` limit switches that rule off."""

    enabled: bool = True
    "Run this filter."
    remove_citations: bool = True
    "Strip Wikipedia-style citation marks ([1], [edit], [citation needed]) from lines."
    drop_lines_without_terminal_punct: bool = True
    "Remove lines that do not end in . ? ! or a quote (or that end in an ellipsis)."
    min_words_per_line: int | None = 3
    "Remove lines with fewer words."
    max_word_length: int | None = 1000
    "Remove lines holding a longer word (characters)."
    min_sentences: int | None = 5
    "Drop documents with fewer sentences left after line removal."
    drop_lorem_ipsum: bool = True
    "Drop documents with 'lorem ipsum' in a kept line."
    drop_curly_bracket: bool = True
    "Drop documents with '{' in a kept line (code, templates)."
    drop_javascript_lines: bool = True
    "Remove lines mentioning javascript."
    drop_policy_lines: bool = True
    "Remove lines with cookie/terms/privacy-policy boilerplate."
    policy_phrases: tuple[str, ...] = POLICY_PHRASES
    "Lower-case phrases marking a boilerplate line."


def count_sentences(line: str) -> int:
    """Sentence ends in a line (at least one for a non-empty line)."""
    return max(len(_SENTENCE_END_RE.findall(line)), 1 if line else 0)


class C4Filter(DocumentFilter):
    name = "c4"

    def __init__(self, config: C4Config | None = None, exclusion_sink=None) -> None:
        super().__init__(exclusion_sink)
        self.config = config or C4Config()

    def filter(self, doc: Document) -> FilterResult:
        cfg = self.config
        kept: list[str] = []
        n_sentences = 0
        paragraph_break = False
        for raw_line in doc.text.splitlines():
            line = raw_line.strip()
            if not line:
                paragraph_break = bool(kept)
                continue
            reason = self._line_drop_reason(line)
            if reason is None:
                if cfg.remove_citations:
                    line = _CITATION_RE.sub("", line)
                reason = self._line_content_reason(line)
            if reason is None:
                kept.append("\n" + line if paragraph_break else line)
                paragraph_break = False
                n_sentences += count_sentences(line)
            elif reason in ("c4_lorem_ipsum", "c4_curly_bracket"):
                return False, reason
            else:
                self.counts.add_event(reason)
        if cfg.min_sentences is not None and n_sentences < cfg.min_sentences:
            return False, "c4_too_few_sentences"
        doc.text = "\n".join(kept)
        return True

    def _line_drop_reason(self, line: str) -> str | None:
        """Checks on the line as written: long words and word count."""
        cfg = self.config
        words = line.split()
        if cfg.max_word_length is not None and any(len(w) > cfg.max_word_length for w in words):
            return "c4_line_long_word"
        if cfg.min_words_per_line is not None and len(words) < cfg.min_words_per_line:
            return "c4_line_too_few_words"
        return None

    def _line_content_reason(self, line: str) -> str | None:
        """Checks on the line once citations are gone, in the reference order."""
        cfg = self.config
        if cfg.drop_lines_without_terminal_punct and (
            not line.endswith(TERMINAL_PUNCTUATION) or line.endswith("...")
        ):
            return "c4_line_no_terminal_punct"
        lower = line.lower()
        if cfg.drop_lorem_ipsum and "lorem ipsum" in lower:
            return "c4_lorem_ipsum"
        if cfg.drop_javascript_lines and "javascript" in lower:
            return "c4_line_javascript"
        if cfg.drop_curly_bracket and "{" in line:
            return "c4_curly_bracket"
        if cfg.drop_policy_lines and any(p in lower for p in cfg.policy_phrases):
            return "c4_line_policy"
        return None
