"""Corpus cleaning for the `clean` stage: datatrove-shaped filters, their chain, and dedup.

A filter keeps or drops one document with a reason (`base.DocumentFilter`); transforms rewrite
text (`base.DocumentTransform`); every step keeps mergeable `FilterCounts`. `chain.py` builds the
default order from `FilterChainConfig`; `dedup_exact.py` and `minhash.py` provide the global
deduplication that the stage runs across partitions. Heavy models (lingua, the toxicity
classifier) load only when their filter first runs.
"""

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import (
    DocumentFilter,
    DocumentTransform,
    DroppedDocument,
    FilterCounts,
)
from lmforge.pipeline.filters.chain import (
    FilterChainConfig,
    build_filter_chain,
    chain_counts,
    dropped_by_reason,
    merge_chain_counts,
    run_chain,
)
from lmforge.pipeline.filters.dedup_exact import (
    ExactDedupConfig,
    ExactDeduplicator,
    resolve_exact_duplicates,
)
from lmforge.pipeline.filters.minhash import (
    MinHashConfig,
    MinHashDeduplicator,
    index_bytes_per_document,
    lsh_band_keys,
    minhash_signatures,
    near_duplicate_clusters,
)

__all__ = [
    "Document",
    "DocumentFilter",
    "DocumentTransform",
    "DroppedDocument",
    "ExactDedupConfig",
    "ExactDeduplicator",
    "FilterChainConfig",
    "FilterCounts",
    "MinHashConfig",
    "MinHashDeduplicator",
    "build_filter_chain",
    "chain_counts",
    "dropped_by_reason",
    "index_bytes_per_document",
    "lsh_band_keys",
    "merge_chain_counts",
    "minhash_signatures",
    "near_duplicate_clusters",
    "resolve_exact_duplicates",
    "run_chain",
]
