"""The unit every cleaning step reads and writes: one document with its id, text and origin."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Document:
    """One document flowing through the `clean` stage.

    `text` is a `str` everywhere except at the very start of a chain: a reader that cannot
    decode a file may hand the raw `bytes` over, and `TextNormalizer` (first in the default
    chain) decodes, repairs or drops them.
    """

    id: str
    "Stable identifier, unique across all sources (used to record what was dropped or merged)."
    text: str
    "The document's text."
    source: str = ""
    "Where the document came from (file path, dataset name)."
    meta: dict = field(default_factory=dict)
    "Free-form annotations added by filters (e.g. detected language and its confidence)."
