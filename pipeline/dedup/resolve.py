"""Connected components over the near-duplicate edges, and one remove list per unit.

Holds the exact removals, the nodes that have an edge (about 40 bytes each at the peak, in numpy
arrays) and one batch of edges at a time: memory grows with the duplicates, not the corpus.
Distinct nodes are found by sorting (`sorted_sets`), never by `np.unique`'s hash table. The
components are joined over node indexes; the document each keeps (the smallest id, ties: the
smallest node) is then found component by component, reading the ids of a bounded chunk of nodes
at a time; each unit's remove list is sliced from the removals sorted by node.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lmforge.pipeline.cluster.process_stats import reset_peak_rss, task_rss_stats
from lmforge.pipeline.dedup.components import flatten, join, new_forest
from lmforge.pipeline.dedup.index import IndexReader, split_node
from lmforge.pipeline.dedup.sorted_sets import add_sorted, run_starts, search, sorted_unique
from lmforge.pipeline.storage.shared_dir import LOCAL, SharedDir

EXACT, NEAR = 0, 1
KINDS = {EXACT: "exact_duplicate", NEAR: "near_duplicate"}
EDGE_BATCH = 1 << 18
"""Edges joined at once (16 bytes each; joining holds about 8 times that): files are read until
a batch holds this many."""
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
    """The sorted distinct nodes with an edge.

    Each batch's nodes make a sorted run; a run is merged into the one before it while it is at
    least half that one's size (as a binary counter carries), so every node is merged about
    log2(batches) times: adding each batch to one growing set cost batches x nodes. The runs
    held never exceed about twice the final set."""
    runs: list[np.ndarray] = []
    for edges in edge_batches(shared, edge_files):
        runs.append(sorted_unique(edges))
        while len(runs) > 1 and 2 * len(runs[-1]) >= len(runs[-2]):
            last = runs.pop()
            runs[-1] = add_sorted(runs[-1], last)
    nodes = np.zeros(0, np.int64)
    while runs:
        nodes = add_sorted(nodes, runs.pop())  # the smallest runs first
    return nodes


def kept_of_components(reader: IndexReader, nodes: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """For each node, the node its component keeps: the smallest (id, node). `roots` gives each
    node's component as the index of its root in `nodes`."""
    by_component = np.argsort(roots, kind="stable")
    if len(nodes) < 2**31:  # half the bytes of argsort's int64 indexes
        by_component = by_component.astype(np.int32)
    starts = run_starts(roots[by_component])
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


def near_removals(shared: SharedDir, reader: IndexReader, edge_files: list[str]):
    """(removed nodes, the node each one's component keeps), ascending by removed node."""
    nodes = edge_nodes(shared, edge_files)
    if not len(nodes):
        return nodes, nodes
    parent = new_forest(len(nodes))
    for edges in edge_batches(shared, edge_files):
        join(parent, search(nodes, edges))
    flatten(parent)
    kept = kept_of_components(reader, nodes, parent)
    del parent
    moved = np.flatnonzero(kept != nodes)
    return nodes[moved], kept[moved]


def write_remove_lists(
    shared: SharedDir, out: Path, parts: list[tuple[np.ndarray, np.ndarray, int]]
) -> None:
    """One remove list per unit from (removed, kept, kind) parts, each ascending by removed
    node (so by unit): each unit's rows are sliced from every part, never all concatenated."""
    bounds = [split_node(removed)[0] for removed, _, _ in parts]
    units = sorted_unique(np.concatenate([b[run_starts(b)] for b in bounds]))
    for unit in units.tolist():
        rows, kinds, kept = [], [], []
        for (removed, kept_node, kind), unit_of in zip(parts, bounds, strict=True):
            lo, hi = np.searchsorted(unit_of, [unit, unit + 1])
            rows.append(split_node(removed[lo:hi])[1])
            kinds.append(np.full(hi - lo, kind, np.int64))
            kept.append(kept_node[lo:hi])
        rows_kinds_kept = np.stack(
            [np.concatenate(rows), np.concatenate(kinds), np.concatenate(kept)]
        )
        shared.save_array(remove_list_path(out, unit), rows_kinds_kept)


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
    exact = [shared.load_array(path) for path in exact_files]
    exact = np.concatenate(exact, axis=1) if exact else np.zeros((2, 0), np.int64)
    exact = exact[:, np.argsort(exact[0], kind="stable")]
    near = near_removals(shared, reader, edge_files)
    parts = [(exact[0], exact[1], EXACT), (*near, NEAR)]
    write_remove_lists(shared, Path(out_dir), parts)
    by_kind = {KINDS[kind]: len(removed) for removed, _, kind in parts}
    return {**by_kind, **task_rss_stats()}
