"""Dedup across a mixture's sources: the earlier-listed source keeps its copy, later sources'
copies go, a source's own repeats are left to its own dedup, near pairs only where the
signatures agree."""

from __future__ import annotations

import numpy as np

from lmforge.pipeline.dedup.across import earlier_source_keeps, first_kept, near_pairs


def arrays(rows):
    keys, nodes, ranks = zip(*rows, strict=True)
    return np.array(keys, np.uint64), np.array(nodes, np.int64), np.array(ranks, np.int64)


def test_the_earliest_source_keeps_and_each_later_copy_goes():
    # key 5 in sources 2, 0 and 1; key 9 in source 1 only; key 7 twice in source 0
    rows = [(5, 30, 2), (5, 10, 0), (9, 20, 1), (5, 21, 1), (7, 11, 0), (7, 12, 0)]
    pairs = earlier_source_keeps(*arrays(rows))
    assert sorted(map(tuple, pairs.tolist())) == [(21, 10), (30, 10)]


def test_a_later_source_alone_with_its_key_keeps_everything():
    assert earlier_source_keeps(*arrays([(3, 40, 1), (3, 41, 1)])).size == 0
    empty = np.empty(0, np.int64)
    assert earlier_source_keeps(np.empty(0, np.uint64), empty, empty).size == 0


def test_a_later_source_ties_to_the_earliest_not_to_a_middle_one():
    pairs = earlier_source_keeps(*arrays([(8, 50, 2), (8, 40, 1), (8, 10, 0), (8, 11, 0)]))
    assert sorted(map(tuple, pairs.tolist())) == [(40, 10), (50, 10)]


def test_near_pairs_share_a_band_and_pass_the_similarity_check():
    nodes = np.array([1, 2, 3], np.int64)
    ranks = np.array([0, 1, 1], np.int64)
    bands = [np.array([4, 4, 4], np.uint64), np.array([1, 2, 1], np.uint64)]
    similar_ones = {(3, 1)}

    def similar(pairs):
        return pairs[[tuple(p) in similar_ones for p in pairs.tolist()]]

    assert near_pairs(bands, nodes, ranks, similar).tolist() == [[3, 1]]


def test_one_pair_per_removed_document():
    pairs = np.array([[7, 3], [5, 1], [7, 2]], np.int64)
    assert first_kept(pairs).tolist() == [[5, 1], [7, 2]]
