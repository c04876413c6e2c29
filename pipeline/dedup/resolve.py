"""Connected components over the near-duplicate edges, and one remove list per unit.

Holds the exact removals, the nodes that have an edge (a parent and a fixed-width id each) and
one batch of edges at a time: memory grows with the duplicates, not the corpus, and stays in
numpy arrays (a Python union-find over Python ids took ~500 bytes per removal).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lmforge.pipeline.dedup.components import flatten, join, new_forest
from lmforge.pipeline.dedup.index import IndexReader, split_node
from lmforge.pipeline.proc_stats import reset_peak_rss, task_peak_rss_bytes
from lmforge.pipeline.shared_dir import LOCAL, SharedDir

EXACT, NEAR = 0, 1
KINDS = {EXACT: "exact_duplicate", NEAR: "near_duplicate"}
EDGE_BATCH = 1 << 22
"""Edges joined at once (16 bytes each): files are read until a batch holds this many."""


def remove_list_path(directory: Path, unit: int) -> Path:
    return directory / f"remove-u{unit:06d}.npy"


def edge_batches(shared: SharedDir, edge_files: list[str]):
    """The edges of `edge_files` (2 x k int64 nodes), several files to a batch."""
    pending: list[np.ndarray] = []
    held = 0
    for path in edge_files:
        edges = shared.load_array(path)
        if not edges.shape[1]:
            continue
        pending.append(edges)
        held += edges.shape[1]
        if held >= EDGE_BATCH:
            yield np.concatenate(pending, axis=1)
            pending, held = [], 0
    if pending:
        yield np.concatenate(pending, axis=1)


def edge_nodes(shared: SharedDir, edge_files: list[str]) -> np.ndarray:
    """The sorted distinct nodes with an edge."""
    nodes = np.zeros(0, np.int64)
    for edges in edge_batches(shared, edge_files):
        nodes = np.union1d(nodes, edges.ravel())
    return nodes


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
    nodes = edge_nodes(shared, edge_files)
    if len(nodes):
        # Rank the nodes by (id, node): a component's smallest rank is the document it keeps.
        # Fixed-width bytes sort as the strings do (an id ending in NUL bytes aside).
        by_id = np.lexsort((nodes, reader.fixed_width_ids(nodes)))
        ranked = nodes[by_id]  # rank -> node
        rank = np.empty(len(nodes), np.int64)
        rank[by_id] = np.arange(len(nodes))  # index in `nodes` -> rank
        del by_id
        parent = new_forest(len(nodes))
        for edges in edge_batches(shared, edge_files):
            join(parent, rank[np.searchsorted(nodes, edges)])
        flatten(parent)
        moved = np.flatnonzero(parent != np.arange(len(nodes)))
        removed.append(ranked[moved])
        kept.append(ranked[parent[moved]])
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
