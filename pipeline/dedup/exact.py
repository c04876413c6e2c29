"""Exact duplicates of one range of the hash space, across every unit."""

from __future__ import annotations

import numpy as np

from lmforge.pipeline.cluster.process_stats import reset_peak_rss, task_rss_stats
from lmforge.pipeline.dedup.groups import runs_smallest_id_first
from lmforge.pipeline.dedup.index import IndexReader
from lmforge.pipeline.storage.shared_dir import LOCAL, SharedDir


def exact_partition(
    index_dir: str, units: list[int], lo: int, hi: int, out: str, shared: SharedDir = LOCAL
) -> dict:
    """Write `out` (.npy, 2 x k int64: removed nodes, ascending, and the nodes kept in their
    place) for the documents whose hash lies in [lo, hi); returns k and the task's peak memory.
    `shared`: the work directory the files are in, when nodes reach it through a bucket."""
    reset_peak_rss()
    reader = IndexReader(index_dir, shared.fetch)
    parts = [reader.exact_range(unit, lo, hi) for unit in units]
    keys = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.uint64)
    nodes = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    kept, removed = runs_smallest_id_first(reader, keys, nodes)
    pairs = np.stack([removed, kept])
    pairs = pairs[:, np.argsort(removed, kind="stable")]  # readers merge sorted runs
    shared.save_array(out, pairs)
    return {"pairs": pairs.shape[1], **task_rss_stats()}
