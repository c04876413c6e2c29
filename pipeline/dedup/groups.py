"""Runs of equal keys, and the document each run keeps: the smallest id (ties: the first node)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from lmforge.pipeline.dedup.index import IndexReader


def equal_key_runs(keys: np.ndarray, nodes: np.ndarray) -> Iterator[np.ndarray]:
    """The nodes of each run of two or more equal keys (keys and nodes row-aligned)."""
    if len(keys) < 2:
        return
    order = np.lexsort((nodes, keys))
    keys, nodes = keys[order], nodes[order]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1], [True])))
    for start, stop in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
        if stop - start > 1:
            yield nodes[start:stop]


def smallest_id_first(reader: IndexReader, nodes: np.ndarray) -> np.ndarray:
    """`nodes` reordered by (id, node): the first is the one a cluster keeps."""
    ids = reader.ids(nodes)
    order = sorted(range(len(nodes)), key=lambda i: (ids[i], int(nodes[i])))
    return nodes[order]
