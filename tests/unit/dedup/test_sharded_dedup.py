"""The sharded dedup steps decide exactly what the in-memory algorithm decides: the same
documents removed, each traced to the same kept document, whatever the units and key ranges."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lmforge.pipeline.dedup.exact import exact_partition
from lmforge.pipeline.dedup.in_memory import in_memory_removals
from lmforge.pipeline.dedup.index import IndexReader, key_ranges
from lmforge.pipeline.dedup.index_writer import write_unit_index
from lmforge.pipeline.dedup.near import band_partition
from lmforge.pipeline.dedup.resolve import KINDS, remove_list_path, resolve
from lmforge.pipeline.estimate.calibration.synthetic_corpus import document
from lmforge.pipeline.filters.dedup_exact import ExactDeduplicator
from lmforge.pipeline.filters.minhash import MinHashDeduplicator
from lmforge.pipeline.sources.data_config import DedupConfig
from lmforge.pipeline.storage.shared_dir import LOCAL


def corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Synthetic documents with planted exact and near copies, plus case-only variants (equal
    for exact dedup with lowercase, different for MinHash), under ids in shuffled order."""
    texts = [document(seed, i, 24)[0] for i in range(n)]
    rng = random.Random(seed)
    for i in rng.sample(range(n), n // 20):
        texts[i] = texts[rng.randrange(n)].upper()
    ids = [f"doc-{rng.randrange(10**6):06d}-{i}" for i in range(n)]
    return ids, texts


def sharded_removals(
    tmp_path, ids: list[str], texts: list[str], cfg: DedupConfig, n_units: int, n_ranges: int
) -> dict[str, tuple[str, str]]:
    """Cut the corpus into units, write their indexes, run the steps over `n_ranges` ranges."""
    rng = random.Random(n_units)
    cuts = sorted(rng.sample(range(1, len(ids)), n_units - 1))
    bounds = list(zip([0, *cuts], [*cuts, len(ids)], strict=True))
    index_dir, work = tmp_path / "index", tmp_path / "work"
    work.mkdir()
    exact, near = ExactDeduplicator(cfg.exact), MinHashDeduplicator(cfg.near)
    for unit, (a, b) in enumerate(bounds):
        hashes = np.array([exact.text_hash(t) for t in texts[a:b]], np.uint64)
        signatures, band_keys = near.signatures(texts[a:b])
        write_unit_index(index_dir, unit, ids[a:b], hashes, signatures, band_keys)
    units = list(range(len(bounds)))
    exact_files = []
    if cfg.exact.enabled:
        for p, (lo, hi) in enumerate(key_ranges(n_ranges)):
            exact_files.append(str(work / f"exact-{p}.npy"))
            exact_partition(str(index_dir), units, lo, hi, exact_files[-1])
            removed_nodes = np.load(exact_files[-1])[0]
            assert np.all(removed_nodes[1:] > removed_nodes[:-1])  # near tasks merge them
    edge_files = []
    for band in range(cfg.near.bands):
        for p, (lo, hi) in enumerate(key_ranges(n_ranges)):
            edge_files.append(str(work / f"edges-{band}-{p}.npy"))
            band_partition(
                str(index_dir), units, band, lo, hi, exact_files, cfg.near.threshold, edge_files[-1]
            )
    resolve(str(index_dir), exact_files, edge_files, str(work))
    reader = IndexReader(index_dir)
    removed = {}
    for unit, (a, _) in enumerate(bounds):
        path = remove_list_path(work, unit)
        if path.exists():
            rows, kinds, kept = np.load(path)
            for row, kind, kept_id in zip(rows, kinds, reader.ids(kept), strict=True):
                removed[ids[a + int(row)]] = (kept_id.decode(), KINDS[int(kind)])
    return removed


@pytest.mark.parametrize(
    "lowercase, threshold, n_units, n_ranges",
    [(False, 0.6, 5, 3), (True, 0.6, 9, 1), (True, 0.0, 3, 4), (False, 0.8, 1, 2)],
)
def test_sharded_dedup_removes_what_the_in_memory_algorithm_removes(
    tmp_path, lowercase, threshold, n_units, n_ranges
):
    ids, texts = corpus(1500, seed=n_units)
    cfg = DedupConfig()
    cfg.exact.lowercase = lowercase
    cfg.near.threshold = threshold
    expected = in_memory_removals(ids, texts, cfg)
    kinds = {kind for _, kind in expected.values()}
    assert kinds == {"exact_duplicate", "near_duplicate"} and len(expected) > 200
    assert sharded_removals(tmp_path, ids, texts, cfg, n_units, n_ranges) == expected


def test_small_edge_batches_and_id_chunks_decide_the_same(tmp_path, monkeypatch):
    """Edges joined a few at a time, kept documents chosen a few components at a time, and
    every lookup in a sorted set made in ascending order (as sets outgrowing the caches are)."""
    import lmforge.pipeline.dedup.resolve as resolve_module
    import lmforge.pipeline.dedup.sorted_sets as sorted_sets

    monkeypatch.setattr(resolve_module, "EDGE_BATCH", 50)
    monkeypatch.setattr(resolve_module, "ID_CHUNK", 7)
    monkeypatch.setattr(sorted_sets, "CACHED", 0)
    ids, texts = corpus(1500, seed=11)
    cfg = DedupConfig()
    expected = in_memory_removals(ids, texts, cfg)
    assert sum(kind == "near_duplicate" for _, kind in expected.values()) > 100
    assert sharded_removals(tmp_path, ids, texts, cfg, 4, 3) == expected


@pytest.mark.parametrize("batch", [1, 3, 64, 10_000])
def test_the_nodes_of_many_edge_batches_are_their_sorted_union(tmp_path, monkeypatch, batch):
    """Batches merged as sorted runs of similar sizes give exactly the distinct nodes."""
    import lmforge.pipeline.dedup.resolve as resolve_module

    monkeypatch.setattr(resolve_module, "EDGE_BATCH", batch)
    rng = np.random.default_rng(batch)
    files = []
    for k, size in enumerate(rng.integers(0, 40, size=60).tolist()):
        files.append(str(tmp_path / f"edges-{k}.npy"))
        np.save(files[-1], rng.integers(0, 1 << 40, size=(2, size)))
    every = np.concatenate([np.load(f) for f in files], axis=1)
    nodes = resolve_module.edge_nodes(LOCAL, files)
    assert nodes.dtype == np.int64 and np.array_equal(nodes, np.unique(every))
