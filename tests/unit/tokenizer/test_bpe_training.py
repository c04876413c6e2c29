"""Byte-level BPE training: special-token ids, config knobs, reference-text properties C1-C7."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, pre_tokenizers

from lmforge.tokenizer import EOT, PAD, TokenizerConfig, decode_ids, train_bpe

FREQUENT_WORD = "transformer"  # the most frequent long word of the conftest corpus


def test_eot_is_id_0_pad_is_id_1_and_user_tokens_follow(tok: Tokenizer) -> None:
    assert tok.token_to_id(EOT) == 0
    assert tok.token_to_id(PAD) == 1
    assert tok.token_to_id("<|user|>") == 2


def test_a_word_frequent_in_training_becomes_one_token(tok: Tokenizer) -> None:
    assert len(tok.encode(" " + FREQUENT_WORD).ids) == 1
    assert decode_ids(tok, tok.encode(" " + FREQUENT_WORD).ids) == " " + FREQUENT_WORD


def test_a_random_letter_string_is_split_into_several_tokens(tok: Tokenizer) -> None:
    assert len(tok.encode("ksowjmckder").ids) > 1
    assert len(tok.encode(" ksowjmckder").ids) > 1


def test_every_byte_has_a_token_so_nothing_is_unknown(tok: Tokenizer) -> None:
    for byte_char in pre_tokenizers.ByteLevel.alphabet():
        assert tok.token_to_id(byte_char) is not None
    assert tok.model.unk_token is None
    text = "".join(chr(c) for c in range(0x250)) + "\U0001f600\U0010ffff\u4e2d"
    assert decode_ids(tok, tok.encode(text).ids) == text


def test_vocab_size_from_config_caps_the_vocabulary(corpus: list[str]) -> None:
    tok = train_bpe(iter(corpus), TokenizerConfig(vocab_size=300))
    assert tok.get_vocab_size() == 300


def test_min_frequency_above_every_pair_count_learns_no_merges(corpus: list[str]) -> None:
    cfg = TokenizerConfig(vocab_size=600, min_frequency=10**6, special_tokens=["<|a|>"])
    tok = train_bpe(iter(corpus), cfg)
    assert tok.get_vocab_size() == 256 + 3
    assert len(tok.encode(" " + FREQUENT_WORD).ids) == len(FREQUENT_WORD) + 1


def test_training_reads_a_one_shot_generator_and_is_deterministic(corpus: list[str]) -> None:
    cfg = TokenizerConfig(vocab_size=500)
    first = train_bpe((s for s in corpus), cfg)
    second = train_bpe((s for s in corpus), cfg)
    assert first.get_vocab_size() > 300
    assert first.to_str() == second.to_str()


def test_training_rejects_non_string_documents() -> None:
    with pytest.raises(TypeError, match="iterable of str"):
        train_bpe([b"bytes are not text"], TokenizerConfig(vocab_size=300))  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"vocab_size": 257}, "vocab_size"),
        ({"vocab_size": 300, "special_tokens": [EOT]}, "repeats"),
        ({"special_tokens": [""]}, "empty"),
        ({"min_frequency": 0}, "min_frequency"),
    ],
)
def test_config_rejects_impossible_settings_naming_the_key(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TokenizerConfig(**kwargs)


def test_config_rejects_unknown_fields() -> None:
    with pytest.raises(TypeError):
        TokenizerConfig(vocab_sise=300)  # type: ignore[call-arg]
