"""Sets of integers as sorted numpy arrays, built by sorting only.

numpy 2.3+'s `np.unique` (and `np.union1d`, built on it) fill a C++ hash table whose nodes are
small allocations of glibc's heap: freed, they stay resident, about 40 bytes per value, until
the process ends (a 10M-document resolve step held 250 MB of them). Sorting allocates only
arrays, which go back to the OS.
"""

from __future__ import annotations

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (as `np.unique(values)`)."""
    flat = np.sort(values, axis=None)
    if len(flat) < 2:
        return flat
    first = np.empty(len(flat), bool)
    first[0] = True
    np.not_equal(flat[1:], flat[:-1], out=first[1:])
    return flat[first]


def add_sorted(held: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`held` (sorted, distinct) with `values` added: a new sorted array of the distinct union,
    holding `held` about twice at its peak (`np.union1d` copies it about three times)."""
    fresh = sorted_unique(values)
    if len(held):
        at = np.searchsorted(held, fresh)
        present = held[np.minimum(at, len(held) - 1)] == fresh
        fresh, at = fresh[~present], at[~present]
    else:
        at = np.zeros(len(fresh), np.intp)
    return np.insert(held, at, fresh)


def contains(held: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each of `values`, whether it is in `held` (sorted): a binary search each, where
    `np.isin` sorts `held` and `values` together on every call."""
    if not len(held):
        return np.zeros(len(values), bool)
    at = np.searchsorted(held, values)
    return held[np.minimum(at, len(held) - 1)] == values


def run_starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in `values`."""
    first = np.empty(len(values), bool)
    first[:1] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return np.flatnonzero(first)
