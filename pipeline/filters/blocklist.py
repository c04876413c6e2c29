"""Drop documents containing words from a blocklist file (C4's "bad words" rule).

The file holds one word or phrase per line (`#` starts a comment); matching is case-insensitive
and on word boundaries, so "Scunthorpe" does not match "cunt". The default list ships as
`conf/data/blocklist.txt` inside the package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentFilter, FilterResult


@dataclass(kw_only=True, slots=True)
class BlocklistConfig:
    """Settings of `BlocklistFilter`."""

    enabled: bool = True
    "Run this filter."
    path: str | None = None
    "Word list file; None = the default shipped as lmforge/conf/data/blocklist.txt."
    min_matches: int = 1
    "Drop a document once it holds this many blocklisted words (counting repeats)."


def default_blocklist_path() -> Path:
    return Path(str(resources.files("lmforge.conf") / "data" / "blocklist.txt"))


def load_blocklist(path: str | Path) -> list[str]:
    """The entries of a blocklist file, lower-cased, without comments or blank lines."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"blocklist file {path} not found: fix data.filters.blocklist.path "
            f"or set data.filters.blocklist.enabled=false"
        )
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = line.split("#", 1)[0].strip().lower()
        if entry:
            entries.append(entry)
    return entries


def blocklist_pattern(entries: list[str]) -> re.Pattern | None:
    """One regex matching any entry on word boundaries (longest entries first)."""
    if not entries:
        return None
    alternatives = "|".join(re.escape(e) for e in sorted(set(entries), key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


class BlocklistFilter(DocumentFilter):
    name = "blocklist"

    def __init__(self, config: BlocklistConfig | None = None, exclusion_sink=None) -> None:
        super().__init__(exclusion_sink)
        self.config = config or BlocklistConfig()
        path = self.config.path or default_blocklist_path()
        self.words = load_blocklist(path)
        self._pattern = blocklist_pattern(self.words)

    def filter(self, doc: Document) -> FilterResult:
        if self._pattern is None:
            return True
        needed = self.config.min_matches
        for found, _ in enumerate(self._pattern.finditer(doc.text), start=1):
            if found >= needed:
                return False, "blocklist_word"
        return True
