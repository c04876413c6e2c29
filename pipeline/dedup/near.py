"""Near-duplicate candidates of one LSH band and one key range, across every unit.

As in `filters/minhash.py`: the documents sharing the band's key form a run; its smallest id is
the anchor and each other member a candidate pair with it, kept as an edge when the two
signatures agree on at least `threshold` of their values (0: every candidate is an edge).
"""

from __future__ import annotations

import numpy as np

from lmforge.pipeline.cluster.process_stats import reset_peak_rss, task_rss_stats
from lmforge.pipeline.dedup.groups import runs_smallest_id_first
from lmforge.pipeline.dedup.index import IndexReader
from lmforge.pipeline.dedup.sorted_sets import contains, sorted_unique
from lmforge.pipeline.storage.shared_dir import LOCAL, SharedDir

VERIFY_CHUNK = 65536


def band_partition(
    index_dir: str,
    units: list[int],
    band: int,
    lo: int,
    hi: int,
    exact_removed: list[str],
    threshold: float,
    out: str,
    shared: SharedDir = LOCAL,
) -> dict:
    """Write `out` (.npy, 2 x k int64: anchor and member nodes of each edge); returns k and the
    task's peak memory.

    `exact_removed`: the exact step's outputs; those documents take no part, as in memory.
    `shared`: the work directory the files are in, when nodes reach it through a bucket.
    """
    reset_peak_rss()
    reader = IndexReader(index_dir, shared.fetch)
    parts = [reader.band_range(unit, band, lo, hi) for unit in units]
    keys = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.uint64)
    nodes = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    keys, nodes = sharing_a_key(keys, nodes)  # only these can make an edge
    if exact_removed and len(nodes):
        # Each file ascending: a stable sort merges the sorted runs (timsort), in linear time.
        gone = np.concatenate([shared.load_array(f)[0] for f in exact_removed])
        gone.sort(kind="stable")
        keep = ~contains(gone, nodes)
        keys, nodes = sharing_a_key(keys[keep], nodes[keep])
    edges = np.stack(runs_smallest_id_first(reader, keys, nodes))
    if threshold > 0:
        keep = np.empty(edges.shape[1], bool)
        for start in range(0, edges.shape[1], VERIFY_CHUNK):
            chunk = edges[:, start : start + VERIFY_CHUNK]
            both = sorted_unique(chunk)  # a run's head has an edge to each member: read once
            signatures = reader.signatures(both)
            at = np.searchsorted(both, chunk)
            equal = signatures[at[0]] == signatures[at[1]]
            keep[start : start + VERIFY_CHUNK] = equal.mean(axis=1) >= threshold
        edges = edges[:, keep]
    shared.save_array(out, edges)
    return {"edges": edges.shape[1], **task_rss_stats()}


def sharing_a_key(keys: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (keys, nodes) whose key another node has too, sorted by key."""
    order = np.argsort(keys, kind="stable")
    keys, nodes = keys[order], nodes[order]
    same = keys[1:] == keys[:-1]
    shared = np.zeros(len(keys), bool)
    shared[1:] |= same
    shared[:-1] |= same
    return keys[shared], nodes[shared]
