"""Deduplication across the sources of a mixture: which copy goes, which stays.

Each source was deduplicated on its own by `clean`; what is left are documents of one source
that repeat a document of another. The copy of the earlier-listed source stays: a document is
removed when it shares an exact hash with, or is a verified near duplicate of, a document of a
source listed before its own. Documents are nodes (`index.node_of`: unit << 32 | row) and each
has its source's rank (its position in `data.sources`). The decisions below take arrays of one
key range, so a task over a range holds only that range's keys.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

EMPTY_PAIRS = np.empty((0, 2), dtype=np.int64)
REMOVED = "removed"
"""The folder of the remove lists in the `dedup_across` artifact: `<source>/<shard stem>.npy`."""


def remove_list(artifact, source: str, shard_name: str) -> Path:
    """Where the rows removed from one clean shard of `source` are listed (sorted int64)."""
    return Path(artifact) / REMOVED / source / f"{Path(shard_name).stem}.npy"


def removed_rows(artifact, source: str, shard_name: str) -> np.ndarray:
    """The rows of one clean shard that the cross-source dedup removed (none: empty)."""
    path = artifact / REMOVED / source / f"{Path(shard_name).stem}.npy"
    if not path.exists():
        return np.empty(0, dtype=np.int64)
    return np.load(os.fspath(path), allow_pickle=False)


def earlier_source_keeps(keys: np.ndarray, nodes: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """(removed, kept) node pairs: in each run of equal keys, the first node of the
    earliest-listed source stays and each node of a later source goes, paired with it. Nodes
    of the earliest source in a run all stay (their own source's dedup judged them)."""
    if keys.size == 0:
        return EMPTY_PAIRS
    order = np.lexsort((nodes, ranks, keys))
    keys, nodes, ranks = keys[order], nodes[order], ranks[order]
    starts = np.concatenate(([True], keys[1:] != keys[:-1]))
    anchor = np.maximum.accumulate(np.where(starts, np.arange(keys.size), 0))
    later = ranks > ranks[anchor]
    return np.stack((nodes[later], nodes[anchor[later]]), axis=1).astype(np.int64)


def near_pairs(
    band_keys: list[np.ndarray],
    nodes: np.ndarray,
    ranks: np.ndarray,
    similar: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """(removed, kept) pairs of near duplicates: candidates share a band key (one array of keys
    per band, row-aligned with `nodes`), each later-source node paired with its band run's
    earliest-source node; `similar(pairs)` keeps the pairs whose signatures agree enough."""
    found = [earlier_source_keeps(keys, nodes, ranks) for keys in band_keys]
    found = [f for f in found if f.size]
    if not found:
        return EMPTY_PAIRS
    candidates = np.unique(np.concatenate(found), axis=0)
    return similar(candidates)


def first_kept(pairs: np.ndarray) -> np.ndarray:
    """One pair per removed node (the smallest kept node), sorted by removed node."""
    if pairs.size == 0:
        return EMPTY_PAIRS
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    first = np.concatenate(([True], pairs[1:, 0] != pairs[:-1, 0]))
    return pairs[first]


def signature_agreement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The estimated Jaccard similarity of row-aligned MinHash signatures."""
    return (a == b).mean(axis=1) if a.size else np.zeros(len(a))
