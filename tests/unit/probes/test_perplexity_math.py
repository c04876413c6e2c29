"""Perplexity is exp(mean token cross-entropy); bits per byte is total NLL / (ln 2 * bytes) (F1)."""

import math

import pytest

from lmforge.pipeline.probes.perplexity_math import (
    bits_per_byte,
    bits_per_token,
    mean_nll,
    perplexity,
    utf8_byte_count,
)


def test_uniform_model_over_v_tokens_has_perplexity_v():
    assert perplexity(math.log(50257)) == pytest.approx(50257)


def test_perplexity_of_a_perfect_model_is_one():
    assert perplexity(0.0) == 1.0


def test_perplexity_overflow_and_infinite_loss_give_inf():
    assert perplexity(1000.0) == math.inf
    assert perplexity(math.inf) == math.inf


def test_negative_cross_entropy_is_rejected():
    with pytest.raises(ValueError, match="never negative"):
        perplexity(-0.1)


def test_bits_per_byte_of_a_uniform_byte_model_is_eight():
    n_bytes = 1000
    assert bits_per_byte(n_bytes * math.log(256), n_bytes) == pytest.approx(8.0)


def test_bits_per_byte_does_not_depend_on_how_many_tokens_cover_the_text():
    # The same 12-byte text, coded with 6 tokens at 2 nats or 3 tokens at 4 nats: same total.
    assert bits_per_byte(6 * 2.0, 12) == pytest.approx(bits_per_byte(3 * 4.0, 12))
    assert bits_per_byte(12.0, 12) == pytest.approx(1 / math.log(2))


def test_bits_per_byte_needs_bytes():
    with pytest.raises(ValueError, match="n_bytes"):
        bits_per_byte(1.0, 0)


def test_mean_nll_and_bits_per_token():
    assert mean_nll(10.0, 4) == 2.5
    assert bits_per_token(math.log(2)) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n_tokens"):
        mean_nll(1.0, 0)


def test_utf8_byte_count_counts_bytes_not_characters():
    assert utf8_byte_count(["écoute", "ab"]) == 7 + 2
