"""Runs of equal keys, and the document each run keeps: the smallest id (ties: the first node)."""

from __future__ import annotations

import numpy as np

from lmforge.pipeline.dedup.index import IndexReader
from lmforge.pipeline.dedup.sorted_sets import run_starts


def runs_smallest_id_first(
    reader: IndexReader, keys: np.ndarray, nodes: np.ndarray, chunk: int = 1 << 16
) -> tuple[np.ndarray, np.ndarray]:
    """Every run of two or more equal keys, in numpy: (heads, members), where `members` are the
    runs' other nodes in (key, id, node) order and `heads` the node each one's run keeps (its
    smallest id, ties: the smallest node), without a Python step per run (the test's per-run
    reference gives the same pairs in the same order); ids are read for whole runs of about
    `chunk` nodes at a time, so long ids never fill memory."""
    empty = np.zeros(0, np.int64)
    if len(keys) < 2:
        return empty, empty
    order = np.lexsort((nodes, keys))
    keys, nodes = keys[order], nodes[order]
    starts = run_starts(keys)
    sizes = np.diff(np.append(starts, len(keys)))
    shared = np.repeat(sizes > 1, sizes)
    if not shared.any():
        return empty, empty
    run = np.repeat(np.arange(len(starts)), sizes)[shared]
    nodes = nodes[shared]
    bounds = run_starts(run)
    heads, members = [], []
    first = 0
    while first < len(bounds):
        last = max(first + 1, int(np.searchsorted(bounds, bounds[first] + chunk, "right")))
        lo, hi = int(bounds[first]), int(bounds[last]) if last < len(bounds) else len(nodes)
        part_run, part = run[lo:hi], nodes[lo:hi]
        order = np.lexsort((part, reader.fixed_width_ids(part), part_run))
        part_run, part = part_run[order], part[order]
        head = np.concatenate(([True], part_run[1:] != part_run[:-1]))
        counts = np.diff(np.append(np.flatnonzero(head), len(part))) - 1
        heads.append(np.repeat(part[head], counts))
        members.append(part[~head])
        first = last
    return np.concatenate(heads), np.concatenate(members)
