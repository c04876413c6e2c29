"""The default cleaning chain: its typed config (`data.filters`), how it is built and run.

Order: normalize, length, language, gopher_quality, gopher_repetition, c4, blocklist, toxicity,
pii. Every step has an `enabled` switch; a disabled step is simply left out of the chain.
Deduplication is global and runs after the chain (see `dedup_exact` and `minhash`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentFilter, ExclusionSink, FilterCounts
from lmforge.pipeline.filters.blocklist import BlocklistConfig, BlocklistFilter
from lmforge.pipeline.filters.c4 import C4Config, C4Filter
from lmforge.pipeline.filters.gopher_quality import GopherQualityConfig, GopherQualityFilter
from lmforge.pipeline.filters.gopher_repetition import (
    GopherRepetitionConfig,
    GopherRepetitionFilter,
)
from lmforge.pipeline.filters.language import LanguageConfig, LanguageFilter
from lmforge.pipeline.filters.length import LengthConfig, LengthFilter
from lmforge.pipeline.filters.normalize import NormalizeConfig, TextNormalizer
from lmforge.pipeline.filters.pii import PIIConfig, PIIRedactor
from lmforge.pipeline.filters.toxicity import ToxicityConfig, ToxicityFilter
from lmforge.pipeline.typed_config import config_to_dict, from_mapping


@dataclass(kw_only=True, slots=True)
class FilterChainConfig:
    """Settings of every cleaning step, in chain order (config group `data.filters`)."""

    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    "Decoding, mojibake repair, NFC, control characters, whitespace."
    length: LengthConfig = field(default_factory=LengthConfig)
    "Character and word count bounds."
    language: LanguageConfig = field(default_factory=LanguageConfig)
    "Offline language identification."
    gopher_quality: GopherQualityConfig = field(default_factory=GopherQualityConfig)
    "Gopher quality rules."
    gopher_repetition: GopherRepetitionConfig = field(default_factory=GopherRepetitionConfig)
    "Gopher repetition rules."
    c4: C4Config = field(default_factory=C4Config)
    "C4 line and boilerplate rules."
    blocklist: BlocklistConfig = field(default_factory=BlocklistConfig)
    "Word blocklist."
    toxicity: ToxicityConfig = field(default_factory=ToxicityConfig)
    "Toxicity classifier."
    pii: PIIConfig = field(default_factory=PIIConfig)
    "PII redaction."

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "data.filters") -> FilterChainConfig:
        """Build from a plain dict; raises ValueError naming any unknown key."""
        return from_mapping(cls, d, where)

    def to_dict(self) -> dict:
        return config_to_dict(self)


_STEPS = (
    ("normalize", TextNormalizer),
    ("length", LengthFilter),
    ("language", LanguageFilter),
    ("gopher_quality", GopherQualityFilter),
    ("gopher_repetition", GopherRepetitionFilter),
    ("c4", C4Filter),
    ("blocklist", BlocklistFilter),
    ("toxicity", ToxicityFilter),
    ("pii", PIIRedactor),
)


def build_filter_chain(
    cfg: FilterChainConfig, exclusion_sink: ExclusionSink | None = None
) -> list[DocumentFilter]:
    """The enabled steps, in the default order, each with its own config and counts."""
    chain: list[DocumentFilter] = []
    for key, step_class in _STEPS:
        step_config = getattr(cfg, key)
        if step_config.enabled:
            chain.append(step_class(step_config, exclusion_sink=exclusion_sink))
    return chain


def run_chain(
    docs: Iterable[Document], chain: list[DocumentFilter], batch_size: int = 256
) -> Iterator[Document]:
    """Stream documents through every step; yields the survivors in input order.

    Documents move in batches so that batch-friendly steps (toxicity) score many at once; the
    `clean` stage sends each partition (`data.partition_docs`) through as one batch.
    """
    iterator = iter(docs)
    while batch := list(islice(iterator, batch_size)):
        for step in chain:
            batch = step.process_batch(batch)
            if not batch:
                break
        yield from batch


def chain_counts(chain: list[DocumentFilter]) -> dict[str, FilterCounts]:
    """Each step's counts by step name."""
    return {step.name: step.counts for step in chain}


def merge_chain_counts(parts: Iterable[dict[str, FilterCounts]]) -> dict[str, FilterCounts]:
    """Sum per-step counts from several partitions (e.g. the results of Ray tasks)."""
    merged: dict[str, FilterCounts] = {}
    for part in parts:
        for name, counts in part.items():
            merged[name] = (
                merged[name].merge(counts) if name in merged else counts.merge(FilterCounts())
            )
    return merged


def dropped_by_reason(counts: dict[str, FilterCounts]) -> dict[str, int]:
    """All drops of a chain by reason (each step uses its own reason names)."""
    total: dict[str, int] = {}
    for step_counts in counts.values():
        for reason, n in step_counts.dropped_by_reason.items():
            total[reason] = total.get(reason, 0) + n
    return total
