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
    return sorted_unique_of_sorted(np.sort(values, axis=None))


def add_sorted(held: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`held` (sorted, distinct) with `values` added: a new sorted array of the distinct union,
    in time linear in both (a stable sort of two sorted runs is timsort's merge of them; a
    binary search of each new value into a big `held` and `np.insert` cost 2.5x), holding about
    twice the union at its peak (`np.union1d` copies it about three times)."""
    fresh = sorted_unique(values)
    if not len(held):
        return fresh
    union = np.concatenate((held, fresh))
    union.sort(kind="stable")
    return sorted_unique_of_sorted(union)


def sorted_unique_of_sorted(flat: np.ndarray) -> np.ndarray:
    """The distinct values of an ascending array: the first of each run."""
    return flat[run_starts(flat)]


CACHED = 1 << 16
"""Values of a sorted array (512 KB of int64) that binary searches in random order still find
in the CPU's caches."""


def search(held: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`np.searchsorted(held, values)`, the values looked up in ascending order when `held`
    outgrows the caches: a binary search for a random value misses the cache at almost every
    step of a big array (3M nodes: 5x slower), while ascending searches share their paths and
    numpy starts each where the last ended."""
    flat = np.asarray(values).ravel()
    if len(held) <= CACHED or len(flat) < 2:
        return np.searchsorted(held, values)
    order = np.argsort(flat)
    at = np.empty(len(flat), np.intp)
    at[order] = np.searchsorted(held, flat[order])
    return at.reshape(np.shape(values))


def contains(held: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each of `values`, whether it is in `held` (sorted): a binary search each, where
    `np.isin` sorts `held` and `values` together on every call."""
    if not len(held):
        return np.zeros(len(values), bool)
    at = search(held, values)
    return held[np.minimum(at, len(held) - 1)] == values


def run_starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in `values`."""
    first = np.empty(len(values), bool)
    first[:1] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return np.flatnonzero(first)
