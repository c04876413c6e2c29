"""All runs of equal keys grouped at once give the pairs the per-run reference gives."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest

from lmforge.pipeline.dedup.groups import runs_smallest_id_first
from lmforge.pipeline.dedup.index import IndexReader, node_of
from lmforge.pipeline.dedup.index_writer import write_unit_index


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


def per_run(reader: IndexReader, keys: np.ndarray, nodes: np.ndarray):
    heads, members = [], []
    for run in equal_key_runs(keys, nodes):
        ordered = smallest_id_first(reader, run)
        heads += [int(ordered[0])] * (len(ordered) - 1)
        members += ordered[1:].tolist()
    return heads, members


@pytest.mark.parametrize("chunk, distinct_keys, seed", [(1, 5, 0), (7, 40, 1), (1 << 16, 300, 2)])
def test_runs_grouped_at_once_equal_the_runs_one_by_one(tmp_path, chunk, distinct_keys, seed):
    rng = random.Random(seed)
    sizes = [50, 0, 120, 30]
    for unit, n in enumerate(sizes):
        # Few distinct ids, so ties between equal ids fall back to the node.
        ids = [rng.choice(["b", "a", "ab", "a#1", "z", "é", "a"]) for _ in range(n)]
        write_unit_index(tmp_path, unit, ids, np.arange(n, dtype=np.uint64), None, None)
    nodes = np.concatenate([node_of(u, np.arange(n)) for u, n in enumerate(sizes)])
    nodes = nodes[np.random.default_rng(seed).permutation(len(nodes))]
    keys = np.random.default_rng(seed + 10).integers(0, distinct_keys, len(nodes), np.uint64)
    reader = IndexReader(tmp_path)
    heads, members = runs_smallest_id_first(reader, keys, nodes, chunk=chunk)
    expected = per_run(reader, keys, nodes)
    assert len(expected[0]) > 20
    assert (heads.tolist(), members.tolist()) == expected
    assert heads.dtype == members.dtype == np.int64


def test_no_shared_key_gives_no_pairs(tmp_path):
    write_unit_index(tmp_path, 0, ["a", "b"], np.arange(2, dtype=np.uint64), None, None)
    reader = IndexReader(tmp_path)
    for keys in (np.array([1], np.uint64), np.array([1, 2], np.uint64)):
        nodes = node_of(0, np.arange(len(keys)))
        heads, members = runs_smallest_id_first(reader, keys, nodes)
        assert heads.shape == members.shape == (0,)
