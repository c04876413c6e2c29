"""Sums of a scored stream combined range by range equal the sums of one pass over it."""

from __future__ import annotations

import numpy as np
import pytest

from lmforge.pipeline.probes.perplexity_math import document_sums
from lmforge.pipeline.probes.stream_sums import (
    StreamSums,
    document_groups,
    n_groups,
    range_sums,
)


def _stream(seed: int = 0, n_positions: int = 5000, n_docs: int = 40):
    rng = np.random.default_rng(seed)
    losses = rng.gamma(2.0, 2.0, size=n_positions)
    baseline = losses + rng.normal(0.5, 0.1, size=n_positions)
    doc_starts = np.sort(rng.choice(np.arange(1, n_positions), n_docs - 1, replace=False))
    doc_starts = np.r_[0, doc_starts]
    return losses, baseline, doc_starts


def _combined(losses, baseline, doc_starts, cuts, max_groups, order=None) -> StreamSums:
    """The stream cut at `cuts`, each range summed on its own (in `order`), then combined."""
    bounds = list(zip([0, *cuts], [*cuts, losses.size], strict=True))
    docs = np.searchsorted(doc_starts, np.arange(1, losses.size + 1), side="right") - 1
    groups = document_groups(docs, doc_starts.size, max_groups)
    parts = [
        range_sums(
            i,
            {"model": losses[a:b], "bigram": baseline[a:b]},
            groups[a:b],
            n_bytes=b - a,
            ungrouped={"init": losses[a:b] * 2} if i == 0 else None,
        )
        for i, (a, b) in enumerate(bounds)
    ]
    computed = {i: parts[i] for i in (order or range(len(parts)))}  # who finished first
    sums = StreamSums(n_groups(doc_starts.size, max_groups))
    for i in range(len(parts)):
        sums.add(computed[i])
    return sums


def test_ranges_combined_give_the_one_pass_totals_and_document_sums():
    losses, baseline, doc_starts = _stream()
    sums = _combined(losses, baseline, doc_starts, cuts=[700, 701, 2500, 4999], max_groups=1000)
    assert sums.totals["model"][1] == losses.size
    assert sums.mean_nll("model") == pytest.approx(losses.mean(), rel=1e-12)
    assert sums.mean_nll("bigram") == pytest.approx(baseline.mean(), rel=1e-12)
    assert sums.totals["init"] == (pytest.approx(2 * losses[:700].sum(), rel=1e-12), 700)
    assert sums.bytes == losses.size
    nll, base, tokens = sums.by_group("model", "bigram")
    expected_nll, expected_tokens = document_sums(losses, doc_starts)
    np.testing.assert_array_equal(tokens, expected_tokens)
    np.testing.assert_allclose(nll, expected_nll, rtol=1e-12)
    np.testing.assert_allclose(base, document_sums(baseline, doc_starts)[0], rtol=1e-12)


def test_the_figures_do_not_depend_on_which_range_finished_first():
    losses, baseline, doc_starts = _stream(seed=1)
    cuts = list(range(250, 5000, 250))
    in_order = _combined(losses, baseline, doc_starts, cuts, max_groups=7)
    shuffled = list(np.random.default_rng(2).permutation(len(cuts) + 1))
    out_of_order = _combined(losses, baseline, doc_starts, cuts, max_groups=7, order=shuffled)
    assert in_order.totals == out_of_order.totals  # exactly, not approximately
    for a, b in zip(in_order.by_group("model"), out_of_order.by_group("model"), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_range_added_out_of_turn_is_refused():
    sums = StreamSums(1)
    part = range_sums(1, {"model": np.ones(3)}, np.zeros(3, np.int64), 3)
    with pytest.raises(ValueError, match="range 1 added where range 0 is due"):
        sums.add(part)


def test_documents_pool_into_at_most_max_groups_runs_of_consecutive_documents():
    groups = document_groups(np.arange(1000), 1000, 64)
    assert groups[0] == 0 and groups[-1] == 63
    assert np.all(np.diff(groups) >= 0) and np.unique(groups).size == 64
    counts = np.bincount(groups)
    assert counts.max() - counts.min() <= 1  # runs of equal size, to one document
    np.testing.assert_array_equal(document_groups(np.arange(50), 50, 64), np.arange(50))


def test_grouped_sums_keep_the_totals_of_their_documents():
    losses, baseline, doc_starts = _stream(seed=3)
    sums = _combined(losses, baseline, doc_starts, cuts=[1234, 3000], max_groups=6)
    nll, tokens = sums.by_group("model")
    assert nll.size == 6 and tokens.sum() == losses.size
    assert nll.sum() == pytest.approx(losses.sum(), rel=1e-12)
