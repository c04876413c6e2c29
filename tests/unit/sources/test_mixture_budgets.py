"""The tokenizer's sample of a mixture: each source by its tokenizer weight, by default in
proportion to its cleaned bytes, never by the mixture's weights (they are not an input)."""

from __future__ import annotations

from lmforge.pipeline.sources.hash_sample import mixture_budgets


def test_by_default_each_source_gives_its_share_of_the_cleaned_bytes():
    assert mixture_budgets([300, 100], [0.0, 0.0], 40) == [30, 10]


def test_a_tokenizer_weight_sets_the_share():
    assert mixture_budgets([300, 100], [1.0, 1.0], 40) == [20, 20]


def test_without_a_sample_size_the_budget_is_every_byte_the_sources_hold():
    assert mixture_budgets([300, 100], [0.0, 0.0], 0) == [300, 100]


def test_a_source_is_never_given_zero_bytes_which_would_mean_all_of_it():
    assert mixture_budgets([10**9, 1], [0.0, 0.0], 10)[1] == 1
