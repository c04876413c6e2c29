"""Diversity of samples: distinct-n and repetition are computed exactly as documented."""

import pytest

from lmforge.pipeline.probes.diversity import (
    distinct_n,
    diversity_stats,
    ngrams,
    repeated_ngram_fraction,
    repetition_rate,
)


def test_ngrams_slide_one_token_at_a_time():
    assert ngrams([1, 2, 3, 4], 2) == [(1, 2), (2, 3), (3, 4)]
    assert ngrams([1, 2], 3) == []


def test_distinct_n_pools_ngrams_over_all_samples():
    samples = [["the", "cat", "sat"], ["the", "cat", "ran"]]
    assert distinct_n(samples, 1) == pytest.approx(4 / 6)  # the, cat, sat, ran
    assert distinct_n(samples, 2) == pytest.approx(3 / 4)  # (the cat) twice


def test_identical_samples_halve_distinct_n_and_unique_samples_keep_it_at_one():
    sample = [1, 2, 3, 4, 5]
    assert distinct_n([sample], 2) == 1.0
    assert distinct_n([sample, sample], 2) == 0.5


def test_distinct_n_without_any_ngram_is_zero():
    assert distinct_n([[], [7]], 2) == 0.0


def test_a_looping_sample_has_a_high_repeated_fraction_and_a_varied_one_has_none():
    loop = [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]
    assert repeated_ngram_fraction(loop, 4) == pytest.approx(1 - 3 / 9)
    assert repeated_ngram_fraction(list(range(12)), 4) == 0.0
    assert repeated_ngram_fraction([1, 2], 4) == 0.0


def test_repetition_rate_is_the_share_of_samples_with_a_repeated_ngram():
    samples = [[1, 2, 3, 4, 1, 2, 3, 4], list(range(8)), [5, 5, 5, 5, 5], [9]]
    assert repetition_rate(samples, 4) == pytest.approx(2 / 4)


def test_diversity_stats_reports_logged_keys():
    stats = diversity_stats([[1, 2, 3, 4, 1, 2, 3, 4], [5, 6, 7]])
    assert stats == {
        "distinct_1": pytest.approx(7 / 11),
        "distinct_2": pytest.approx(6 / 9),
        "repetition_rate_4gram": 0.5,
        "mean_repeated_4gram_fraction": pytest.approx((1 - 4 / 5) / 2),
        "mean_length": 5.5,
    }


def test_no_samples_is_an_error():
    with pytest.raises(ValueError, match="at least one sample"):
        repetition_rate([])
