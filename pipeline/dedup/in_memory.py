"""The single-process dedup: every document's hashes in one place (the reference the sharded
steps must agree with, and a quick path for a corpus that fits one process): documents first,
then the lines or paragraphs of the documents kept."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmforge.pipeline.filters.dedup_exact import ExactDeduplicator, resolve_exact_duplicates
from lmforge.pipeline.filters.dedup_paragraph import ParagraphDedupConfig, counted_hashes
from lmforge.pipeline.filters.minhash import MinHashDeduplicator, near_duplicate_clusters
from lmforge.pipeline.sources.data_config import DedupConfig


def in_memory_removals(
    ids: Sequence[str], texts: Sequence[str], cfg: DedupConfig
) -> dict[str, tuple[str, str]]:
    """removed id -> (kept id, kind): exact first, then near among the remaining documents."""
    removed: dict[str, tuple[str, str]] = {}
    if cfg.exact.enabled and ids:
        hasher = ExactDeduplicator(cfg.exact)
        _, exact = resolve_exact_duplicates(
            (i, hasher.text_hash(t)) for i, t in zip(ids, texts, strict=True)
        )
        removed.update({rid: (kid, "exact_duplicate") for rid, kid in exact.items()})
    if cfg.near.enabled and ids:
        keep = np.array([i not in removed for i in ids])
        signatures, bands = MinHashDeduplicator(cfg.near).signatures(list(texts))
        kept_ids = [i for i, k in zip(ids, keep, strict=True) if k]
        near = near_duplicate_clusters(kept_ids, bands[keep], signatures[keep], cfg.near)
        removed.update({rid: (kid, "near_duplicate") for rid, kid in near.items()})
    return removed


def in_memory_paragraph_removals(
    ids: Sequence[str], texts: Sequence[str], cfg: ParagraphDedupConfig
) -> dict[str, set[int]]:
    """document id -> hashes of the units it loses: every unit held by at least `min_docs` of
    the documents given (those the exact and near steps kept) leaves all but the smallest id."""
    holders: dict[int, list[str]] = {}
    for doc_id, text in zip(ids, texts, strict=True):
        for found in counted_hashes(text, cfg):
            holders.setdefault(found, []).append(doc_id)
    removed: dict[str, set[int]] = {}
    for found, docs in holders.items():
        if len(docs) >= cfg.min_docs:
            keeper = min(docs)
            for doc_id in docs:
                if doc_id != keeper:
                    removed.setdefault(doc_id, set()).add(found)
    return removed
