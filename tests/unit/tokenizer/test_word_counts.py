"""Counting words before BPE, and leaving the rare ones out (`tokenizer.min_word_count`)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from tokenizers import pre_tokenizers

from lmforge.tokenizer import TokenizerConfig, train_bpe
from lmforge.tokenizer.train import (
    byte_level_pre_tokenizer,
    train_bpe_counted,
    train_on_word_counts,
)
from lmforge.tokenizer.word_counts import count_words, feed_counts

ODD_TEXT = (
    "Tabs\tand\n\nnewlines,  double  spaces; it's 42 \u00e9t\u00e9 \U0001f600!\r\n\x00\x85\xa0end "
)


def python_counts(texts: list[str]) -> Counter[str]:
    pre = byte_level_pre_tokenizer()
    return Counter(word for text in texts for word, _ in pre.pre_tokenize_str(text))


def test_counts_are_those_of_the_byte_level_pre_tokenizer(corpus: list[str]) -> None:
    texts = [*corpus, ODD_TEXT]
    assert count_words(iter(texts), byte_level_pre_tokenizer()) == python_counts(texts)


def test_no_byte_level_character_is_whitespace_so_fed_words_split_back_exactly() -> None:
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    assert len(alphabet) == 256
    assert not any(c.isspace() for c in alphabet)
    counts = python_counts([ODD_TEXT, ODD_TEXT * 3])
    split = pre_tokenizers.WhitespaceSplit()
    fed = Counter(w for text in feed_counts(counts) for w, _ in split.pre_tokenize_str(text))
    assert fed == counts


def test_a_frequent_word_is_fed_in_bounded_pieces() -> None:
    pieces = list(feed_counts({"Ġword": 100_000, "x": 1}))
    assert len(pieces) > 5
    assert max(len(p) for p in pieces) <= 1 << 16
    assert sum(p.count("Ġword") for p in pieces) == 100_000
    assert pieces[0] == "x"  # sorted: "x" < "Ġ"


def test_training_on_counted_words_equals_training_on_the_text(corpus: list[str]) -> None:
    texts = [*corpus, ODD_TEXT]
    cfg = TokenizerConfig(vocab_size=600, special_tokens=["<|user|>"], min_word_count=1)
    direct = train_bpe(iter(texts), cfg)
    counted = train_on_word_counts(count_words(iter(texts), byte_level_pre_tokenizer()), cfg)
    assert counted.to_str() == direct.to_str()


def test_rare_words_are_left_out_as_if_the_text_never_held_them() -> None:
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    common = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    rare = ["".join(rng.choice(letters) for _ in range(12)) for _ in range(300)]
    words = [rng.choice(common) for _ in range(3000)] + rare + rare[:100]
    rng.shuffle(words)
    # A leading space on every chunk: each word is one pre-token, "Ġ" + the word.
    text = [" " + " ".join(words[i : i + 50]) for i in range(0, len(words), 50)]
    seen_once = set(rare[100:])
    without = [" ".join(w for w in t.split(" ") if w not in seen_once) for t in text]
    assert sum(python_counts(text).values()) - sum(python_counts(without).values()) == 200
    pruned, counted = train_bpe_counted(iter(text), TokenizerConfig(vocab_size=400))
    assert counted.to_summary() == {
        "sample_distinct_words": len(python_counts(text)),
        "bpe_words": len(python_counts(without)),
    }
    kept_all = TokenizerConfig(vocab_size=400, min_word_count=1)
    assert pruned.to_str() == train_bpe(iter(without), kept_all).to_str()
    assert pruned.to_str() != train_bpe(iter(text), kept_all).to_str()


def test_min_word_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="min_word_count"):
        TokenizerConfig(min_word_count=0)
