"""Ids gathered as one fixed-width array equal the ids read one by one, and sort alike."""

from __future__ import annotations

import random

import numpy as np

from lmforge.pipeline.dedup.index import IndexReader, node_of
from lmforge.pipeline.dedup.index_writer import write_unit_index


def test_fixed_width_ids_equal_the_ids_and_sort_as_they_do(tmp_path) -> None:
    rng = random.Random(0)
    alphabet = "abcxyz019#/-é中"
    sizes = [40, 0, 7, 300]
    for unit, n in enumerate(sizes):
        ids = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(n)]
        write_unit_index(tmp_path, unit, ids, np.arange(n, dtype=np.uint64), None, None)
    nodes = np.concatenate([node_of(u, np.arange(n)) for u, n in enumerate(sizes)])
    nodes = nodes[np.random.default_rng(1).permutation(len(nodes))][:200]
    reader = IndexReader(tmp_path)
    fixed = reader.fixed_width_ids(nodes, chunk=16)
    one_by_one = reader.ids(nodes)
    assert [f.rstrip(b"\0") for f in fixed.tolist()] == one_by_one
    assert np.array_equal(
        np.argsort(fixed, kind="stable"), sorted(range(200), key=one_by_one.__getitem__)
    )
    assert reader.fixed_width_ids(np.zeros(0, np.int64)).shape == (0,)
