"""Compression statistics, checked on a hand-counted example."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from lmforge.tokenizer import TokenizerConfig, tokenizer_stats, train_bpe


@pytest.fixture(scope="module")
def bytes_only() -> Tokenizer:
    """No merges (min_frequency unreachable): every byte is one token, 256 + EOT + PAD ids."""
    return train_bpe(["ab cd ab cd"], TokenizerConfig(vocab_size=300, min_frequency=10**6))


def test_stats_on_a_hand_counted_example(bytes_only: Tokenizer) -> None:
    # "ab cd": 5 bytes, 2 words; "é": 2 bytes (0xC3 0xA9), 1 word. One token per byte.
    stats = tokenizer_stats(bytes_only, iter(["ab cd", "é"]))
    assert stats["vocab_size"] == 258
    assert (stats["n_docs"], stats["n_bytes"], stats["n_words"], stats["n_tokens"]) == (2, 7, 3, 7)
    assert stats["bytes_per_token"] == pytest.approx(1.0)
    assert stats["tokens_per_word"] == pytest.approx(7 / 3)
    # distinct ids: a, b, space, c, d, 0xC3, 0xA9
    assert stats["vocab_used_fraction"] == pytest.approx(7 / 258)


def test_a_trained_tokenizer_compresses_its_training_text(
    tok: Tokenizer, corpus: list[str]
) -> None:
    stats = tokenizer_stats(tok, corpus)
    assert stats["bytes_per_token"] > 3.0
    assert stats["tokens_per_word"] < 1.5
    assert 0.0 < stats["vocab_used_fraction"] <= 1.0


def test_stats_of_no_text_are_zero_not_a_division_error(tok: Tokenizer) -> None:
    stats = tokenizer_stats(tok, [])
    assert stats["bytes_per_token"] == stats["tokens_per_word"] == 0.0
    assert stats["vocab_used_fraction"] == 0.0
