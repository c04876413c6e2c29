"""Offline language identification with lingua: keep documents in the configured languages.

The detector is built lazily, once per process, and shared by every filter instance with the same
settings (it holds the n-gram models in memory). Only the first `max_chars` characters are
classified, which is plenty for a confident decision and bounds the cost of long documents.
Measured on 2 slow cores with ~1000-character pages: about 3,600 documents/s with the default
20 candidate languages and 500 characters, about 300/s with all 75 languages and 1000.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentFilter, FilterResult

# The languages with the most web text, ISO 639-1; the detector chooses among these by default
# (about 6x faster than among all 75 that lingua knows, and enough to tell English from the rest).
COMMON_WEB_LANGUAGES = (
    "en", "de", "fr", "es", "it", "pt", "nl", "ru", "pl", "tr",
    "ar", "zh", "ja", "ko", "hi", "vi", "id", "sv", "cs", "uk",
)  # fmt: skip
_DETECTORS: dict[tuple, object] = {}
_DETECTORS_LOCK = threading.Lock()


@dataclass(kw_only=True, slots=True)
class LanguageConfig:
    """Settings of `LanguageFilter`."""

    enabled: bool = True
    "Run this filter."
    languages: tuple[str, ...] = ("en",)
    "ISO 639-1 codes of the languages to keep."
    min_confidence: float = 0.65
    "Lowest confidence (0-1) of the detected language for a document to be kept."
    candidate_languages: tuple[str, ...] | None = COMMON_WEB_LANGUAGES
    "Languages the detector chooses among (ISO 639-1); None = all 75 that lingua knows."
    low_accuracy: bool = True
    "lingua's low-accuracy mode (trigrams only): several times faster, fine on paragraphs."
    max_chars: int = 500
    "Classify only this many leading characters of each document."


def _iso_codes(codes: tuple[str, ...], key: str) -> list:
    from lingua import IsoCode639_1

    out = []
    for code in codes:
        iso = getattr(IsoCode639_1, str(code).upper(), None)
        if iso is None:
            raise ValueError(f"data.filters.language.{key}: unknown ISO 639-1 code {code!r}")
        out.append(iso)
    return out


def language_detector(config: LanguageConfig):
    """The process-wide lingua detector for these settings, built on first use."""
    key = (config.candidate_languages, config.low_accuracy)
    with _DETECTORS_LOCK:
        detector = _DETECTORS.get(key)
        if detector is None:
            from lingua import LanguageDetectorBuilder

            if config.candidate_languages is None:
                builder = LanguageDetectorBuilder.from_all_languages()
            else:
                codes = _iso_codes(config.candidate_languages, "candidate_languages")
                builder = LanguageDetectorBuilder.from_iso_codes_639_1(*codes)
            if config.low_accuracy:
                builder = builder.with_low_accuracy_mode()
            detector = builder.with_preloaded_language_models().build()
            _DETECTORS[key] = detector
    return detector


class LanguageFilter(DocumentFilter):
    """Keeps documents whose most likely language is configured and confident enough.

    Writes `language` (ISO 639-1) and `language_confidence` into `doc.meta`.
    """

    name = "language"

    def __init__(self, config: LanguageConfig | None = None, exclusion_sink=None) -> None:
        super().__init__(exclusion_sink)
        self.config = config or LanguageConfig()
        self._keep = {code.lower() for code in self.config.languages}
        _iso_codes(self.config.languages, "languages")
        candidates = self.config.candidate_languages
        if candidates is not None:
            missing = self._keep - {c.lower() for c in candidates}
            if missing:
                raise ValueError(
                    f"data.filters.language.candidate_languages must include the kept "
                    f"languages; missing {sorted(missing)}"
                )

    def filter(self, doc: Document) -> FilterResult:
        values = language_detector(self.config).compute_language_confidence_values(
            doc.text[: self.config.max_chars]
        )
        if not values or values[0].value <= 0.0:
            doc.meta["language"] = None
            return False, "language_unknown"
        top = values[0]
        code = top.language.iso_code_639_1.name.lower()
        doc.meta["language"] = code
        doc.meta["language_confidence"] = round(float(top.value), 4)
        if code not in self._keep:
            return False, "language_other"
        if top.value < self.config.min_confidence:
            return False, "language_low_confidence"
        return True
