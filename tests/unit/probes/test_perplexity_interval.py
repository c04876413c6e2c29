"""The bootstrap confidence interval of perplexity resamples whole documents: losses are summed
per document, the interval holds the point estimate, narrows with more documents, and is
reproducible from its seed."""

import math

import numpy as np
import pytest

from lmforge.pipeline.probes.perplexity_math import (
    bootstrap_perplexity_interval,
    bootstrap_ratio_interval,
    document_sums,
)


def test_each_position_is_charged_to_the_document_of_the_token_it_predicts():
    # stream of 7 tokens, documents start at 0, 3 and 5; position i predicts token i + 1
    nll = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    sums, tokens = document_sums(nll, np.array([0, 3, 5]))
    np.testing.assert_array_equal(sums, [3.0, 12.0, 48.0])
    np.testing.assert_array_equal(tokens, [2, 2, 2])


def test_the_interval_holds_the_point_estimate_and_narrows_with_more_documents():
    rng = np.random.default_rng(0)

    def interval(n_docs: int) -> tuple[float, float, float]:
        tokens = rng.integers(50, 400, size=n_docs)
        nll = tokens * rng.normal(4.0, 0.3, size=n_docs)
        point = math.exp(nll.sum() / tokens.sum())
        return (*bootstrap_perplexity_interval(nll, tokens, n_boot=500), point)

    low, high, point = interval(30)
    assert low < point < high
    low_many, high_many, point_many = interval(3000)
    assert low_many < point_many < high_many
    assert (high_many - low_many) < 0.3 * (high - low)


def test_the_same_seed_gives_the_same_interval_and_identical_documents_a_point():
    nll, tokens = np.array([10.0, 30.0, 20.0, 50.0]), np.array([5, 10, 8, 12])
    assert bootstrap_perplexity_interval(nll, tokens, seed=3) == bootstrap_perplexity_interval(
        nll, tokens, seed=3
    )
    low, high = bootstrap_perplexity_interval(np.full(6, 20.0), np.full(6, 10))
    assert low == pytest.approx(math.exp(2.0)) and high == pytest.approx(math.exp(2.0))


def test_empty_or_mismatched_inputs_are_rejected():
    with pytest.raises(ValueError, match="equal, non-zero length"):
        bootstrap_perplexity_interval(np.zeros(0), np.zeros(0))
    with pytest.raises(ValueError, match="equal, non-zero length"):
        bootstrap_perplexity_interval(np.ones(2), np.ones(3))


def test_the_paired_ratio_interval_is_tight_when_the_gap_is_the_same_in_every_document():
    # documents of very different difficulty, the model always 0.2 nats per token better: the
    # perplexities' own intervals overlap widely, the paired ratio is exp(-0.2) in every resample
    rng = np.random.default_rng(1)
    tokens = rng.integers(50, 400, size=40).astype(float)
    baseline = tokens * rng.uniform(3.0, 6.0, size=40)
    model = baseline - 0.2 * tokens
    low, high = bootstrap_ratio_interval(model, baseline, tokens)
    assert low == pytest.approx(math.exp(-0.2)) and high == pytest.approx(math.exp(-0.2))
    model_low, model_high = bootstrap_perplexity_interval(model, tokens)
    base_low, base_high = bootstrap_perplexity_interval(baseline, tokens)
    assert model_high > base_low  # unpaired, the two intervals overlap
    with pytest.raises(ValueError, match="equal, non-zero length"):
        bootstrap_ratio_interval(model, baseline[:3], tokens)
