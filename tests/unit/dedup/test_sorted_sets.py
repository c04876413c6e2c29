"""Sorted sets of integers: np.unique's results, without its hash table's resident memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lmforge.pipeline.dedup import sorted_sets
from lmforge.pipeline.dedup.sorted_sets import add_sorted, contains, search, sorted_unique


@pytest.mark.parametrize("n, high", [(0, 5), (1, 5), (2, 1), (1000, 50), (5000, 1 << 40)])
def test_sorted_unique_equals_np_unique(n: int, high: int) -> None:
    values = np.random.default_rng(n).integers(0, high, size=(2, n))
    found = sorted_unique(values)
    assert found.dtype == values.dtype
    assert np.array_equal(found, np.unique(values))


def test_adding_batches_gives_the_union_of_them_all() -> None:
    rng = np.random.default_rng(7)
    batches = [rng.integers(0, 3000, size=(2, k)) for k in (0, 1, 400, 900, 50, 2000)]
    held = np.zeros(0, np.int64)
    for batch in batches:
        held = add_sorted(held, batch)
    assert np.array_equal(held, np.unique(np.concatenate(batches, axis=1)))


@pytest.mark.parametrize("held_size", [0, 1, 300])
def test_contains_answers_as_np_isin(held_size: int) -> None:
    rng = np.random.default_rng(held_size)
    held = sorted_unique(rng.integers(-50, 1000, size=held_size))
    values = rng.integers(-100, 1100, size=2000)
    assert np.array_equal(contains(held, values), np.isin(values, held))
    assert contains(held, values[:0]).shape == (0,)


@pytest.mark.parametrize("cached", [0, 1 << 16])
@pytest.mark.parametrize("held_size", [0, 1, 5000])
def test_search_answers_as_searchsorted(monkeypatch, cached: int, held_size: int) -> None:
    """Looked up in ascending order (a held set over `CACHED` values) or as given: the same
    positions, in the values' own order and shape, ties and values past both ends included."""
    monkeypatch.setattr(sorted_sets, "CACHED", cached)
    rng = np.random.default_rng(held_size)
    held = np.sort(rng.integers(0, 3000, size=held_size))
    values = rng.integers(-10, 3010, size=(2, 700))
    found = search(held, values)
    assert found.shape == values.shape
    assert np.array_equal(found, np.searchsorted(held, values))
    assert search(held, values[0, :1]).tolist() == np.searchsorted(held, values[0, :1]).tolist()


def test_adding_to_a_big_set_merges_its_sorted_runs() -> None:
    """A held set of many values and a batch overlapping it: their distinct union."""
    rng = np.random.default_rng(3)
    held = sorted_unique(rng.integers(0, 1 << 20, size=200_000))
    batch = np.concatenate([rng.choice(held, 5000), rng.integers(0, 1 << 21, size=5000)])
    assert np.array_equal(add_sorted(held, batch), np.union1d(held, batch))


PROBE = textwrap.dedent(
    """
    import numpy as np, sys
    from lmforge.pipeline.dedup.sorted_sets import add_sorted

    def rss_mb():
        status = open("/proc/self/status").read()
        return int(status.split("VmRSS:")[1].split()[0]) / 1024

    values = np.random.default_rng(0).integers(0, 1 << 40, size=2_000_000)
    before = rss_mb()
    held = add_sorted(np.zeros(0, np.int64), values)
    if sys.argv[1] == "np.union1d":
        held = np.union1d(np.zeros(0, np.int64), values)
    del held
    print(rss_mb() - before)
    """
)


def resident_rise_mb(how: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, how], capture_output=True, text=True, check=True
    )
    return float(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_no_memory_stays_resident_after_the_set_is_freed() -> None:
    """2M distinct values: the sorted set leaves nothing behind once freed, where numpy's hash
    table (np.union1d; about 40 bytes per value) does, so the check can tell them apart."""
    assert resident_rise_mb("add_sorted") < 10
    if np.lib.NumpyVersion(np.__version__) >= "2.3.0":
        assert resident_rise_mb("np.union1d") > 40
