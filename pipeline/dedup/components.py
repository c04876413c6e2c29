"""Connected components of a graph given edge batch by edge batch, in numpy arrays only.

A node's parent is always a node of lower index, so each component's root is its smallest node:
with nodes ranked by document id, the document a cluster keeps. Memory: the parent array and one
batch of edges (a Python union-find holds tens of bytes per node and per edge as objects). Time:
each batch costs about its edges times the depth of their nodes' paths, not the forest's size.
"""

from __future__ import annotations

import numpy as np


def new_forest(n: int) -> np.ndarray:
    """n nodes, each its own component (int32 node indexes while they fit: half the bytes)."""
    return np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)


def join(parent: np.ndarray, edges: np.ndarray) -> None:
    """Merge the components of the two ends of each edge (2 x k node indices), in place.

    Work grows with the edges given, not with the forest: only the paths of the edges' ends are
    compressed (a whole-forest `flatten` per round made many batches cost batches x nodes).
    `flatten` once at the end turns the forest into roots."""
    u, v = np.asarray(edges[0], np.int64), np.asarray(edges[1], np.int64)
    while len(u):
        ru, rv = roots_of(parent, u), roots_of(parent, v)
        parent[u], parent[v] = ru, rv  # a root is below its node: the order still holds
        apart = ru != rv
        u, v, ru, rv = u[apart], v[apart], ru[apart], rv[apart]
        # Hook each root that has an edge to a lower root onto the lowest such root: it stops
        # being a root, so every round merges at least one pair of components.
        np.minimum.at(parent, np.maximum(ru, rv), np.minimum(ru, rv))


def roots_of(parent: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The root of each of `nodes`."""
    found = parent[nodes]
    while True:
        up = parent[found]
        if np.array_equal(up, found):
            return found
        found = up


def flatten(parent: np.ndarray) -> None:
    """Point every node straight at its root (pointer jumping), in place."""
    while True:
        up = parent[parent]
        if np.array_equal(up, parent):
            return
        parent[:] = up


def component_roots(n: int, edges: np.ndarray) -> np.ndarray:
    """The root (smallest node) of each of n nodes joined by `edges` (2 x k)."""
    parent = new_forest(n)
    join(parent, edges)
    flatten(parent)
    return parent
