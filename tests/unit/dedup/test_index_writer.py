"""A unit's index written batch by batch is the index written at once, file for file."""

from __future__ import annotations

import numpy as np

from lmforge.pipeline.dedup.index import unit_index_files
from lmforge.pipeline.dedup.index_writer import UnitIndexWriter, write_unit_index
from lmforge.pipeline.filters.minhash import EMPTY


def unit_data(n: int, seed: int, num_perm: int = 8, bands: int = 4):
    rng = np.random.default_rng(seed)
    ids = [f"doc-{rng.integers(10**6)}-{i}-é" for i in range(n)]
    hashes = rng.integers(0, 50, n).astype(np.uint64)  # repeats: the stable order matters
    signatures = rng.integers(0, 2**32 - 1, (n, num_perm)).astype(np.uint32)
    signatures[rng.random(n) < 0.1] = EMPTY  # documents without words
    band_keys = rng.integers(0, 30, (n, bands)).astype(np.uint64)
    return ids, hashes, signatures, band_keys


def files_of(directory, unit: int) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in unit_index_files(directory, unit)}


def test_batches_write_the_files_one_batch_writes(tmp_path) -> None:
    ids, hashes, signatures, band_keys = unit_data(1000, seed=0)
    write_unit_index(tmp_path / "once", 3, ids, hashes, signatures, band_keys)
    writer = UnitIndexWriter(tmp_path / "batches", 3, num_perm=8, bands=4)
    for a, b in [(0, 0), (0, 1), (1, 300), (300, 300), (300, 999), (999, 1000)]:
        writer.add(ids[a:b], hashes[a:b], signatures[a:b], band_keys[a:b])
    writer.close()
    once = files_of(tmp_path / "once", 3)
    assert set(once) == {
        "ids.bin",
        "id_offsets.npy",
        "exact_keys.npy",
        "exact_rows.npy",
        "signatures.npy",
        "band_keys.npy",
        "band_rows.npy",
    }
    assert files_of(tmp_path / "batches", 3) == once
    keys = np.load(tmp_path / "once" / "u000003" / "band_keys.npy")
    rows = np.load(tmp_path / "once" / "u000003" / "band_rows.npy")
    valid = np.flatnonzero(signatures[:, 0] != EMPTY)
    assert keys.shape == rows.shape == (4, len(valid)) < (4, 1000)
    for band in range(4):
        order = np.argsort(band_keys[valid, band], kind="stable")
        assert np.array_equal(keys[band], band_keys[valid, band][order])
        assert np.array_equal(rows[band], valid[order])


def test_an_empty_unit_and_a_unit_without_near_dedup(tmp_path) -> None:
    writer = UnitIndexWriter(tmp_path, 0, num_perm=8, bands=4)
    writer.close()
    assert np.load(tmp_path / "u000000" / "signatures.npy").shape == (0, 8)
    assert np.load(tmp_path / "u000000" / "band_keys.npy").shape == (4, 0)
    ids, hashes, _, _ = unit_data(10, seed=1)
    write_unit_index(tmp_path, 1, ids, hashes, None, None)
    assert sorted(files_of(tmp_path, 1)) == [
        "exact_keys.npy",
        "exact_rows.npy",
        "id_offsets.npy",
        "ids.bin",
    ]
