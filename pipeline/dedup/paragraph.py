"""Lines or paragraphs repeated across documents, for one range of the unit-hash space.

Each read unit's paragraph index (`paragraph_index.py`) lists every (unit hash, document) pair
once. A task reads the pairs of its hash range from every read unit, leaves out the documents the
exact and near steps removed (their remove lists, `resolve.py`), and keeps the hashes held by at
least `min_docs` documents: every such document but the one with the smallest id loses the unit
(`filters/dedup_paragraph.py`; `in_memory.py` holds the single-process reference). Memory: the
pairs of one hash range (`data.dedup.paragraph.units_per_task` of them) and one read unit's
remove list at a time; a unit repeated across the whole corpus makes its range hold what was
found, as every dedup step does.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from lmforge.pipeline.cluster.process_stats import reset_peak_rss, task_rss_stats
from lmforge.pipeline.dedup.groups import runs_smallest_id_first
from lmforge.pipeline.dedup.index import IndexReader, node_of, split_node
from lmforge.pipeline.dedup.resolve import remove_list_path
from lmforge.pipeline.dedup.sorted_sets import contains, run_starts
from lmforge.pipeline.storage.shared_dir import LOCAL, SharedDir

NODE, HASH, DOCUMENTS = 0, 1, 2
"""Rows of a task's output: the document that loses a unit, the unit's hash (as int64) and how
many documents hold it; columns sorted by document."""


def paragraph_partition(
    index_dir: str,
    units: list[int],
    lo: int,
    hi: int,
    min_docs: int,
    removals_dir: str,
    out: str,
    shared: SharedDir = LOCAL,
) -> dict:
    """Write `out` (.npy, 3 x k int64: `NODE`, `HASH`, `DOCUMENTS`) for the unit hashes in
    [lo, hi); returns k, the task's CPU seconds and its peak memory."""
    reset_peak_rss()
    started = time.process_time()
    reader = IndexReader(index_dir, shared.fetch)
    keys, nodes = [np.zeros(0, np.uint64)], [np.zeros(0, np.int64)]
    for unit in units:
        unit_keys, unit_nodes = reader.paragraph_range(unit, lo, hi)
        keep = still_kept(shared, removals_dir, unit, unit_nodes)
        keys.append(unit_keys[keep])
        nodes.append(unit_nodes[keep])
    repeated_keys, repeated_nodes = held_by_enough(
        np.concatenate(keys), np.concatenate(nodes), min_docs
    )
    del keys, nodes
    _, losers = runs_smallest_id_first(reader, repeated_keys, repeated_nodes)
    starts = run_starts(repeated_keys)
    sizes = np.diff(np.append(starts, len(repeated_keys)))
    # `runs_smallest_id_first` gives each run's other members run by run, in key order.
    lost = np.stack(
        [
            losers,
            np.repeat(repeated_keys[starts], sizes - 1).view(np.int64),
            np.repeat(sizes, sizes - 1).astype(np.int64),
        ]
    )
    lost = lost[:, np.argsort(lost[NODE], kind="stable")]  # split tasks slice it by read unit
    shared.save_array(out, lost)
    reader.close()
    return {
        "units": lost.shape[1],
        "cpu_seconds": round(time.process_time() - started, 4),
        **task_rss_stats(),
    }


def still_kept(shared: SharedDir, removals_dir: str, unit: int, nodes: np.ndarray) -> np.ndarray:
    """Which of `nodes` (all of read unit `unit`) the exact and near steps did not remove."""
    path = remove_list_path(Path(removals_dir), unit)
    if not len(nodes) or not shared.exists(path):
        return np.ones(len(nodes), bool)
    gone = np.sort(shared.load_array(path)[0])
    return ~contains(gone, split_node(nodes)[1])


def held_by_enough(
    keys: np.ndarray, nodes: np.ndarray, min_docs: int
) -> tuple[np.ndarray, np.ndarray]:
    """The (key, node) pairs whose key at least `min_docs` nodes hold, sorted by key (each pair
    is distinct: a document lists each of its unit hashes once)."""
    order = np.argsort(keys, kind="stable")
    keys, nodes = keys[order], nodes[order]
    if not len(keys):
        return keys, nodes
    starts = run_starts(keys)
    sizes = np.diff(np.append(starts, len(keys)))
    enough = np.repeat(sizes >= min_docs, sizes)
    return keys[enough], nodes[enough]


def unit_slice(path: Path, unit: int) -> np.ndarray:
    """The columns of a task's output (`paragraph_partition`) for the documents of read unit
    `unit`, read through a memory map (the file is sorted by node)."""
    lost = np.load(path, mmap_mode="r", allow_pickle=False)
    if not lost.shape[1]:
        return np.zeros((3, 0), np.int64)
    start, stop = np.searchsorted(lost[NODE], node_of(np.array([unit, unit + 1]), 0))
    return np.array(lost[:, start:stop])
