"""Ids gathered as one fixed-width array equal the ids read one by one, and sort alike."""

from __future__ import annotations

import random

import numpy as np
import pytest

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


def test_ids_are_read_without_leaving_the_id_files_mapped(tmp_path) -> None:
    """Mapped id pages would count in the task's memory (the kernel maps the pages around each
    page read), so random ids of a big corpus would bring all of its ids in."""
    ids = [f"doc-{i}" for i in range(5000)]
    write_unit_index(tmp_path, 0, ids, np.arange(5000, dtype=np.uint64), None, None)
    reader = IndexReader(tmp_path)
    picked = [4999, 0, 1234]
    assert reader.ids(node_of(0, np.array(picked))) == [ids[i].encode() for i in picked]
    fixed = reader.fixed_width_ids(node_of(0, np.array(picked))).tolist()
    assert fixed == [ids[i].encode() for i in picked]  # mapped while gathering, then let go
    with open("/proc/self/maps") as maps:
        mapped = maps.read()
    assert str(tmp_path / "u000000" / "ids.bin") not in mapped
    assert str(tmp_path / "u000000" / "id_offsets.npy") not in mapped
    reader.close()


def test_signatures_of_nodes_in_any_order_are_their_rows(tmp_path) -> None:
    """Rows gathered unit by unit land at their nodes' places; a short file is named."""
    rng = np.random.default_rng(3)
    sizes, width, bands = [30, 0, 45, 12], 10, 2
    written = {}
    for unit, n in enumerate(sizes):
        signatures = rng.integers(0, 2**32, size=(n, width), dtype=np.uint32)
        band_keys = rng.integers(0, 2**63, size=(n, bands), dtype=np.uint64)
        ids = [f"u{unit}-{i}" for i in range(n)]
        write_unit_index(tmp_path, unit, ids, np.arange(n, dtype=np.uint64), signatures, band_keys)
        written[unit] = signatures
    nodes = np.concatenate([node_of(u, np.arange(n)) for u, n in enumerate(sizes)])
    nodes = np.concatenate([nodes[rng.permutation(len(nodes))], nodes[:5]])  # repeats too
    found = IndexReader(tmp_path).signatures(nodes)
    expected = np.stack([written[int(n >> 32)][int(n & 0xFFFFFFFF)] for n in nodes])
    assert found.dtype == np.uint32 and np.array_equal(found, expected)
    assert IndexReader(tmp_path).signatures(np.zeros(0, np.int64)).shape == (0, 0)
    path = tmp_path / "u000002" / "signatures.npy"
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(ValueError, match="unit 2"):
        IndexReader(tmp_path).signatures(node_of(2, np.array([44])))
