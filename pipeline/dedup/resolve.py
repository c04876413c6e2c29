"""Connected components over the near-duplicate edges, and one remove list per unit.

Holds the exact removals, the nodes that have an edge (about 32 bytes each, in numpy arrays) and
one batch of edges at a time: memory grows with the duplicates, not the corpus. The components
are joined over node indexes; the document each keeps (the smallest id, ties: the smallest node)
is then found component by component, reading the ids of a bounded chunk of nodes at a time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lmforge.pipeline.dedup.components import flatten, join, new_forest
from lmforge.pipeline.dedup.index import IndexReader, split_node
from lmforge.pipeline.proc_stats import reset_peak_rss, task_rss_stats
from lmforge.pipeline.shared_dir import LOCAL, SharedDir

EXACT, NEAR = 0, 1
KINDS = {EXACT: "exact_duplicate", NEAR: "near_duplicate"}
EDGE_BATCH = 1 << 20
"""Edges joined at once (16 bytes each): files are read until a batch holds this many."""
ID_CHUNK = 1 << 18
"""Nodes whose ids are read at once when choosing each component's kept document."""


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
        nodes = np.union1d(nodes, np.unique(edges))
    return nodes


def kept_of_components(reader: IndexReader, nodes: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """For each node, the node its component keeps: the smallest (id, node). `roots` gives each
    node's component as the index of its root in `nodes`."""
    by_component = np.argsort(roots, kind="stable")
    starts = np.flatnonzero(np.diff(roots[by_component], prepend=-1))
    kept = np.empty(len(nodes), np.int64)
    first = 0
    while first < len(starts):
        # Whole components only, about ID_CHUNK nodes (more when one component is bigger).
        last = int(np.searchsorted(starts, starts[first] + ID_CHUNK, side="right"))
        last = max(last, first + 1)
        stop = int(starts[last]) if last < len(starts) else len(nodes)
        members = by_component[starts[first] : stop]
        component = roots[members]
        ids = reader.fixed_width_ids(nodes[members])
        order = np.lexsort((nodes[members], ids, component))
        heads = np.flatnonzero(np.diff(component[order], prepend=-1))
        winner = nodes[members[order[heads]]]  # one per component, in component order
        counts = np.diff(np.append(heads, len(order)))
        kept[members[order]] = np.repeat(winner, counts)
        first = last
    return kept


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
        parent = new_forest(len(nodes))
        for edges in edge_batches(shared, edge_files):
            join(parent, np.searchsorted(nodes, edges))
        flatten(parent)
        kept_node = kept_of_components(reader, nodes, parent)
        del parent
        moved = np.flatnonzero(kept_node != nodes)
        removed.append(nodes[moved])
        kept.append(kept_node[moved])
        kinds.append(np.full(len(moved), NEAR, np.int64))
    if not removed or not sum(len(r) for r in removed):
        return {**{name: 0 for name in KINDS.values()}, **task_rss_stats()}
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
    return {**by_kind, **task_rss_stats()}
