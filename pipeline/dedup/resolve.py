"""Connected components over the near-duplicate edges, and one remove list per unit.

Holds the edges and the exact removals only: memory grows with the duplicates, not the corpus.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lmforge.pipeline.dedup.index import IndexReader, split_node
from lmforge.pipeline.filters.minhash import union_find_roots
from lmforge.pipeline.proc_stats import reset_peak_rss, task_peak_rss_bytes
from lmforge.pipeline.shared_dir import LOCAL, SharedDir

EXACT, NEAR = 0, 1
KINDS = {EXACT: "exact_duplicate", NEAR: "near_duplicate"}


def remove_list_path(directory: Path, unit: int) -> Path:
    return directory / f"remove-u{unit:06d}.npy"


def resolve(
    index_dir: str,
    exact_files: list[str],
    edge_files: list[str],
    out_dir: str,
    shared: SharedDir = LOCAL,
) -> dict:
    """Write `remove-u<unit>.npy` (3 x k int64: row, kind, kept node) for every unit that loses
    documents; returns the counts by kind and the task's peak memory."""
    reset_peak_rss()
    reader = IndexReader(index_dir, shared.fetch)
    removed, kept, kinds = [], [], []
    for path in exact_files:
        pairs = shared.load_array(path)
        removed.append(pairs[0])
        kept.append(pairs[1])
        kinds.append(np.full(pairs.shape[1], EXACT, np.int64))
    edges = [shared.load_array(p) for p in edge_files]
    edges = np.unique(np.concatenate(edges, axis=1), axis=1) if edges else np.zeros((2, 0), int)
    if edges.shape[1]:
        nodes = np.unique(edges)
        # Fixed-width bytes sort as the strings do (an id ending in NUL bytes aside).
        by_id = np.lexsort((nodes, np.array(reader.ids(nodes), dtype=np.bytes_)))
        ranked = nodes[by_id]  # rank -> node
        rank = np.empty(len(nodes), np.int64)
        rank[by_id] = np.arange(len(nodes))  # index in `nodes` -> rank
        rank_edges = rank[np.searchsorted(nodes, edges)].T
        roots = union_find_roots(len(nodes), rank_edges)
        moved = np.flatnonzero(roots != np.arange(len(nodes)))
        removed.append(ranked[moved])
        kept.append(ranked[roots[moved]])
        kinds.append(np.full(len(moved), NEAR, np.int64))
    if not removed or not sum(len(r) for r in removed):
        return {**{name: 0 for name in KINDS.values()}, "peak_rss_bytes": task_peak_rss_bytes()}
    removed, kept, kinds = np.concatenate(removed), np.concatenate(kept), np.concatenate(kinds)
    units, rows = split_node(removed)
    out = Path(out_dir)
    order = np.argsort(units, kind="stable")
    starts = np.flatnonzero(np.concatenate(([True], units[order][1:] != units[order][:-1])))
    for start, stop in zip(starts, [*starts[1:], len(order)], strict=True):
        pick = order[start:stop]
        rows_kinds_kept = np.stack([rows[pick], kinds[pick], kept[pick]])
        shared.save_array(remove_list_path(out, int(units[pick[0]])), rows_kinds_kept)
    by_kind = {name: int((kinds == kind).sum()) for kind, name in KINDS.items()}
    return {**by_kind, "peak_rss_bytes": task_peak_rss_bytes()}
