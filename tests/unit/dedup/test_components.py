"""Connected components in numpy give the roots the reference union-find gives."""

from __future__ import annotations

import numpy as np
import pytest

from lmforge.pipeline.dedup.components import component_roots, flatten, join, new_forest
from lmforge.pipeline.filters.minhash import union_find_roots


@pytest.mark.parametrize("n, k, seed", [(1, 0, 0), (50, 30, 1), (2000, 1500, 2), (500, 5000, 3)])
def test_random_graphs_give_the_reference_roots(n: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, size=(2, k))
    assert np.array_equal(component_roots(n, edges), union_find_roots(n, edges.T))


def test_a_long_chain_given_backwards_ends_at_its_smallest_node() -> None:
    n = 10_000
    edges = np.stack([np.arange(n - 1, 0, -1), np.arange(n - 2, -1, -1)])
    assert np.array_equal(component_roots(n, edges), np.zeros(n, np.int64))


def test_edges_given_in_batches_join_as_if_given_at_once() -> None:
    rng = np.random.default_rng(4)
    n = 3000
    edges = rng.integers(0, n, size=(2, 2500))
    parent = new_forest(n)
    for batch in np.array_split(edges, 7, axis=1):
        join(parent, batch)
    flatten(parent)
    assert np.array_equal(parent, union_find_roots(n, edges.T))
    assert len(np.unique(parent)) < n


def test_a_batch_touches_only_the_paths_of_its_own_nodes() -> None:
    """Joining a batch costs its edges, not the forest: the nodes of other components keep
    their parents (a whole-forest flatten per batch made resolve's time grow as batches x
    nodes), and a final flatten still gives every node its root."""
    n = 100_000
    parent = new_forest(n)
    parent[1:1000] = np.arange(0, 999)  # a forest left unflattened: 0 <- 1 <- 2 ... <- 999
    before = parent.copy()
    join(parent, np.array([[5000], [4000]]))
    changed = np.flatnonzero(parent != before)
    assert changed.tolist() == [5000]
    flatten(parent)
    assert (parent[:1000] == 0).all() and parent[5000] == 4000 and parent[4000] == 4000
